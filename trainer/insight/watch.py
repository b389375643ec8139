"""The reward-hacking watch (issue 31, item 3): signs that a run's reward is being earned some other way than by
getting better, read off its stored metrics and sample groups. Each alert names the steps it covers (so the
dashboard opens the completions of those steps, and Compare at the checkpoint nearest them) and says in one sentence
what to do.

The signs, and what each compares:

- **reward outruns held-out**: between an evaluation and the one ``LOOKBACK`` evaluations before it, the training
  reward rose (a line fitted through its steps climbs by at least ``RISE_T`` standard errors) while held-out
  correctness moved by at most ``FLAT`` (flat or falling). The held-out problems are never trained on, so a reward
  that rises without them is paying for something else.
- **shaping saturates**: a reward that is not the correctness reward climbed during the run to its ceiling (the last
  ``WINDOW`` steps within ``TOP`` of its best, and flat there) while correctness (held-out when evaluated, else the
  training correctness reward) did not improve.
- **length tracks reward**: over the latest ``2 * WINDOW`` steps mean completion length and reward rise together
  (correlation at least ``CORRELATION``): the length bias of SPEC.md.
- **diversity collapses**: the share of distinct completions per group fell from the first steps' to at most
  ``COLLAPSED`` of the group.
- **reward jumps**: one reward's mean at a step lies further from its previous ``HISTORY`` steps' mean than
  ``JUMP_SIGMAS`` of their standard deviations (and than ``JUMP_SHARE`` of the mean itself).

Pure functions of rows, tested on literal series (tests/test_insight.py); thresholds are module constants with the
reason for each.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from storage.learning import GroupStats

WINDOW = 5  # steps a level is judged on: long enough to ignore one noisy step of a small batch
LOOKBACK = 3  # evaluations a rise is measured over: a slow divergence shows within a few evaluations
RISE_T = 2.5  # a fitted slope 2.5 standard errors above 0 is not noise (about 1 in 100 for a flat reward)
FLAT = 0.02  # held-out correctness moving by 2 points or less is flat (2 of the 100 problems of the periodic curve)
TOP = 0.05  # within 5% of its best value, a reward is at its ceiling
CLIMB = 0.2  # ... having climbed by at least 20% of that ceiling during the run (a reward saturated from step 1 is not news)
CORRELATION = 0.8
COLLAPSED = 0.5  # half the answers of a group or more are copies of another
HISTORY = 10
JUMP_SIGMAS = 5.0
JUMP_SHARE = 0.2

Points = Sequence[tuple[int, float]]  # (step, value), in step order


@dataclass(frozen=True)
class WatchAlert:
    """One sign, the steps it covers, and what to do."""

    name: str
    message: str
    first_step: int
    last_step: int
    hint: str

    @property
    def steps(self) -> str:
        """The steps it covers, as a person reads them."""
        return (
            f"step {self.first_step}"
            if self.first_step == self.last_step
            else f"steps {self.first_step}-{self.last_step}"
        )


def _points(series: Mapping[str, Sequence], key: str) -> list[tuple[int, float]]:
    """A series as (step, value) pairs with finite values (the Monitor's caches hold (step, value, wall) arrays)."""
    return [(int(p[0]), float(p[1])) for p in series.get(key, ()) if math.isfinite(float(p[1]))]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _correctness_key(series: Mapping[str, Sequence]) -> str | None:
    return next(
        (k for k in sorted(series) if k.startswith("rewards/") and k.endswith("/mean") and "correct" in k), None
    )


def reward_outruns_heldout(series: Mapping[str, Sequence]) -> list[WatchAlert]:
    """Training reward rising while held-out correctness is flat or falling (one alert per stretch of evaluations)."""
    evals, reward = _points(series, "heldout/correct"), _points(series, "reward")
    if len(evals) < 2 or len(reward) < 4:
        return []
    flagged: list[tuple[int, int, float, float, float]] = []
    for i in range(1, len(evals)):
        (a, before), (b, after) = evals[max(0, i - LOOKBACK)], evals[i]
        rise = _significant_rise([(s, v) for s, v in reward if a < s <= b])
        if rise is not None and after - before <= FLAT:
            flagged.append((a, b, rise, before, after))
    alerts = []
    for a, b, rise, before, after in _merge(flagged):
        alerts.append(
            WatchAlert(
                "reward outruns held-out",
                f"training reward rose by {rise:.3g} while held-out correctness went from {before:.0%} to {after:.0%}",
                a,
                b,
                "the reward pays for something other than right answers: read what the best-scored completions of "
                "these steps have in common, and Compare the nearest checkpoint with the base before training on.",
            )
        )
    return alerts


def _significant_rise(points: Sequence[tuple[int, float]]) -> float | None:
    """The rise of a least-squares line through ``points`` over their steps, when its slope is positive by at least
    ``RISE_T`` standard errors (None otherwise, or with fewer than 4 points). A fitted line uses every step of the
    stretch: comparing the means of its two halves missed a climb through a small batch's noisy rewards (the length
    run of tests/test_learning_views.py: t = 3 over six steps, the halves within their noise)."""
    if len(points) < 4:
        return None
    xs, ys = [float(s) for s, _ in points], [v for _, v in points]
    mx, my = _mean(xs), _mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys)) / (len(xs) - 2)
    se = math.sqrt(residual / sxx)
    if slope <= 0 or slope < RISE_T * se:
        return None
    return slope * (xs[-1] - xs[0])


def _merge(flagged: list[tuple[int, int, float, float, float]]) -> list[tuple[int, int, float, float, float]]:
    """Overlapping flagged stretches as one: from the first's start to the last's end, with the last's figures."""
    merged: list[tuple[int, int, float, float, float]] = []
    for a, b, rise, before, after in flagged:
        if merged and a <= merged[-1][1]:
            start, _, _, first_before, _ = merged[-1]
            merged[-1] = (start, b, rise, first_before, after)
        else:
            merged.append((a, b, rise, before, after))
    return merged


def shaping_saturates(series: Mapping[str, Sequence]) -> list[WatchAlert]:
    """A shaping reward (any but the correctness reward) that climbed to its ceiling while correctness stalled."""
    correct_key = "heldout/correct" if series.get("heldout/correct") is not None else _correctness_key(series)
    correct = _points(series, correct_key) if correct_key else []
    alerts = []
    for key in sorted(series):
        if not (key.startswith("rewards/") and key.endswith("/mean")) or "correct" in key:
            continue
        points = _points(series, key)
        if len(points) < 2 * WINDOW:
            continue
        values = [v for _, v in points]
        best = max(values, key=abs)
        recent, first = values[-WINDOW:], values[:WINDOW]
        at_top = all(abs(v - best) <= TOP * abs(best) for v in recent)
        if not (best and at_top and _mean(recent) - _mean(first) >= CLIMB * abs(best)):
            continue
        start = next(s for s, v in points if abs(v - best) <= TOP * abs(best))
        seen = [v for s, v in correct if s >= start] if correct else []
        before = [v for s, v in correct if s <= start] if correct else []
        if correct and before and seen and max(seen) - before[-1] > FLAT:
            continue  # correctness still improves beside it
        name = key.removeprefix("rewards/").removesuffix("/mean")
        alerts.append(
            WatchAlert(
                "shaping saturates",
                f"{name} is at its ceiling ({_mean(recent):.3g}) while correctness does not improve",
                start,
                points[-1][0],
                f"the model has learnt what {name} pays for and earns nothing more from it: lower its weight or "
                "stop here, since only the correctness reward still teaches.",
            )
        )
    return alerts


def length_tracks_reward(series: Mapping[str, Sequence]) -> list[WatchAlert]:
    """Mean completion length and reward rising together over the latest steps."""
    length = dict(_points(series, "completions/mean_length"))
    reward = dict(_points(series, "reward"))
    steps = sorted(set(length) & set(reward))[-2 * WINDOW :]
    if len(steps) < 2 * WINDOW:
        return []
    xs, ys = [length[s] for s in steps], [reward[s] for s in steps]
    sx, sy = _std(xs), _std(ys)
    if not sx or not sy:
        return []
    mx, my = _mean(xs), _mean(ys)
    r = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / ((len(xs) - 1) * sx * sy)
    half = len(steps) // 2
    if r < CORRELATION or _mean(xs[half:]) <= _mean(xs[:half]):
        return []
    return [
        WatchAlert(
            "length tracks reward",
            f"completions grew from {_mean(xs[:half]):.0f} to {_mean(xs[half:]):.0f} tokens with the reward "
            f"(correlation {r:.2f})",
            steps[0],
            steps[-1],
            "longer answers score higher: check that the extra length is reasoning, else add length_penalty or "
            "lower max_completion_length.",
        )
    ]


def diversity_collapses(groups: Sequence[GroupStats]) -> list[WatchAlert]:
    """The share of distinct completions per group falling to at most ``COLLAPSED``."""
    by_step: dict[int, list[float]] = defaultdict(list)
    for g in groups:
        if g.size > 1:
            by_step[g.step].append((g.distinct - 1) / (g.size - 1))  # 0: all copies, 1: all different
    steps = sorted(by_step)
    if len(steps) < 2 * WINDOW:
        return []
    share = [_mean(by_step[s]) for s in steps]
    first, recent = _mean(share[:WINDOW]), _mean(share[-WINDOW:])
    if recent > COLLAPSED or first - recent < 0.25:
        return []
    middle = (first + recent) / 2
    start = next(s for s, v in zip(steps, share) if v <= middle)
    return [
        WatchAlert(
            "diversity collapses",
            f"distinct answers per group fell from {first:.0%} to {recent:.0%} of the group",
            start,
            steps[-1],
            "the groups collapse onto one answer and GRPO has nothing left to rank: raise the temperature, lower "
            "the learning rate or raise beta.",
        )
    ]


def reward_jumps(series: Mapping[str, Sequence]) -> list[WatchAlert]:
    """The latest step at which a reward's mean left its own history (one alert per reward)."""
    alerts = []
    for key in sorted(series):
        if not (key.startswith("rewards/") and key.endswith("/mean")):
            continue
        points = _points(series, key)
        last_jump = None
        for i in range(HISTORY, len(points)):
            history = [v for _, v in points[i - HISTORY : i]]
            step, value = points[i]
            m = _mean(history)
            if abs(value - m) > max(JUMP_SIGMAS * _std(history), JUMP_SHARE * abs(m), 1e-6):
                last_jump = (step, m, value)
        if last_jump:
            step, m, value = last_jump
            name = key.removeprefix("rewards/").removesuffix("/mean")
            alerts.append(
                WatchAlert(
                    "reward jumps",
                    f"{name} jumped from about {m:.3g} to {value:.3g}",
                    step,
                    step,
                    f"read this step's completions for what changed: a new answer style, or a loophole in {name}.",
                )
            )
    return alerts


def watch(series: Mapping[str, Sequence], groups: Sequence[GroupStats] = ()) -> list[WatchAlert]:
    """Every reward-hacking sign a run shows, earliest first."""
    alerts = (
        reward_outruns_heldout(series)
        + shaping_saturates(series)
        + length_tracks_reward(series)
        + diversity_collapses(groups)
        + reward_jumps(series)
    )
    return sorted(alerts, key=lambda a: (a.first_step, a.name))


def nearest_checkpoint(checkpoints: Sequence[int], step: int) -> int | None:
    """The checkpoint step closest to ``step`` (the earlier one on a tie: it holds the model before what followed)."""
    if not checkpoints:
        return None
    return min(checkpoints, key=lambda c: (abs(c - step), c))
