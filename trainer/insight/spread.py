"""Nothing learned (issue 55): a run none of whose groups ever disagreed has had nothing to learn from, and says so.

GRPO learns only from a group whose answers scored differently: a group whose rewards are all equal has std 0, every
advantage in it is 0, and it moves nothing (docs/grpo.md § GRPO in five quantities). TRL logs the share of such groups
at every step as ``frac_reward_zero_std``. When that share has been 100 % at every step so far, and for at least
``LEAST_STEPS`` steps, no step of the run has taught anything: the reward reads the same flat line (often 0.000)
whatever the run does, and only the cause of the flatness is left to fix.

This is the one rule that says it. Its sentence (:attr:`NoSpread.sentence`) is what every entrance shows: the health
alert (trainer/insight/health.py: the Monitor's banner, ``/alerts``, ``grpo-studio alerts``, the run's tracker),
``grpo-studio run``'s one-time warning while it trains and its summary (app/cli/output.py), and ``/run``'s
``nothing_learned`` (app/actions/runs.py).

A probe is known for a run when the dashboard launched it from a probed config: its samples are then the run's step
0, and the share of their groups that scored alike is stored beside them as ``PROBE_KEY`` at step 0
(app.actions.runs.launch). The sentence says whether the probe agreed; without one it says where to find it.

Pure: series in, verdict out. Series as trainer.insight.health reads them (key -> (step, value, ...) points).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainer.scoring.rewards import PARTIAL_CREDIT

# At least this share of groups with identical rewards: a run learns (next to) nothing. The probe's verdict draws
# the same line (trainer.probe.report imports it from here: the probe stands above the insight it reports with).
WASTED_ZERO_STD = 0.9

# The keys the rule reads (an entrance that reads a few keys reads these).
ZERO_STD_KEY = "frac_reward_zero_std"  # TRL's share of the step's groups whose rewards are all equal
HIGH_KEY, LOW_KEY = "zero_std/all_high", "zero_std/all_low"  # the worker's split of it (trainer/job/callback.py)
PROBE_KEY = "probe/frac_reward_zero_std"  # the launch's probe, before training: logged at step 0
KEYS = (ZERO_STD_KEY, HIGH_KEY, LOW_KEY, PROBE_KEY)

# Three steps, as the health alerts' shares need: one flat step is a small batch's chance, three in a row from the
# start, every group of each, is the run's data and rewards.
LEAST_STEPS = 3
# TRL's share is a mean of 0/1 flags per group; one group that disagreed in a step of 64 leaves 0.984
ALL = 1 - 1e-6
PROBE_WHERE = "grpo-studio probe CONFIG, or Probe on the dashboard's New run page"


@dataclass(frozen=True)
class NoSpread:
    """A run in which no group had a reward spread: over ``steps`` training steps every group's answers scored alike.
    ``cause``: "low" (every answer scored low: too hard), "high" (every answer scored high: already solved) or ""
    (unknown or both). ``probe_share``: the share of alike groups the launch's probe found, None without a probe."""

    steps: int
    cause: str = ""
    probe_share: float | None = None

    @property
    def sentence(self) -> str:
        """What every entrance says, e.g. "no group had a reward spread in 3 steps: nothing can be learned; the
        probe said so too"."""
        head = f"no group had a reward spread in {self.steps} steps: nothing can be learned"
        if self.probe_share is None:
            return f"{head}; the probe ({PROBE_WHERE}) tells this before training"
        if self.probe_share >= WASTED_ZERO_STD:
            return f"{head}; the probe said so too"
        return f"{head}, though the probe found a spread in {1 - self.probe_share:.0%} of its groups before training"

    @property
    def hint(self) -> str:
        """What to try, by what the groups scored."""
        if self.cause == "high":
            return (
                "every answer of every group scored high: these problems are solved already, so train on harder "
                "ones (or stop here)"
            )
        why = (
            "every answer scored low: the model never earns the reward on these problems; "
            if self.cause == "low"
            else "every answer of each group scored alike; "
        )
        return (
            f"{why}give it easier problems, partial-credit rewards ({', '.join(PARTIAL_CREDIT)}), a larger group "
            "(num_generations) or a higher temperature, and try the change with the probe first"
        )


def _points(series: Mapping[str, Any], key: str) -> list[tuple[int, float]]:
    """A series as finite (step, value) pairs (rows, tuples or an (n, >=2) array of them)."""
    found, points = [], series.get(key)
    for point in points if points is not None else ():
        step, value = int(point[0]), float(point[1])
        if math.isfinite(value):
            found.append((step, value))
    return found


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _flat_steps(shares: Any) -> int | None:
    """How many training steps (from 1) the share points cover when every one of them is 100 %; None at the first
    that is not (a healthy run stops there, at its first steps: the Monitor asks this every tick of a long run)."""
    count = 0
    for point in shares if shares is not None else ():
        step, value = int(point[0]), float(point[1])
        if step < 1 or not math.isfinite(value):
            continue
        if value < ALL:
            return None
        count += 1
    return count


def no_spread(series: Mapping[str, Any]) -> NoSpread | None:
    """The verdict when every group of every training step so far had zero reward std (at least ``LEAST_STEPS``
    steps of it); None while any group of any step disagreed, or too early to tell. Step 0 is not a training step
    (the probe's, the base model's held-out score): only steps from 1 are judged."""
    if series.get(ZERO_STD_KEY) is not None:
        steps = _flat_steps(series[ZERO_STD_KEY])
    else:  # a TRL that does not log it: the worker's own split adds up to the same share
        high, low = dict(_points(series, HIGH_KEY)), dict(_points(series, LOW_KEY))
        steps = _flat_steps([(s, high[s] + low[s]) for s in sorted(set(high) & set(low))])
    if steps is None or steps < LEAST_STEPS:
        return None
    high = _mean([v for s, v in _points(series, HIGH_KEY) if s >= 1])
    low = _mean([v for s, v in _points(series, LOW_KEY) if s >= 1])
    cause = ""
    if math.isfinite(high) and math.isfinite(low):
        cause = "low" if high < 1e-9 < low else "high" if low < 1e-9 < high else ""
    probe = [v for s, v in _points(series, PROBE_KEY) if s == 0]
    return NoSpread(steps, cause, probe[-1] if probe else None)
