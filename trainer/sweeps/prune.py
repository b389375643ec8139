"""The pruning rules of a sweep (issue 41), GRPO-aware: pure functions over a member's stored rows, each returning a
:class:`Stop` with the sentence its log and the sweep's table show, or None while the member should go on.

- **probe** (before training): the pre-launch probe's verdict "wasted" (a fatal risk: e.g. every group scored
  alike, so no advantage is ever non-zero) skips the member, with the probe's first fatal reason.
- **watch**: a reward-hacking sign of the watch (trainer/insight/watch.py) that still holds at the latest step and
  says the objective is paid for some other way: held-out correctness fell, or the reward rose while held-out
  correctness did not (:data:`HACKING`).
- **signal**: the learning signal gone: the mean share of zero-std groups (TRL's ``frac_reward_zero_std``) over the
  last ``signal_window`` steps at least ``signal_share``: with every answer of a group scored alike its advantages
  are 0 and the step teaches nothing. The default 0.9 is trainer/insight/health.py's STOP_SHARE (see docs/grpo.md
  § Failure signs to watch).
- **median**: at a trained evaluation step (step 0's is the base model's, alike for all: storage.sweeps.trained),
  the member's best objective so far is worse than the median of the other
  members' best at the same step (Optuna's MedianPruner, among members that reached that step), once the member has
  had ``median_warmup`` evaluations and at least ``median_peers`` others reached the step.

The checks run in that order and the first that speaks stops the member (:func:`judge`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from storage.sweeps import trained
from trainer.config.sweep import Prune, SweepSpec

Points = Sequence[tuple[int, float]]  # (step, value), in step order
# The watch's signs that speak of the objective itself (held-out correctness), not of the run's shape: a member
# showing one is being paid for something other than what the sweep ranks it by.
HACKING = ("held-out falls", "reward outruns held-out")


@dataclass(frozen=True)
class Stop:
    """Why a member is stopped (``rule``: probe, watch, signal or median) in one sentence, and at which step."""

    rule: str
    reason: str
    step: int = 0


def points_of(series: Any) -> list[tuple[int, float]]:
    """A stored series (rows or an (n, >=2) array of step, value, ...) as finite (step, value) pairs."""
    found = []
    for point in series if series is not None else ():
        step, value = int(point[0]), float(point[1])
        if math.isfinite(value):
            found.append((step, value))
    return found


def probe_skip(verdict: str, fatal_reasons: Sequence[str]) -> Stop | None:
    """The probe rule: a "wasted" verdict skips the member before it trains."""
    if verdict != "wasted":
        return None
    why = fatal_reasons[0] if fatal_reasons else "it would learn nothing"
    return Stop("probe", f"skipped before training: the probe says the run would learn nothing ({why})")


def watch_stop(alerts: Sequence[Any]) -> Stop | None:
    """The watch rule: the first sign of :data:`HACKING` that holds at the latest step (``alerts``: the watch's
    WatchAlert list, or anything with name, message, holds_now and last_step)."""
    for alert in alerts:
        if alert.name in HACKING and alert.holds_now:
            return Stop(
                "watch",
                f"stopped at step {alert.last_step}: the reward-hacking watch says {alert.message}",
                alert.last_step,
            )
    return None


def signal_stop(zero_std: Points, prune: Prune, all_high: Points = ()) -> Stop | None:
    """The signal rule over the member's ``frac_reward_zero_std`` points (``all_high``: the worker's share of groups
    whose answers were all right, to say which way the signal went)."""
    recent = list(zero_std)[-prune.signal_window :]
    if len(recent) < prune.signal_window:
        return None
    share = statistics.fmean(v for _, v in recent)
    if share < prune.signal_share:
        return None
    step = recent[-1][0]
    solved = [v for s, v in all_high if s >= recent[0][0]]
    cause = ""
    if solved:
        high = statistics.fmean(solved)
        cause = f" ({high:.0%} all right, {max(share - high, 0):.0%} all wrong)"
    return Stop(
        "signal",
        f"stopped at step {step}: {share:.0%} of groups scored alike over the last {len(recent)} steps{cause}, so "
        "their advantages are 0: the learning signal is gone",
        step,
    )


def median_stop(mine: Points, peers: Sequence[Points], spec: SweepSpec) -> Stop | None:
    """The median rule at the member's latest evaluation (the last point of its objective ``mine``), against the
    objective of the other members (``peers``)."""
    prune = spec.prune
    if len(mine) < prune.median_warmup:
        return None
    step = mine[-1][0]
    pick = max if spec.direction == "max" else min
    best = pick(v for s, v in mine if s <= step)
    others = []
    for points in peers:
        upto = [v for s, v in points if s <= step]
        if any(s == step for s, _ in points):  # it reached this evaluation
            others.append(pick(upto))
    if len(others) < prune.median_peers:
        return None
    median = statistics.median(others)
    if not spec.better(median, best):
        return None
    side = "below" if spec.direction == "max" else "above"
    return Stop(
        "median",
        f"stopped at step {step}: its best {spec.objective} so far, {best:.3g}, is {side} the median of the "
        f"{len(others)} other members at that step ({median:.3g})",
        step,
    )


def judge(
    spec: SweepSpec, series: Mapping[str, Any], peers: Sequence[Points], alerts: Sequence[Any] = ()
) -> Stop | None:
    """The rule that stops a running member now, if any (watch, signal, then median; each only where the sweep's
    ``prune`` turns it on): ``series`` its stored metrics, ``peers`` the other members' objective points,
    ``alerts`` the watch's history of it."""
    prune = spec.prune
    if prune.watch and (stop := watch_stop(alerts)):
        return stop
    if prune.signal:
        zero = points_of(series.get("frac_reward_zero_std"))
        if stop := signal_stop(zero, prune, points_of(series.get("zero_std/all_high"))):
            return stop
    if prune.median:
        return median_stop(trained(points_of(series.get(spec.objective))), peers, spec)
    return None
