"""A collapse (issue 57): the policy breaks within a few steps, usually under too high a learning rate or too small a
β, and its text stops being language. docs/grpo.md's failure signs name it ("language collapse or endless
repetition"); this module is the code that looks for it, in two halves:

- **the text's signs**, measured by the worker on each step's sampled completions and logged as metric keys beside
  TRL's (trainer/job/callback.py), so the database, ``/metrics``, the Monitor and every tracker get them the same
  way: ``text/repeating``, the share of completions that end in a loop (a stretch of at least ``REPEAT_COVER`` of the
  completion that is one unit of 1 to ``REPEAT_UNIT`` characters back to back ``REPEAT_COPIES`` times or more:
  "+ + + + + +", a line of spaces, a sentence said over and over), and ``text/unusual_chars``, the share of
  characters outside the base's own alphabet (the characters of the task, its training prompts and reference answers
  (trainer.job.callback.task_texts), and of the first step's sampled answers, which at step 1 the base itself wrote:
  the adapter starts at zero) or that are no text at all (a byte
  that does not decode, U+FFFD, or a control character): the byte soup of a model that has lost its vocabulary.
- **the judgement** (:func:`collapses`), on a run's series: KL (TRL's, else the measured one) or entropy jumping by
  ``KL_JUMP`` / ``ENTROPY_JUMP`` nats per token within ``JUMP_STEPS`` steps, or degenerate text (``REPEATING`` of
  a step's completions looping, or ``UNUSUAL`` of its characters outside the base's alphabet). A healthy run moves
  its KL by hundredths of a nat per step; these are ten to a hundred times that.

Pure functions; the thresholds are module constants with the reason for each. tests/insight/test_collapse.py reproduces the
audit's run (learning rate 5e-2 on the built-in model: byte soup, held-out 79 → 0 %, KL 0 → 7.2 in 5 steps).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

REPEATING_KEY, UNUSUAL_KEY = "text/repeating", "text/unusual_chars"

# A loop: a unit of up to 32 characters (a token or a short phrase of most tokenizers) said at least 4 times back to
# back, covering at least a quarter of the completion. The built-in model's honest answers ("10 - 2 = 8\n...") never
# repeat a unit 4 times; its collapsed ones are lines of spaces and "+ + + +".
REPEAT_UNIT, REPEAT_COPIES, REPEAT_COVER = 32, 4, 0.25
_LOOP = re.compile(rf"(.{{1,{REPEAT_UNIT}}}?)\1{{{REPEAT_COPIES - 1},}}", re.DOTALL)

JUMP_STEPS = 5  # "within a few steps": the audit's KL went 0 → 7.2 nats in 4 steps
# KL per token up by a whole nat: the sampled tokens became e (2.7) times less likely under the base on average. The
# demo's KL stays below 0.05 over 100 steps (β 0.04, learning rate 5e-4); a slow drift over many steps is the
# health banner's "KL climbing fast".
KL_JUMP = 1.0
ENTROPY_JUMP = 1.0  # a nat more per token: the policy picks among e times as many tokens as it did 5 steps before
REPEATING = 0.5  # half the step's completions loop (the collapsed run: 80-100 %; the demo: 0 %)
UNUSUAL = 0.05  # one character in twenty outside the base's alphabet (the collapsed run's byte soup: 20-40 %)


def loops(text: str) -> bool:
    """Whether ``text`` loops: a unit of 1 to ``REPEAT_UNIT`` characters back to back ``REPEAT_COPIES`` times or
    more, the stretches of such repeats covering at least ``REPEAT_COVER`` of it.

    >>> loops("1 + 1 = 2" + " +" * 20), loops("<answer>\\n28\\n</answer>")
    (True, False)
    """
    if not text:
        return False
    covered = sum(m.end() - m.start() for m in _LOOP.finditer(text))
    return covered >= REPEAT_COVER * len(text)


def no_text(char: str) -> bool:
    """A character no language model writes as text: a byte that did not decode (U+FFFD) or a control character
    other than a newline, a tab or a carriage return."""
    return char == "\ufffd" or (unicodedata.category(char) == "Cc" and char not in "\n\t\r")


def alphabet(texts: Iterable[str]) -> frozenset[str]:
    """The characters of ``texts`` that are text (see :func:`no_text`): the base's alphabet, from the task's texts
    and the run's first step's answers."""
    return frozenset(c for text in texts for c in text if not no_text(c))


def text_signs(completions: Sequence[str], known: frozenset[str]) -> dict[str, float]:
    """A step's completions' signs of degenerate text as metric keys: the share that loop (``REPEATING_KEY``) and the
    share of their characters outside ``known`` or not text (``UNUSUAL_KEY``); {} without completions."""
    if not completions:
        return {}
    chars = sum(len(t) for t in completions)
    unusual = sum(1 for t in completions for c in t if c not in known or no_text(c))
    return {
        REPEATING_KEY: sum(1 for t in completions if loops(t)) / len(completions),
        UNUSUAL_KEY: unusual / chars if chars else 0.0,
    }


@dataclass(frozen=True)
class Collapse:
    """One stretch of steps where the run was collapsed, with the evidence of its worst step (as sentences) and the
    learning rate it ran at when it began (TRL's logged ``learning_rate``, None when not logged)."""

    first_step: int
    last_step: int
    evidence: tuple[str, ...]
    learning_rate: float | None
    holds_now: bool


def _points(series: Mapping[str, Sequence], key: str) -> list[tuple[int, float]]:
    return [(int(p[0]), float(p[1])) for p in series.get(key, ()) if math.isfinite(float(p[1]))]


def _jump(points: list[tuple[int, float]], i: int, size: float) -> tuple[float, int, float] | None:
    """The rise of ``points[i]`` above the lowest value of the ``JUMP_STEPS`` steps before it, when at least ``size``:
    (that low, its step, the value)."""
    step, value = points[i]
    before = [(v, s) for s, v in points[:i] if step - s <= JUMP_STEPS]
    if not before:
        return None
    low, at = min(before)
    return (low, at, value) if value - low >= size else None


def collapses(series: Mapping[str, Sequence]) -> list[Collapse]:
    """Every stretch of steps where the run was collapsed: it begins at a step whose KL or entropy jumped (by
    ``KL_JUMP``/``ENTROPY_JUMP`` within ``JUMP_STEPS`` steps) or whose text degenerated (``REPEATING``,
    ``UNUSUAL``), and holds at each later step where the text is still degenerate or the KL or entropy is still that
    far above its level before the jump."""
    kl_key = "kl" if len(series.get("kl", ())) else "kl_measured"
    signs = {
        "KL": (_points(series, kl_key), KL_JUMP, "nats per token"),
        "entropy": (_points(series, "entropy"), ENTROPY_JUMP, "nats per token"),
    }
    texts = {REPEATING_KEY: dict(_points(series, REPEATING_KEY)), UNUSUAL_KEY: dict(_points(series, UNUSUAL_KEY))}
    steps = sorted({s for points, _, _ in signs.values() for s, _ in points} | {s for t in texts.values() for s in t})
    rate = dict(_points(series, "learning_rate"))
    levels: dict[str, float] = {}  # each jumping sign's level before its jump, while the collapse lasts
    held: list[tuple[int, tuple[str, ...]]] = []
    index = {name: {s: i for i, (s, _) in enumerate(points)} for name, (points, _, _) in signs.items()}
    for step in steps:
        evidence = []
        for name, (points, size, unit) in signs.items():
            i = index[name].get(step)
            if i is None:
                continue
            jump = _jump(points, i, size)
            if jump is not None:
                low, at, value = jump
                levels.setdefault(name, low)
                evidence.append(f"{name} rose from {low:.3g} (step {at}) to {value:.3g} {unit} by step {step}")
            elif name in levels and points[i][1] - levels[name] >= size:
                evidence.append(
                    f"{name} is {points[i][1]:.3g} {unit}, {points[i][1] - levels[name]:.3g} above "
                    "its level before the jump"
                )
        repeating, unusual = texts[REPEATING_KEY].get(step), texts[UNUSUAL_KEY].get(step)
        if repeating is not None and repeating >= REPEATING:
            evidence.append(f"{repeating:.0%} of the completions loop (the same few characters over and over)")
        if unusual is not None and unusual >= UNUSUAL:
            evidence.append(f"{unusual:.0%} of the characters are outside the base's alphabet or no text at all")
        if evidence:
            held.append((step, tuple(evidence)))
        else:
            levels.clear()  # cleared: a later collapse is judged against its own level before
    out: list[Collapse] = []
    last = steps[-1] if steps else None
    position = {s: i for i, s in enumerate(steps)}
    for step, evidence in held:
        if out and position[step] == position[out[-1].last_step] + 1:
            worst = evidence if len(evidence) >= len(out[-1].evidence) else out[-1].evidence
            out[-1] = Collapse(out[-1].first_step, step, worst, out[-1].learning_rate, step == last)
        else:
            lr = max((v for s, v in rate.items() if s <= step), default=None)
            out.append(Collapse(step, step, evidence, lr, step == last))
    return out


def fine_before(series: Mapping[str, Sequence], step: int, n: int) -> tuple[int, float] | None:
    """The latest held-out evaluation at or before ``step`` when it scored above 0 by more than twice its noise on
    ``n`` problems, as (its step, its score): the model could do the task before it collapsed, so advice that the
    task is too hard, or its answers too long, is wrong. None without such an evaluation."""
    before = [(s, v) for s, v in _points(series, "heldout/correct") if s <= step]
    if not before:
        return None
    at, score = before[-1]
    noise = max(math.sqrt(score * (1 - score) / max(n, 1)), 1 / max(n, 1))
    return (at, score) if score > 2 * noise else None
