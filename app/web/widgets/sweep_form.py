"""The New run form's Sweep section read into a ``sweep:`` block (docs/sweeps.md § Defining a sweep), which
app.actions.sweep then checks with the config's own parser (trainer/config/sweep.py) like a file's block.

The section takes the swept settings as text, one a line, ``setting = values or range``:

- ``beta = 0, 0.04``: a list of values;
- ``learning_rate = 1e-5..1e-3 x3 log``: a range with a count (``linear`` unless ``log``);
- ``temperature = 0.7..1.2``: a search range (random and tpe only).

This module only turns that text into the block's shape (a list, or ``{low, high, count, scale}`` with the numbers
still as text); whether a setting exists, is sweepable, takes a range, or has low below high is the parser's to say,
so the rules are written once. A line it cannot read at all is said here, in the parser's way: one sentence naming
the setting and what is expected.
"""

from __future__ import annotations

import re
from typing import Any

from app.actions.sweeps import ProbeFound, ProbeNews, point_text
from app.markup import md
from app.web.widgets.verdict import verdict

EXAMPLE = "beta = 0, 0.04\nlearning_rate = 1e-5..1e-3 x3 log"
SHAPES = "values (0, 0.04), a range with a count (1e-5..1e-3 x3 log) or a search range (0.7..1.2)"
_LINE = re.compile(r"^([^=:]+?)\s*[=:]\s*(.*)$")
_RANGE = re.compile(r"^(?P<low>\S+?)\s*\.\.\s*(?P<high>[^\s]+)(?P<rest>.*)$")


def settings_of(text: str | None) -> tuple[dict[str, Any], list[str]]:
    """The swept settings the section's text names (setting -> a list of values as text, or a range mapping) and the
    lines it could not read, each in one sentence. Blank lines and ``#`` comments are skipped."""
    settings: dict[str, Any] = {}
    problems = []
    for number, line in enumerate((text or "").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        found = _LINE.match(line)
        name, given = (found[1].strip(), found[2].strip()) if found else ("", "")
        if not name or not given:
            problems.append(f"sweep line {number} ({_short(line)}): expected setting = {SHAPES}")
        elif name in settings:
            problems.append(f"sweep.settings.{name} is given twice: put all its values on one line")
        else:
            value, problem = _values(name, given)
            if problem:
                problems.append(problem)
            else:
                settings[name] = value
    return settings, problems


def _values(name: str, given: str) -> tuple[Any, str | None]:
    """One line's values: a list of texts, or a range as the ``sweep:`` block writes it."""
    found = _RANGE.match(given)
    if found is None:
        return [v.strip() for v in given.split(",") if v.strip()], None
    spec: dict[str, Any] = {"low": found["low"], "high": found["high"]}
    words = found["rest"].split()
    while words:
        word = words.pop(0)
        if word in ("log", "linear"):
            spec["scale"] = word
        elif re.fullmatch(r"x\d+", word):
            spec["count"] = int(word[1:])
        elif word == "x" and words and words[0].isdigit():
            spec["count"] = int(words.pop(0))
        else:
            return None, f"sweep.settings.{name} {_short(given)}: expected {SHAPES}"
    return spec, None


def sweep_block(
    text: str | None,
    method: str | None,
    members: float | None,
    seed: float | None,
    objective: str | None,
    direction: str | None,
) -> tuple[dict[str, Any], list[str]]:
    """The ``sweep:`` block the section describes, and the lines of its text that could not be read. ``members``
    counts only for random and tpe (a grid has every combination)."""
    settings, problems = settings_of(text)
    block: dict[str, Any] = {
        "method": method or "grid",
        "seed": _whole(seed),
        "objective": (objective or "").strip() or "heldout/correct",
        "direction": direction or "max",
        "settings": settings,
    }
    if block["method"] != "grid":
        block["members"] = _whole(members)
    return block, problems


def _whole(value: float | None) -> Any:
    """A number box's value as the block holds it: a whole float as an int, anything else as given (the parser says
    what is wrong with it)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return 0 if value is None else value


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def probing_text(news: ProbeNews) -> str:
    """What the Sweep section says while its points are probed (``news``: app.actions.ProbeNews): which point is
    probed now, of how many, and what each probe before it found (:func:`found_lines`). Once every point is probed it
    says the sweep is being created."""
    total, done = len(news.points), len(news.found)
    if done < total:
        head = verdict("wait", "Probing:", f"point {done + 1} of {total} ({md(point_text(news.points[done]))}).")
    else:
        head = verdict("wait", "Probed:", f"all {total} points; creating the sweep.")
    return "\n".join([head, "", *found_lines(news)]) if news.found else head


def found_lines(news: ProbeNews) -> list[str]:
    """What each probe so far found, a Markdown list item a point, its point written as the Sweeps table writes it."""
    total = len(news.points)
    return [
        f"- point {i + 1} of {total} ({md(point_text(news.points[i]))}): {found_text(found)}"
        for i, found in enumerate(news.found)
    ]


def found_text(found: ProbeFound) -> str:
    """One probe's finding in a line: "ok, answers scored apart on 75% of prompts" or, for a skipped point, "skipped:
    ..." with the rule's sentence."""
    said = {"ok": "ok", "risky": "risky", "wasted": "would learn nothing"}.get(found.verdict, found.verdict)
    line = f"{said}, answers scored apart on {found.signal_share:.0%} of prompts"
    return line + (f"; {md(found.skipped)}" if found.skipped else "; it trains")
