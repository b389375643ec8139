"""How a setting is declared: the dataclass field with the metadata the form, the rules and TRL's arguments read (help
text, form section, range or choices, TRL's name), one helper per form section, and the constants defaults use.

RunConfig (trainer.config.run_config) is the list of settings written with these helpers; the rules
(trainer.config.rules) and the form (app/web/widgets/form.py) read the metadata back with ``dataclasses.fields``."""

from __future__ import annotations

from dataclasses import field
from typing import Any

SYSTEM_PROMPT = "Respond in the following format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>"
GROUPS = ("model", "data", "rewards", "grpo", "lora", "generation", "advanced", "cluster")
EXECUTORS = ("local", "slurm")


def setting(
    default: Any,
    help: str,
    group: str,
    *,
    min: float | None = None,
    max: float | None = None,
    choices: tuple | None = None,
    advanced: bool = False,
    trl: bool | str = False,
) -> Any:
    """A dataclass field with the metadata the validator, the UI and the TRL conversion read: help text, group,
    valid range, and ``trl``: True passes the setting to TRL's GRPOConfig under its own name, a string under that
    name (see trainer.job.trl_args)."""
    meta = {"help": help, "group": group, "min": min, "max": max, "choices": choices, "advanced": advanced, "trl": trl}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def _section(group: str, trl: bool = False):
    """``setting`` for the fields of one section of the form, so a field's declaration doesn't repeat its group (nor,
    in the sections that are TRL's own GRPOConfig settings, that TRL takes it)."""

    def declare(default: Any, help: str, **options: Any) -> Any:
        return setting(default, help, group, **{"trl": trl, **options})

    declare.__name__ = declare.__qualname__ = group
    return declare


model, data, rewards, grpo, lora, generation, advanced, cluster = (
    _section(group, trl=group in ("grpo", "generation")) for group in GROUPS
)
