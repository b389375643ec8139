"""The numbers and texts a caller hands an action, checked for type and range before anything uses them, each
refusal one sentence naming the argument and what it takes.

Values arrive from JSON (the named API: ``10**30``, ``2**63``, ``1e308``, ``"x"``, ``null``, a lone surrogate),
from form widgets (a float ``200.0`` from gr.Number) and from the command line. Unchecked, an id of ``10**30``
reached SQLite ("Python int too large to convert to SQLite INTEGER", with a traceback in the log), ``/evaluate``
took a million samples per problem, and a text holding ``\\ud800`` made the reply encoder fail so that no answer
came at all. The ranges of the jobs that load a model live here too, so the CLI, the form and the API share them.
"""

from __future__ import annotations

import math
from typing import Any

from app.actions.base import ActionError

MAX_ID = 2**63 - 1  # SQLite's INTEGER and PostgreSQL's BIGINT
MAX_STEP = 2**31 - 1  # a step, a log line's cursor: the columns are 32-bit on PostgreSQL
# the jobs that load a model (the same for the CLI, the Compare page's form and the API)
EVAL_K = (1, 5000)  # held-out problems: the held-out split is capped below this anyway
EVAL_SAMPLES = (0, 16)  # sampled answers per problem for pass@1: 16 already costs 17 generations a problem
PROBE_PROMPTS = (1, 64)  # prompts a probe samples groups for: a few groups tell whether a run has a signal
MAX_SAMPLES_LIMIT = 10_000  # rows /samples returns at most
MAX_TEXT = 100_000  # characters of a search, a key list or a name


def shown(value: Any) -> str:
    """A value as a refusal quotes it: short, one line, ASCII (a 5,000-digit int can't even become a str)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return f"a {int(value.bit_length() * math.log10(2)) + 1}-digit number"
    text = ascii(value)
    return text if len(text) <= 40 else text[:37] + "..."


def whole(name: str, value: Any, low: int, high: int) -> int:
    """``value`` as an int from ``low`` to ``high``: an int, or a float or text that is exactly a whole number (a
    form's 200.0); a bool, None, NaN, a fraction or anything else is refused."""
    number = _as_int(value)
    if number is None or not low <= number <= high:
        raise ActionError(f"{name} must be a whole number from {low} to {high}, got {shown(value)}")
    return number


def run_id(value: Any, name: str = "run_id") -> int:
    """A run's (or an evaluation's) id: a whole number from 1."""
    return whole(name, value, 1, MAX_ID)


def step(value: Any, name: str = "step", low: int = 0) -> int:
    """A step or a cursor: a whole number from ``low``."""
    return whole(name, value, low, MAX_STEP)


def optional_step(value: Any, name: str = "step") -> int | None:
    """A step, or None for "the newest"."""
    return None if value is None else step(value, name)


def text(name: str, value: Any, limit: int = MAX_TEXT, empty: str | None = "") -> str:
    """``value`` as text of at most ``limit`` characters, without a lone surrogate (no UTF-8 encoder takes one);
    None reads as ``empty`` where that is allowed."""
    if value is None and empty is not None:
        return empty
    if not isinstance(value, str):
        raise ActionError(f"{name} must be text, got {shown(value)}")
    if len(value) > limit:
        raise ActionError(f"{name} must be at most {limit:,} characters, got {len(value):,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ActionError(
            f"{name} holds a lone surrogate ({ascii(value[exc.start])}) at character {exc.start + 1}: "
            "it is no character and can't be stored or sent"
        ) from None
    return value


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str) and value.isascii() and value.strip().lstrip("+-").isdigit() and len(value) <= 30:
        return int(value)
    return None
