"""What the Monitor's completions table shows of an answer: its mark (which answer of each group is its best and its
worst) and, for a run with tools, its turns.

A group whose answers all scored alike (std 0, every advantage 0) has no best answer: GRPO learns nothing from it,
and marking one of them "best" (the first of four answers at 2.25) said the opposite. Such a group is marked a tie;
in a group that differs, every answer that shares the top score is a best one (and the bottom score a worst one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

BEST, WORST, TIE = "▲ best", "▼ worst", "= tie"
CALL, ANSWER = "→ ", "← "  # the marks of a tool call and of a tool's answer, a line each


def group_marks(groups: Sequence[int], totals: Sequence[float | None]) -> list[str]:
    """One mark per answer, given each answer's group and total reward (None: not scored, never best or worst)."""
    scored: dict[int, list[float]] = {}
    for group, total in zip(groups, totals):
        if total is not None:
            scored.setdefault(group, []).append(total)
    marks = []
    for group, total in zip(groups, totals):
        values = scored.get(group, [])
        if total is None or not values:
            marks.append("")
        elif max(values) == min(values):
            marks.append(TIE if len(values) > 1 else "")
        elif total == max(values):
            marks.append(BEST)
        elif total == min(values):
            marks.append(WORST)
        else:
            marks.append("")
    return marks


def turns_text(turns: Sequence[dict[str, Any]]) -> str:
    """A tool run's answer turn by turn (trainer.tools.turns), as plain text: the assistant's text as written, each call
    as ``→ calculator(expression='12+3')`` and each tool's answer as ``← 15``, a line each (an answer's later lines
    indented under its first). Plain text on purpose: the table shows it as text, and the detail puts it in a code
    fence (app.markup.fenced), so nothing the model or a tool wrote becomes markup."""
    lines = []
    for turn in turns:
        role, content = turn.get("role"), str(turn.get("content", ""))
        if role == "tool_call":
            arguments = ", ".join(
                f"{key}={value!r}" if key else repr(value) for key, value in turn["arguments"].items()
            )
            lines.append(f"{CALL}{turn.get('name', '')}({arguments})")
        elif role == "tool":
            lines.append(ANSWER + content.replace("\n", "\n  "))
        elif content:
            lines.append(content)
    return "\n".join(lines)
