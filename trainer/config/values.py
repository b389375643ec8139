"""Reading a config mapping's values: each into its field's type, and the keys that are no field sorted into typos
(problems) and other tools' keys (notes) by trainer.config.keys.

These take plain values (a mapping and the fields' types), not a RunConfig, so that the dataclass
(trainer.config.run_config) can import them without this module importing it back. Every message names the setting,
the value it got (shortened by :func:`shorten`, so a huge value is never echoed whole) and what is expected.
"""

from __future__ import annotations

import typing
from typing import Any

from trainer.config.keys import sort_unknown

# The largest whole number a config may hold, either way: a signed 64-bit integer, what SQLite stores and what
# orjson (Gradio's encoder) writes. Every setting's range lies far inside it. A larger one is refused as the value is
# read, not kept to be echoed: /validate's answer carried max_steps 2**70 back, orjson could not write it, and the
# client got no answer at all (issue 58.4).
MAX_WHOLE = 2**63 - 1


# --- reading values -------------------------------------------------------------------------------------------------
def read_values(
    data: dict[str, Any], hints: dict[str, Any], ranges: dict[str, str] | None = None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The values of ``data`` whose keys are fields (``hints`` maps each field to its type), each read as its type.

    Returns (values, problems, notes): a problem for each value of the wrong type and for each key that is close to
    a field's name (a typo: trainer.config.keys), a note for each other unknown key. A number beyond any setting's
    range (:data:`MAX_WHOLE`, or a float's) is a problem saying the field's range from ``ranges`` ("a value from 1
    to 1,000,000"), and is not among the values.
    """
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in data.items():
        if key not in hints:
            continue
        try:
            values[key] = coerce(value, hints[key])
        except OverflowError:
            expected = (ranges or {}).get(key) or f"{type_name(hints[key])} of at most 18 digits"
            problems.append(f"{key} {_as_number(value)}: expected {expected}")
        except (TypeError, ValueError):
            problems.append(f"{key}: expected {type_name(hints[key])}, got {shorten(value)}")
    mistyped, notes = sort_unknown([k for k in data if k not in hints], hints)
    return values, problems + mistyped, notes


def coerce(value: Any, hint: Any) -> Any:
    """``value`` as the type ``hint`` names (text from a form, a CLI flag or YAML included); raises TypeError or
    ValueError when it can't be read as one, OverflowError for a whole number beyond :data:`MAX_WHOLE` either way
    (or a number too large for a float)."""
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
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            raise OverflowError  # "1e400" in YAML is text, and infinite as a float: beyond any range, not a fraction
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        whole = int(value)
        if not -MAX_WHOLE <= whole <= MAX_WHOLE:
            raise OverflowError
        return whole
    if hint is float:
        if isinstance(value, bool):
            raise TypeError
        return float(value)  # PyYAML reads 5e-6 (no dot) as a string; float() accepts it
    if hint is str:
        if not isinstance(value, (str, int, float)):
            raise TypeError
        return str(value)
    return value


def _as_number(value: Any) -> str:
    """A number beyond any range as the range rules write a value out of range (trainer.config.rules: ``1e+23``), or
    shortened when it is none a float can hold."""
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError, OverflowError):
        return shorten(value)


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
