"""Plotly figure builders for the dashboard: pure functions, rows or series in, figures out. Every figure the
dashboard shows is built here (the pages only place them).

For the monitor, a series is a list of ``(step, value, wall_time)`` points of one metric key of one run. Each chart
names the keys it draws (or a prefix, for per-reward keys), and carries one sentence on what it means for GRPO
(SPEC.md's five quantities), shown under it in the dashboard.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

Point = tuple[int, float, float]  # step, value, wall time
Series = Mapping[str, "Sequence[Point] | np.ndarray"]  # metric key -> points, or an (n, 3) array of them


@dataclass(frozen=True)
class Chart:
    """One monitor chart: the metric keys it draws (exact names, or prefixes ending in '/') and its explanation."""

    name: str
    title: str
    keys: tuple[str, ...]
    meaning: str
    per_reward: bool = False


CHARTS: tuple[Chart, ...] = (
    Chart(
        "reward",
        "Reward (total and per function)",
        ("reward",),
        "Mean reward of the sampled completions, and each reward function's mean: what GRPO is pushing up.",
        True,
    ),
    Chart(
        "reward_std",
        "Reward std and zero-std groups",
        ("reward_std", "frac_reward_zero_std"),
        "Group standard deviation normalises advantages; a group whose answers all score alike (std 0) teaches nothing.",
    ),
    Chart(
        "kl",
        "KL to the base model",
        ("kl",),
        "How far the policy has drifted from the base (beta × KL is the penalty); a fast climb hints at reward hacking.",
    ),
    Chart(
        "clip_ratio",
        "Clipped policy ratios",
        ("clip_ratio/",),
        "Share of tokens where the ratio pi_new/pi_old hit the clip range: PPO's speed limit on change at work.",
    ),
    Chart(
        "length",
        "Completion length",
        ("completions/mean_length", "completions/max_length", "completions/clipped_ratio"),
        "Tokens per completion; rising length with flat reward is length bias, a high clipped share means answers never finish.",
    ),
    Chart(
        "entropy",
        "Entropy",
        ("entropy",),
        "How spread the policy's token choices are; collapsing entropy means the group's answers stop differing.",
    ),
    Chart(
        "loss",
        "Loss",
        ("loss",),
        "The clipped surrogate plus the KL term; near zero on-policy by construction, so watch it for NaN rather than trend.",
    ),
    Chart(
        "learning_rate", "Learning rate", ("learning_rate",), "The optimizer's step size after warm-up and schedule."
    ),
    Chart(
        "grad_norm",
        "Gradient norm",
        ("grad_norm",),
        "Size of the update before clipping at max_grad_norm; spikes or NaN mean unstable training.",
    ),
    Chart(
        "step_time",
        "Step time (s)",
        ("step_time",),
        "Seconds per training step: generating G completions per prompt dominates it.",
    ),
)


def chart_keys(chart: Chart, available: Sequence[str]) -> list[str]:
    """The metric keys among ``available`` that ``chart`` draws, in a stable order."""
    keys = [k for k in chart.keys if not k.endswith("/") and k in available]
    prefixes = [k for k in chart.keys if k.endswith("/")]
    keys += sorted(k for k in available if any(k.startswith(p) for p in prefixes))
    if chart.per_reward:
        keys += sorted(k for k in available if k.startswith("rewards/") and k.endswith("/mean"))
    return keys


def smooth(values: Sequence[float], weight: float) -> list[float]:
    """Exponential moving average (TensorBoard style, debiased); ``weight`` 0 returns the values unchanged.
    Non-finite values pass through as they are and don't poison the average."""
    if weight <= 0:
        return list(values)
    out, last, count = [], 0.0, 0
    for v in values:
        if not math.isfinite(v):
            out.append(v)
            continue
        last = last * weight + (1 - weight) * v
        count += 1
        out.append(last / (1 - weight**count))
    return out


MAX_POINTS = 1200  # per trace: a chart a few hundred pixels wide shows no more, and Plotly stays fast


def keep_indices(values: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Which points to draw, at most about ``max_points``: per bucket the lowest and highest value (so spikes stay
    visible), every non-finite value (a NaN loss must show), and always the first and last point."""
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    buckets = max_points // 2
    size = math.ceil(n / buckets)
    padded = np.full(buckets * size, np.nan)
    padded[:n] = values
    grid = padded.reshape(buckets, size)
    finite = np.isfinite(grid)
    offsets = np.arange(buckets) * size
    lows = np.where(finite, grid, np.inf).argmin(axis=1) + offsets
    highs = np.where(finite, grid, -np.inf).argmax(axis=1) + offsets
    has_finite = finite.any(axis=1)
    extra = np.flatnonzero(~np.isfinite(values))
    keep = np.concatenate([lows[has_finite], highs[has_finite], extra, [0, n - 1]])
    return np.unique(keep[keep < n])


def build_figure(
    chart: Chart,
    runs: Mapping[str, Series],
    smoothing: float = 0.0,
    x_axis: str = "step",
    mark: tuple[int, str] | None = None,
) -> go.Figure:
    """The figure of one chart for one or more runs (``runs`` maps a run label to its series); ``mark`` is a step
    drawn as a dotted vertical line with its label (a fork's starting point), on the step axis only.

    Traces are plain dicts and Plotly's validation is skipped: the figure is built from our own well-formed data,
    and validating 10,000-point traces costs ~30 ms each.
    """
    traces = []
    for label, series in runs.items():
        for key in chart_keys(chart, list(series)):
            points = series[key]
            if len(points) == 0:
                continue
            table = np.asarray(points, dtype=float)  # columns: step, value, wall time
            values = table[:, 1]
            if smoothing > 0:  # smooth the full series first, then thin it out for drawing
                values = np.asarray(smooth(values.tolist(), smoothing))
            keep = keep_indices(values)
            xs = (table[keep, 2] - table[0, 2]) / 60 if x_axis == "time" else table[keep, 0].astype(int)
            name = key if len(runs) == 1 else f"{label}: {key}"
            mode = "lines+markers" if len(keep) < 50 else "lines"
            # numpy arrays, not lists: Plotly deep-copies trace data, and copying an array is one memcpy
            traces.append({"type": "scatter", "x": xs, "y": values[keep], "mode": mode, "name": name, "meta": key})
    layout = {
        "title": {"text": chart.title},
        "height": 300,
        "margin": {"l": 40, "r": 10, "t": 40, "b": 30},
        "xaxis": {"title": {"text": "minutes" if x_axis == "time" else "step"}},
        "legend": {"orientation": "h", "y": -0.25},
    }
    if mark is not None and x_axis == "step":
        step, text = mark
        line = {"type": "line", "x0": step, "x1": step, "yref": "paper", "y0": 0, "y1": 1, "line": {"dash": "dot"}}
        layout["shapes"] = [line]
        layout["annotations"] = [{"x": step, "yref": "paper", "y": 1, "text": text, "showarrow": False}]
    return go.Figure(data=traces, layout=layout, _validate=False)


def build_all(
    runs: Mapping[str, Series], smoothing: float = 0.0, x_axis: str = "step", mark: tuple[int, str] | None = None
) -> list[go.Figure]:
    """Every monitor chart, in :data:`CHARTS` order (``mark``: see :func:`build_figure`)."""
    return [build_figure(chart, runs, smoothing, x_axis, mark) for chart in CHARTS]


def heldout_figure(bars: Sequence[tuple[str, float, float]], problems: int) -> go.Figure:
    """The held-out evaluation as grouped bars: one ``(label, base, tuned)`` per metric, each a share from 0 to 1."""
    labels = [label for label, _, _ in bars]
    fig = go.Figure(
        [
            go.Bar(name="base", x=labels, y=[base for _, base, _ in bars]),
            go.Bar(name="tuned", x=labels, y=[tuned for _, _, tuned in bars]),
        ]
    )
    fig.update_layout(
        barmode="group",
        height=320,
        yaxis={"range": [0, 1], "tickformat": ".0%"},
        title=f"Held-out: {problems} problems",
    )
    return fig
