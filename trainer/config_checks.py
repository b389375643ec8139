"""The checks behind RunConfig: reading a value into its field's type, and the per-field and per-setting rules.

These take plain values (a field and its value, a batch's sizes), not a RunConfig, so that ``trainer.config`` can
import them without this module importing it back; they import nothing from trainer.loading, trainer.job or
trainer.scoring. Checks that need something outside the config (the reward registry, a model, a data set, the GPU
path, a cluster) are composed above RunConfig, in trainer.config_review.

Every message names the setting, the value it got (shortened, so a huge value is never echoed whole) and what is
expected, e.g. "beta -1: expected a value from 0 to 10".
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from trainer.config_keys import sort_unknown
from trainer.safe_text import text_problem

# Size bounds on what a config may hold: it is stored on the run row and shown in the dashboard.
MAX_TEXT_CHARS = 1_000
MAX_PROMPT_CHARS = 20_000
MAX_LIST_ITEMS = 64
# The one text setting that may span lines; every other one reaches a job script, a command line or a terminal.
MULTILINE_FIELDS = ("system_prompt",)


# --- reading values -------------------------------------------------------------------------------------------------
def read_values(data: dict[str, Any], hints: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """The values of ``data`` whose keys are fields (``hints`` maps each field to its type), each read as its type.

    Returns (values, problems, notes): a problem for each value of the wrong type and for each key that is close to
    a field's name (a typo: trainer.config_keys), a note for each other unknown key.
    """
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in data.items():
        if key not in hints:
            continue
        try:
            values[key] = coerce(value, hints[key])
        except (TypeError, ValueError, OverflowError):
            problems.append(f"{key}: expected {type_name(hints[key])}, got {shorten(value)}")
    mistyped, notes = sort_unknown([k for k in data if k not in hints], hints)
    return values, problems + mistyped, notes


def coerce(value: Any, hint: Any) -> Any:
    """``value`` as the type ``hint`` names (text from a form, a CLI flag or YAML included); raises TypeError or
    ValueError when it can't be read as one."""
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        if isinstance(value, str):  # "q_proj, v_proj" from a form or a CLI flag
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise TypeError
        return [coerce(v, item) for v in value]
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
            return value.lower() in ("true", "yes")
        raise TypeError
    if hint is int:
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                # "1e20" (YAML reads exponents without a dot as text): a range problem, not a type one
                value = float(value)
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        return int(value)
    if hint is float:
        if isinstance(value, bool):
            raise TypeError
        return float(value)  # PyYAML reads 5e-6 (no dot) as a string; float() accepts it
    if hint is str:
        if not isinstance(value, (str, int, float)):
            raise TypeError
        return str(value)
    return value


def type_name(hint: Any) -> str:
    """A type in the words of an error message ("a whole number", "a list of text")."""
    if typing.get_origin(hint) is list:
        return f"a list of {type_name(typing.get_args(hint)[0])}"
    return {int: "a whole number", float: "a number", bool: "true or false", str: "text"}.get(hint, str(hint))


def shorten(value: Any, limit: int = 60) -> str:
    """A value's repr for an error message, cut so that a huge value is never echoed back whole."""
    text = (
        repr(value)
        if not isinstance(value, (list, dict)) or len(value) < 20
        else f"<{type(value).__name__} of {len(value)} items>"
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- one field ------------------------------------------------------------------------------------------------------
def check_range(f: dataclasses.Field, value: Any) -> list[str]:
    """Choices, finiteness, the field's range, and size bounds (what a run row stores must stay small)."""
    meta = f.metadata
    if meta.get("choices") and value not in meta["choices"]:
        return [f"{f.name} {shorten(value)}: expected one of {', '.join(meta['choices'])}"]
    if isinstance(value, str):
        limit = MAX_PROMPT_CHARS if f.name == "system_prompt" else MAX_TEXT_CHARS
        if len(value) > limit:
            return [f"{f.name} is {len(value):,} characters long: at most {limit:,}"]
        unsafe = text_problem(f.name, value, multiline=f.name in MULTILINE_FIELDS)
        return [unsafe] if unsafe else []
    if isinstance(value, list):
        if len(value) > MAX_LIST_ITEMS:
            return [f"{f.name} has {len(value)} items: at most {MAX_LIST_ITEMS}"]
        found = [p for i, item in enumerate(value) for p in check_number(f"{f.name}[{i}]", item, None, None)]
        for i, item in enumerate(value):
            if isinstance(item, str) and len(item) > MAX_TEXT_CHARS:
                found.append(f"{f.name}[{i}] is {len(item):,} characters long: at most {MAX_TEXT_CHARS:,}")
            elif isinstance(item, str) and (unsafe := text_problem(f"{f.name}[{i}]", item)):
                found.append(unsafe)
        return found
    return check_number(f.name, value, meta.get("min"), meta.get("max"))


def check_number(name: str, value: Any, lo: float | None, hi: float | None) -> list[str]:
    """NaN, infinity and values outside ``lo``..``hi`` (either may be None); anything but a number passes."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return []
    ranged = lo is not None or hi is not None
    if value != value:  # NaN
        return [f"{name} is NaN: expected {range_text(lo, hi) if ranged else 'a number'}"]
    if value in (float("inf"), float("-inf")):
        return [f"{name} is {value}: expected a finite number" + (f", {range_text(lo, hi)}" if ranged else "")]
    if lo is not None and value < lo or hi is not None and value > hi:
        return [f"{name} {value:g}: expected {range_text(lo, hi)}"]
    return []


def range_text(lo: float | None, hi: float | None) -> str:
    """ "a value from 0 to 10", "at least 1" or "at most 0.9"."""
    if lo is not None and hi is not None:
        return f"a value from {_number(lo)} to {_number(hi)}"
    return f"at least {_number(lo)}" if lo is not None else f"at most {_number(hi)}"


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() and abs(value) >= 1000 else f"{value:g}"


# --- settings that go together --------------------------------------------------------------------------------------
def check_batch(per_device: int, accumulation: int, processes: int, group: int) -> list[str]:
    """The group size, and that the completions of one step split into whole groups (worded in GRPO's terms)."""
    if group < 2:
        return [f"group size {group}: GRPO needs at least 2 completions per prompt (num_generations >= 2)"]
    if group > 256:
        return [f"group size {group}: at most 256 completions per prompt"]
    batch = per_device * accumulation * processes
    if batch % group:
        devices = f" × {processes} processes" if processes > 1 else ""
        return [
            f"{per_device} completions per device × {accumulation} accumulation steps{devices} = {batch} completions "
            f"per step is not divisible by the group size {group}: use a multiple of {group} "
            f"(e.g. per_device_train_batch_size {group})"
        ]
    return []


def check_generation_batch(per_device: int, processes: int, steps_per_generation: int, group: int) -> list[str]:
    """That a generation batch (``per_device`` × ``processes`` × ``steps_per_generation`` completions) splits into
    whole groups, as TRL's GRPOConfig requires (trl 1.16.0 grpo_config.py:1131); 0 steps means TRL's default
    (gradient_accumulation_steps), which :func:`check_batch` covers."""
    batch = per_device * processes * steps_per_generation
    if not steps_per_generation or batch % group == 0:
        return []
    return [
        f"steps_per_generation {steps_per_generation}: a generation batch of {batch} completions is not divisible by "
        f"the group size {group}: use a steps_per_generation that makes it a multiple of {group}, or 0"
    ]


TRACKERS = ("trackio", "wandb", "tensorboard", "mlflow")  # report_to's choices, TRL's (transformers') names


def check_trackers(report_to: list[str]) -> list[str]:
    """That every tracker of ``report_to`` is one grpo-studio can install as an extra (names as TRL spells them)."""
    unknown = [name for name in report_to if name not in TRACKERS]
    if not unknown:
        return []
    return [f"report_to {', '.join(map(shorten, unknown))}: expected trackers among {', '.join(TRACKERS)}"]


def check_lengths(prompt: int, completion: int, sequence: int) -> list[str]:
    """That a prompt and its completion fit the sequence length the model is loaded for."""
    if prompt + completion <= sequence:
        return []
    return [
        f"max_prompt_length {prompt} + max_completion_length {completion} exceeds max_seq_length {sequence}: "
        "raise max_seq_length or shorten one of them"
    ]
