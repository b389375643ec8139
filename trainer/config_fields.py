"""The field helper of RunConfig (trainer.config) and the constants its defaults use, kept apart so that config.py
holds the settings themselves and stays within the module size limit."""

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
