"""The marks of the Monitor's completions table: which answer of each group is its best and its worst.

A group whose answers all scored alike (std 0, every advantage 0) has no best answer: GRPO learns nothing from it,
and marking one of them "best" (the first of four answers at 2.25) said the opposite. Such a group is marked a tie;
in a group that differs, every answer that shares the top score is a best one (and the bottom score a worst one).
"""

from __future__ import annotations

from collections.abc import Sequence

BEST, WORST, TIE = "▲ best", "▼ worst", "= tie"


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
