"""The rules that need nothing but the config: each field's range, choices and size bounds, and the settings that go
together (a batch of whole groups, lengths that fit, known trackers). RunConfig.field_problems applies them.

These take plain values (a field and its value, a batch's sizes), not a RunConfig, so that the dataclass
(trainer.config.run_config) can import them without this module importing it back; they import nothing from
trainer.loading, trainer.job or trainer.scoring. The rules that need something outside the config (a model, a data
set, the reward registry, the GPU path, a cluster, the operator's access) sit beside this module, one module per
concept, composed by trainer.review.

Every message names the setting, the value it got (shortened, so a huge value is never echoed whole) and what is
expected, e.g. "beta -1: expected a value from 0 to 10". A field's own problems are :class:`Problem` values that name
their field, so a form places them by the field, not by their words.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainer.config.values import shorten
from trainer.safe_text import text_problem

# Size bounds on what a config may hold: it is stored on the run row and shown in the dashboard.
MAX_TEXT_CHARS = 1_000
MAX_PROMPT_CHARS = 20_000
MAX_LIST_ITEMS = 64
# The text settings that may span lines (prompt text); every other one reaches a job script, a command line or a
# terminal.
MULTILINE_FIELDS = ("system_prompt", "few_shot_examples")


class Problem(str):
    """A problem with a config that names the setting it is about, so that a form shows it beside that setting's
    field whatever its sentence says ("group size 300: at most 256 completions per prompt" is num_generations'). It
    is the sentence itself, a str, so whatever prints, joins, compares or stores problems reads it unchanged."""

    field: str

    def __new__(cls, field: str, sentence: str) -> Problem:
        problem = super().__new__(cls, sentence)
        problem.field = field
        return problem

    def __reduce__(self) -> tuple[type[Problem], tuple[str, str]]:
        # a copy or a pickle keeps the field (str's own would rebuild it from the sentence alone)
        return type(self), (self.field, str(self))


# --- one field ------------------------------------------------------------------------------------------------------
def check_range(f: dataclasses.Field, value: Any) -> list[str]:
    """Choices, finiteness, the field's range, and size bounds (what a run row stores must stay small); each
    problem names the field (:class:`Problem`)."""
    return [Problem(f.name, sentence) for sentence in _range_problems(f, value)]


def _range_problems(f: dataclasses.Field, value: Any) -> list[str]:
    meta = f.metadata
    if meta.get("choices") and value not in meta["choices"]:
        return [f"{f.name} {shorten(value)}: expected one of {', '.join(meta['choices'])}"]
    if isinstance(value, str):
        limit = MAX_PROMPT_CHARS if f.name in MULTILINE_FIELDS else MAX_TEXT_CHARS
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
def check_batch(
    per_device: int, accumulation: int, processes: int, group: int, group_field: dataclasses.Field
) -> list[str]:
    """The group size within the range ``group_field`` (num_generations) declares, and that the completions of one
    step split into whole groups (worded in GRPO's terms)."""
    name, lo, hi = group_field.name, group_field.metadata["min"], group_field.metadata["max"]
    if group < lo:
        sentence = f"group size {group}: GRPO needs at least {lo} completions per prompt ({name} >= {lo})"
        return [Problem(name, sentence)]
    if group > hi:
        return [Problem(name, f"group size {group}: at most {hi} completions per prompt")]
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
