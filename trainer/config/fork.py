"""The rules of a fork's settings: a fork (trainer.supervise.fork) continues a parent's checkpoint, so the settings that
change what the saved adapter *is* may not change (:data:`SHAPE_SETTINGS`, each with its reason), a changed key must
be a setting, and the fork must have steps left to train past its checkpoint."""

from __future__ import annotations

from collections.abc import Iterable

from trainer.config.keys import unknown_setting
from trainer.config.run_config import RunConfig

# Settings a fork may not change, and why: the checkpoint's adapter would not fit, or would not compute what it did.
SHAPE_SETTINGS = {
    "model_name_or_path": "the checkpoint's adapter was trained on the parent's base model",
    "lora_r": "the adapter's matrices have the parent's rank",
    "lora_alpha": "the adapter's output is scaled by alpha / rank, so the fork would not start where the parent was",
    "lora_target_modules": "the adapter exists only on the parent's modules",
    "load_in_4bit": "the adapter was trained against the parent's base weights (4-bit and 16-bit differ)",
    "deepspeed_stage": "the checkpoint's optimizer state is saved in the parent's DeepSpeed layout",
}


def change_problems(changes: Iterable[str]) -> list[str]:
    """The changed keys a fork refuses before reading their values: a shape setting, or a key that is no setting."""
    changes = list(changes)
    fields = RunConfig.__dataclass_fields__
    refused = [f"{key} can't change in a fork: {SHAPE_SETTINGS[key]}" for key in changes if key in SHAPE_SETTINGS]
    return refused + [unknown_setting(key, fields) for key in changes if key not in fields]


def steps_problems(config: RunConfig, step: int) -> list[str]:
    """A fork from ``step`` whose max_steps leaves nothing to train."""
    if config.max_steps > step:
        return []
    return [
        f"max_steps {config.max_steps} is not past the fork's step {step}: there would be nothing to train "
        f"(set max_steps higher, e.g. max_steps={step + config.max_steps})"
    ]
