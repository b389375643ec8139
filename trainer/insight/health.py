"""Health alerts: the failure signs of docs/grpo.md § Failure signs to watch, read off a run's metric series.
Pure functions, tested on rows.

Here (not in app/) because the worker judges them too, to send each to the run's tracker as it fires
(trainer/job/tracker_alerts.py); the dashboard reads the same rules off the stored rows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer.insight.spread import no_spread
from trainer.scoring.rewards import PARTIAL_CREDIT

# metric key -> points (step, value, ...) or an (n, >=2) array of them: the dashboard's series and the worker's alike
Series = Mapping[str, Any]

WINDOW = 10  # recent steps an alert looks at: long enough to ignore one noisy step, short enough to react


@dataclass(frozen=True)
class Alert:
    """A failure sign with what to try; ``level`` "note" for a reading that looks like a failure but is not one."""

    name: str
    message: str
    hint: str
    level: str = "warning"


def _values(series: Series, key: str) -> list[float]:
    points = series.get(key)
    if points is None or len(points) == 0:
        return []
    return np.asarray(points, dtype=float)[-3 * WINDOW :, 1].tolist()  # alerts look at recent steps only


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _high_share(series: Series, key: str, threshold: float, name: str, message: str, hint: str) -> list[Alert]:
    """The alert ``name`` when the recent mean of the share ``key`` (0 to 1) is over ``threshold``, once three steps
    are logged; ``message`` is formatted with that mean."""
    recent = _values(series, key)[-WINDOW:]
    if len(recent) >= 3 and _mean(recent) > threshold:
        return [Alert(name, message.format(_mean(recent)), hint)]
    return []


HELDOUT_FLAT = 0.02  # held-out correctness gaining 2 points or less over its latest evaluations has stopped improving
# the signal says "stop" when at most one group in ten still disagrees: with more, GRPO still has prompts to learn from
# (the demo's 72 % of solved groups leaves 28 % that teach)
STOP_SHARE = 0.9
SOLVED_NOTE = "zero_std_solved"


def heldout_stopped(series: Series) -> tuple[bool, str] | None:
    """Whether held-out correctness has stopped improving: its latest two evaluations no better (by ``HELDOUT_FLAT``)
    than the best one before them, with what it read; None with fewer than three evaluations (nothing to tell)."""
    points = series.get("heldout/correct")
    if points is None or len(points) < 3:
        return None
    rows = np.asarray(points, dtype=float)[:, :2]
    best_before, latest = float(rows[:-2, 1].max()), float(rows[-2:, 1].max())
    step, now = int(rows[-1, 0]), float(rows[-1, 1])
    return latest - best_before <= HELDOUT_FLAT, (
        f"held-out correctness {now:.0%} at step {step} (best before its latest two evaluations: {best_before:.0%})"
    )


def _zero_std(series: Series) -> list[Alert]:
    """The zero-std verdict follows its cause (the worker logs ``zero_std/all_high`` and ``all_low``): groups whose
    answers were all right are prompts already solved, which a working run produces (a note; "stop" only when the
    signal says so, ``STOP_SHARE`` of the groups or more alike, and held-out correctness has stopped improving too);
    all wrong, too hard (a warning); both, each share named. Every group of every step so far alike is none of
    these: nothing at all can be learned, said as trainer.insight.spread says it everywhere."""
    nothing = no_spread(series)
    if nothing is not None:
        return [Alert("zero_std", nothing.sentence, nothing.hint)]
    recent = _values(series, "frac_reward_zero_std")[-WINDOW:]
    if len(recent) < 3 or _mean(recent) <= 0.5:
        return []
    share = _mean(recent)
    high, low = (
        _mean(_values(series, "zero_std/all_high")[-WINDOW:]),
        _mean(_values(series, "zero_std/all_low")[-WINDOW:]),
    )
    if math.isfinite(low) and low >= 2 * high:
        return [
            Alert(
                "zero_std",
                f"{share:.0%} of groups have zero reward std, mostly groups where every answer scored low "
                f"({low:.0%} of groups): too hard, no learning signal",
                "the model never earns the reward on these prompts: warm it up, add partial-credit rewards "
                f"({', '.join(PARTIAL_CREDIT)}), raise temperature or the group size, or train on easier prompts",
            )
        ]
    if math.isfinite(high) and high >= 2 * low:
        stopped = heldout_stopped(series) if share >= STOP_SHARE else None
        message = (
            f"{share:.0%} of groups have zero reward std, mostly groups where every answer scored high "
            f"({high:.0%} of groups): those prompts are solved"
        )
        if stopped is not None and stopped[0]:
            return [
                Alert(
                    "zero_std",
                    f"{message}, and {stopped[1]}: held-out has stopped improving",
                    "the signal and held-out both say this run has little left to learn here: train on harder "
                    "prompts or stop here",
                )
            ]
        if share < STOP_SHARE:
            held = f"{1 - share:.0%} of groups disagree"
        elif stopped is not None:
            held = f"{stopped[1]}, still improving"
        else:
            held = "no held-out curve yet to say whether it still improves (eval_steps)"
        return [
            Alert(
                SOLVED_NOTE,
                message,
                f"normal for a working run: the other groups still carry the signal ({held}); the curriculum "
                "(curriculum: true) stops sampling solved prompts",
                level="note",
            )
        ]
    known = math.isfinite(high) and math.isfinite(low)
    split = f" ({high:.0%} all right: solved, {low:.0%} all wrong: too hard)" if known else ""
    return [
        Alert(
            "zero_std",
            f"{share:.0%} of groups have zero reward std: no learning signal{split}",
            "answers are all right or all wrong: add partial-credit rewards, raise temperature or the group size",
        )
    ]


def health_alerts(series: Series, max_completion_length: int | None = None) -> list[Alert]:
    """Every failure sign the recent steps show (empty when healthy or too early to tell)."""
    alerts: list[Alert] = []
    for key in ("loss", "grad_norm"):
        recent = _values(series, key)[-WINDOW:]
        if any(not math.isfinite(v) for v in recent):
            alerts.append(
                Alert(
                    f"{key}_nan",
                    f"{key} is NaN or infinite",
                    "lower the learning rate or max_grad_norm; check the reward functions for NaN",
                )
            )
    alerts += _zero_std(series)
    # At beta 0 TRL logs no KL: the worker's measured one (every measured_kl_steps steps) stands in for it
    kl = _values(series, "kl") or _values(series, "kl_measured")
    if len(kl) >= 2 * WINDOW:
        before, now = _mean(kl[-2 * WINDOW : -WINDOW]), _mean(kl[-WINDOW:])
        if now > 0.5 and now > 3 * max(before, 1e-3):
            alerts.append(
                Alert(
                    "kl_climb",
                    f"KL climbing fast ({before:.3g} → {now:.3g})",
                    "likely reward hacking or too high a learning rate: read the completions, raise beta or lower the learning rate",
                )
            )
    alerts += _high_share(
        series,
        "completions/clipped_ratio",
        0.3,
        "length_limit",
        "{:.0%} of completions hit the length limit",
        "the answer never gets written: raise max_completion_length or reward shorter reasoning",
    )
    length, reward = _values(series, "completions/mean_length"), _values(series, "reward")
    if len(length) >= 2 * WINDOW and len(reward) >= 2 * WINDOW:
        grew = _mean(length[-WINDOW:]) / max(_mean(length[-2 * WINDOW : -WINDOW]), 1e-9)
        reward_change = _mean(reward[-WINDOW:]) - _mean(reward[-2 * WINDOW : -WINDOW])
        spread = max(abs(_mean(reward[-2 * WINDOW :])), 1e-9)
        if grew > 1.2 and reward_change < 0.02 * spread:
            alerts.append(
                Alert(
                    "length_bias",
                    f"completions {grew - 1:.0%} longer while reward stays flat",
                    "length bias: add length_penalty or use loss_type dr_grpo",
                )
            )
    return alerts
