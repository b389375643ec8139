"""Health alerts: the failure signs of SPEC.md, read off a run's metric series. Pure functions, tested on rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.liveness import liveness_problem

if TYPE_CHECKING:  # the figures' module imports Plotly: the command line reads alerts without it
    from app.charts import Series

WINDOW = 10  # recent steps an alert looks at: long enough to ignore one noisy step, short enough to react


@dataclass(frozen=True)
class Alert:
    """A failure sign with what to try."""

    name: str
    message: str
    hint: str


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


def _zero_std_hint(series: Series) -> str:
    """What to do about zero-std groups, by which kind dominates (the worker logs ``zero_std/all_high``/``all_low``)."""
    high, low = (
        _mean(_values(series, "zero_std/all_high")[-WINDOW:]),
        _mean(_values(series, "zero_std/all_low")[-WINDOW:]),
    )
    if math.isfinite(low) and low >= 2 * high:
        return (
            f"mostly groups where every answer scored low ({low:.0%} of groups): the model never earns the reward; "
            "warm it up, add partial-credit rewards (soft_format, xmlcount) or raise temperature or the group size"
        )
    if math.isfinite(high) and high >= 2 * low:
        return (
            f"mostly groups where every answer scored high ({high:.0%} of groups): those prompts are already solved; "
            "train on harder prompts or stop here"
        )
    return "answers are all right or all wrong: add partial-credit rewards, raise temperature or the group size"


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
    alerts += _high_share(
        series,
        "frac_reward_zero_std",
        0.5,
        "zero_std",
        "{:.0%} of groups have zero reward std: no learning signal",
        _zero_std_hint(series),
    )
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


def liveness_alerts(run, now=None) -> list[Alert]:
    """The stalled or slow-step alert of a running run (app/liveness.py), with what to check."""
    problem = liveness_problem(run, now)
    if problem is None:
        return []
    name, message = problem
    if name == "stalled":
        hint = "the worker process is frozen or gone (suspended, out of memory, its machine down): check it, or stop and resume the run"
    else:
        hint = "the worker is alive but this step has not ended: a generation or reward may hang; see the raw worker output"
    return [Alert(name, message, hint)]
