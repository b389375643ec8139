"""The new-run form, generated from RunConfig's fields: labels, tooltips, ranges and groups come from the field
metadata, so a new config field appears in the form without UI code. Plain functions, tested without a browser.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from trainer.config import GROUPS, ConfigError, RunConfig

GROUP_TITLES = {
    "model": "Model",
    "data": "Data",
    "rewards": "Rewards",
    "grpo": "GRPO",
    "lora": "LoRA",
    "generation": "Generation",
    "advanced": "Advanced",
}


@dataclass(frozen=True)
class FieldSpec:
    """What the UI needs to draw one config field."""

    name: str
    label: str
    help: str
    group: str
    kind: str  # "text", "multiline", "int", "float", "bool", "choice", "list", "rewards"
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple | None = None
    advanced: bool = False


def form_fields(defaults: RunConfig | None = None) -> list[FieldSpec]:
    """One spec per RunConfig field, in declaration order, starting from ``defaults`` (RunConfig() if None)."""
    hints = typing.get_type_hints(RunConfig)
    defaults = defaults or RunConfig()
    specs = []
    for f in dataclasses.fields(RunConfig):
        meta, hint = f.metadata, hints[f.name]
        if f.name == "reward_funcs":
            kind = "rewards"
        elif meta.get("choices"):
            kind = "choice"
        elif typing.get_origin(hint) is list:
            kind = "list"
        else:
            kind = {bool: "bool", int: "int", float: "float"}.get(hint, "text")
        if f.name == "system_prompt":
            kind = "multiline"
        rng = _range_note(meta.get("min"), meta.get("max"))
        specs.append(
            FieldSpec(
                name=f.name,
                label=f.name,
                help=meta["help"] + (f" ({rng})" if rng else ""),
                group=meta["group"],
                kind=kind,
                default=getattr(defaults, f.name),
                minimum=meta.get("min"),
                maximum=meta.get("max"),
                choices=meta.get("choices"),
                advanced=meta.get("advanced", False) or meta["group"] == "advanced",
            )
        )
    return specs


def grouped_fields(defaults: RunConfig | None = None) -> list[tuple[str, list[FieldSpec]]]:
    """The form's sections in order, each with its fields; the last one holds every advanced field."""
    specs = form_fields(defaults)
    sections = [(g, [s for s in specs if s.group == g and not s.advanced]) for g in GROUPS if g != "advanced"]
    sections.append(("advanced", [s for s in specs if s.advanced]))
    return [(g, fields) for g, fields in sections if fields]


def to_widget_value(spec: FieldSpec, value: Any) -> Any:
    """A config value as its widget shows it (lists as comma-separated text, except the reward checklist)."""
    if spec.kind == "list":
        return ", ".join(str(v) for v in value)
    return value


def config_from_form(
    names: list[str], values: list[Any], check_rewards: bool = True, check_files: bool = True
) -> tuple[RunConfig | None, list[str]]:
    """Build a config from the form's widget values. Returns (config, problems); config is None if a value could
    not even be read, and problems lists everything wrong at once (see RunConfig.validate for the two checks)."""
    try:
        config, _ = RunConfig.from_dict(form_mapping(names, values), check_files=check_files)
    except ConfigError as exc:
        return None, exc.problems
    return config, config.validate(check_rewards=check_rewards, check_files=check_files)


def form_mapping(names: list[str], values: list[Any]) -> dict[str, Any]:
    """The form's widget values as a config mapping (text trimmed, except the system prompt)."""
    return {
        name: value.strip() if isinstance(value, str) and name != "system_prompt" else value
        for name, value in zip(names, values)
    }


def _range_note(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"{lo:g} to {hi:g}"
    if lo is not None:
        return f"at least {lo:g}"
    return f"at most {hi:g}" if hi is not None else ""


# --- presets --------------------------------------------------------------------------------------------------------
TINY_PRESET = "Tiny offline demo (CPU)"


def default_config() -> RunConfig:
    """What the form starts with: the reference recipe on a GPU machine, the offline tiny demo without one."""
    from trainer.launch import gpu_visible

    return presets()[TINY_PRESET] if not gpu_visible() else RunConfig()


def tiny_demo() -> RunConfig:
    """The offline demo (examples/tiny-offline.yaml): builtin:tiny learns builtin:arithmetic on a CPU in about a
    minute. It departs from the reference recipe where a tiny model on a CPU needs it (see the YAML's comments)."""
    return RunConfig(
        name="tiny-offline",
        model_name_or_path="builtin:tiny",
        dataset_name="builtin:arithmetic",
        reward_funcs=["correctness", "int", "strict_format", "soft_format", "xmlcount"],
        reward_weights=[1.0] * 5,
        per_device_train_batch_size=32,
        learning_rate=1e-4,
        max_steps=100,
        max_grad_norm=1.0,
        max_prompt_length=128,
        max_completion_length=32,
        lora_r=8,
        lora_alpha=16,
        load_in_4bit=False,
        use_vllm=False,
        gradient_checkpointing=False,
        max_seq_length=256,
        save_steps=20,
    )


def presets() -> dict[str, RunConfig]:
    """The form's presets: the offline tiny demo, the reference recipe, and Qwen2.5 0.5B/1.5B on GSM8K. Built in
    code so they work from an installed package; tests check examples/*.yaml say the same."""
    reference = RunConfig(name="gsm8k-llama3b", reward_weights=[1.0] * 5)
    qwen = {
        size: dataclasses.replace(
            reference,
            name=f"gsm8k-qwen2.5-{size.lower()}",
            model_name_or_path=f"Qwen/Qwen2.5-{size}-Instruct",
            load_in_4bit=size != "0.5B",
        )
        for size in ("0.5B", "1.5B")
    }
    return {
        TINY_PRESET: tiny_demo(),
        "Reference: Llama-3.2-3B-Instruct on GSM8K": reference,
        "Qwen2.5-0.5B-Instruct on GSM8K": qwen["0.5B"],
        "Qwen2.5-1.5B-Instruct on GSM8K": qwen["1.5B"],
    }
