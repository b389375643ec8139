"""Plotly figure builders for the dashboard: pure functions, rows or series in, figures out. Every figure the
dashboard shows is built here (the pages only place them).

For the monitor, a series is a list of ``(step, value, wall_time)`` points of one metric key of one run. Each chart
names the keys it draws (or a prefix, for per-reward keys), and carries one sentence on what it means for GRPO
(docs/grpo.md § GRPO in five quantities), shown under it in the dashboard.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from app.markup import html_text
from trainer.config import RunConfig

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
    unit: str = ""  # the y axis title
    empty: str = "nothing logged for this chart yet"  # said in place of empty axes
    # keys (or prefixes) drawn against a second y axis on the right, titled right_unit: a share of groups is not on
    # the scale of a reward std
    right: tuple[str, ...] = ()
    right_unit: str = ""
    smoothed: bool = True  # False: a few sparse points (the held-out curve) are drawn as measured, never smoothed
    with_tools: bool = False  # drawn for a run with tools only (shown_charts)
    stacked: bool = False  # the keys are parts of one whole, drawn as stacked areas (one stack per run)


CHARTS: tuple[Chart, ...] = (
    Chart(
        "reward",
        "Reward (total and per function)",
        ("reward",),
        "Mean reward of the sampled completions, and each reward function's mean: what GRPO is pushing up.",
        True,
        "reward (points)",
    ),
    Chart(
        "heldout",
        "Held-out accuracy (greedy)",
        ("heldout/correct", "heldout/format", "heldout/tool_calls"),
        "Share of held-out problems (never trained on) answered right and in the format, scored every eval_steps "
        "steps from the base model on: whether what GRPO learns carries over beyond the training prompts. A run with "
        "tools also draws the share of greedy answers that call one (the calls run as in training).",
        unit="share of problems",
        empty="no held-out evaluation in this run: set eval_steps (the offline demo does) to chart it while training",
        smoothed=False,
    ),
    Chart(
        "reward_std",
        "Reward std and zero-std groups",
        ("reward_std", "frac_reward_zero_std", "zero_std/"),
        "Group standard deviation normalises advantages; a group whose answers all score alike (std 0) teaches nothing.",
        unit="std (points)",
        right=("frac_reward_zero_std", "zero_std/"),
        right_unit="share of groups",
    ),
    Chart(
        "kl",
        "KL to the base model",
        ("kl", "kl_measured"),
        "How far the policy has drifted from the base (beta × KL is the penalty); a fast climb hints at reward hacking. "
        "At beta 0 TRL computes none: the worker then measures it every measured_kl_steps steps (measured, not in the "
        "loss).",
        unit="KL (nats per token)",
    ),
    Chart(
        "clip_ratio",
        "Clipped policy ratios",
        ("clip_ratio/", "cispo_clip_ratio", "vespo/phi_seq_mean"),
        "Share of tokens where the ratio pi_new/pi_old hit the clip range: PPO's speed limit on change at work "
        "(cispo_clip_ratio: cispo's clipped importance weights; vespo/phi_seq_mean: vespo's mean sequence weight, 1 "
        "when nothing is damped, its soft counterpart of the clip). It only acts when a batch is reused "
        "(num_iterations > 1, or steps_per_generation above the accumulation steps).",
        unit="share of tokens",
    ),
    Chart(
        "length",
        "Completion length",
        (
            "completions/mean_length",
            "completions/min_length",
            "completions/max_length",
            "completions/mean_terminated_length",
            "completions/min_terminated_length",
            "completions/max_terminated_length",
            "completions/clipped_ratio",
        ),
        "Tokens per completion; rising length with flat reward is length bias, a high clipped share means answers never finish.",
        unit="tokens",
        right=("completions/clipped_ratio",),
        right_unit="clipped share",
    ),
    Chart(
        "entropy",
        "Entropy",
        ("entropy", "entropy_coef", "text/repeating", "text/unusual_chars"),
        "How spread the policy's token choices are; collapsing entropy means the group's answers stop differing. "
        "On the right, the worker's signs of a collapsed policy (docs/grpo.md): the share of completions that loop "
        "and of characters outside the base's alphabet, near 0 on a healthy run.",
        unit="nats per token",
        right=("text/repeating", "text/unusual_chars"),
        right_unit="share",
    ),
    Chart(
        "loss",
        "Loss",
        ("loss", "policy_loss", "aux_loss"),
        "The clipped surrogate plus the KL term. With loss_type grpo or sapo a loss of ~0 is normal: on-policy the "
        "advantages of a group sum to zero, so the loss is ~0 while the gradient is not (trl#3452); watch reward and "
        "KL for progress, and this chart for NaN.",
        unit="loss",
    ),
    Chart(
        "learning_rate",
        "Learning rate",
        ("learning_rate",),
        "The optimizer's step size after warm-up and schedule.",
        unit="learning rate",
    ),
    Chart(
        "grad_norm",
        "Gradient norm",
        ("grad_norm",),
        "Size of the update before clipping at max_grad_norm; spikes or NaN mean unstable training.",
        unit="L2 norm",
    ),
    Chart(
        "step_time",
        "Where each step's time goes (s)",
        (
            "time/generation",
            "time/sync",
            "time/logprobs",
            "time/backward",
            "time/eval",
            "time/writes",
            "time/checkpoint",
            "time/other",
            "time/rewards/",
        ),
        "Each step's wall time, stacked by part, measured by timers around the calls: sampling, the weight sync to "
        "vLLM, each reward, log-prob passes outside the loss, the update (forward, backward, optimizer), held-out "
        "evaluation, grpo-studio's own writes, a checkpoint, and the rest. The note names the biggest share of the "
        "latest steps and what would shrink it.",
        unit="seconds",
        smoothed=False,
        stacked=True,
    ),
    # --- throughput, memory and the signals of vLLM and tools (issue 30) ---
    Chart(
        "throughput",
        "Throughput (tokens/s)",
        ("throughput/tokens_per_second",),
        "Prompt and completion tokens per second of wall time, from TRL's num_tokens: the figure to compare model "
        "paths (Unsloth, TRL + vLLM, plain) and GPUs by.",
        unit="tokens per second",
    ),
    Chart(
        "tokens",
        "Tokens per step",
        ("throughput/tokens_per_step",),
        "Prompt and completion tokens of each step's generation batch (steps that reuse a batch add none).",
        unit="tokens",
    ),
    Chart(
        "memory",
        "Peak GPU memory per step",
        ("memory/peak_gib", "memory/engine_gib"),
        "The most GPU memory the step allocated for training (torch.cuda.max_memory_allocated, reset every step), "
        "without what a colocated vLLM engine reserved when it started (its KV cache: about vllm_gpu_memory_utilization "
        "of the card, whatever the model), which is the second line.",
        unit="GiB",
        empty="measured on a CUDA GPU only: this run trains without one",
    ),
    Chart(
        "sampling",
        "vLLM vs trainer log-probs",
        ("sampling/",),
        "How far vLLM's log-probs of its samples are from the trainer's, and the importance-sampling ratio that "
        "corrects for it: a climbing difference means vLLM samples from other weights than the trainer holds.",
        unit="nats · ratio",
        empty="logged when vLLM generates (importance-sampling correction): this run samples with the trainer",
    ),
    Chart(
        "tools",
        "Tool calls and errors",
        ("tools/call_frequency", "tools/error_rate", "tools/failure_frequency"),
        "Tool calls per completion (TRL's call_frequency), and the share of the tools' answers that were errors: a "
        "call that raised, hung past tool_timeout_s or named no tool (grpo-studio's count of the error answers). "
        "TRL's failure_frequency counts only the calls that raised into TRL, which the time limit answers first, so "
        "it stays near 0. Runs with tools only.",
        unit="calls per completion",
        empty="no tool call logged yet",
        right=("tools/error_rate", "tools/failure_frequency"),
        right_unit="share of answers",
        with_tools=True,
    ),
)


def shown_charts(config: Mapping) -> tuple[Chart, ...]:
    """The charts that have something to say for a run of ``config`` (its stored mapping): the tool chart only for a
    run with tools or an environment (a run without them would show an empty chart)."""
    settings = RunConfig.from_stored(config)
    has_tools = bool(settings.tools or settings.environment)
    return tuple(chart for chart in CHARTS if has_tools or not chart.with_tools)


# One run: a chart's series differ by colour and dash (dash alone was hard to tell apart). Overlaid runs: one colour
# per run (the same in every chart), and a chart's series differ by dash and marker symbol. With smoothing, the raw
# series stays behind the smoothed one as a faded line of the same colour (as W&B and TensorBoard draw it).
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")
RAW_OPACITY = 0.25
SERIES_NAMES = {
    "reward": "total reward",
    "reward_std": "reward std",
    "frac_reward_zero_std": "zero-std groups",
    "kl": "KL",
    "kl_measured": "KL measured (not in the loss)",
    "policy_loss": "policy loss",
    "aux_loss": "aux loss",
    "time/generation": "generation",
    "time/sync": "weight sync to vLLM",
    "time/logprobs": "log-prob passes",
    "time/backward": "forward, backward, optimizer",
    "time/eval": "held-out evaluation",
    "time/writes": "grpo-studio's writes",
    "time/checkpoint": "checkpoint",
    "time/other": "the rest",
    "completions/mean_length": "mean length",
    "completions/max_length": "max length",
    "completions/clipped_ratio": "clipped share",
    "grad_norm": "gradient norm",
    "step_time": "step time",
    "heldout/tool_calls": "answers calling a tool",
    "tools/call_frequency": "calls per completion",
    "tools/error_rate": "error answers",
    "tools/failure_frequency": "failures TRL counted",
    "text/repeating": "completions that loop",
    "text/unusual_chars": "characters outside the base's",
}


def series_name(key: str) -> str:
    """A metric key as a legend reads it: "rewards/correctness/mean" → "correctness", "clip_ratio/low_mean" →
    "low mean"."""
    if key in SERIES_NAMES:
        return SERIES_NAMES[key]
    if key.startswith("rewards/") and key.endswith("/mean"):
        return key[len("rewards/") : -len("/mean")]
    if key.startswith("time/rewards/"):
        return "reward " + key[len("time/rewards/") :]
    return key.rsplit("/", 1)[-1].replace("_", " ")


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
    single = len(runs) == 1
    for index, (label, series) in enumerate(runs.items()):
        for order, key in enumerate(chart_keys(chart, list(series))):
            points = series[key]
            if len(points) == 0:
                continue
            table = np.asarray(points, dtype=float)  # columns: step, value, wall time
            raw = values = table[:, 1]
            if smoothing > 0 and chart.smoothed:  # smooth the full series first, then thin it out for drawing
                values = np.asarray(smooth(values.tolist(), smoothing))
            # a stack adds its parts point by point: every part keeps the same points
            keep = evenly(len(values)) if chart.stacked else keep_indices(values)
            xs = (table[keep, 2] - table[0, 2]) / 60 if x_axis == "time" else table[keep, 0].astype(int)
            # run names and metric keys are user text, and Plotly renders <a href> and <span style> in legends
            name = html_text(series_name(key) if single else f"{label} · {series_name(key)}")
            colour = COLOURS[(order if single else index) % len(COLOURS)]
            line = {"color": colour, "dash": DASHES[order % len(DASHES)]}
            mode = "lines+markers" if len(keep) < 50 else "lines"
            common = {"type": "scatter", "x": xs, "legendgroup": f"{label}|{key}"}
            if _on_right(chart, key):
                common["yaxis"] = "y2"
            if values is not raw:  # the measured values, faded, under the smoothed line
                faded = {"color": colour, "width": 1}
                traces.append(
                    common
                    | {"y": raw[keep], "mode": "lines", "name": f"{name} (raw)", "meta": f"{key} (raw)"}
                    | {"line": faded, "opacity": RAW_OPACITY, "showlegend": False, "hoverinfo": "skip"}
                )
            # Series that are the same line (four format rewards all at 0.5) would hide each other: the legend says
            # which earlier one each lies under (a stack draws each on the ones before it)
            twin = next(
                (
                    t
                    for t in traces
                    if t.get("showlegend", True)
                    and t.get("yaxis") == common.get("yaxis")
                    and _same_line(t, xs, values[keep])
                ),
                None,
            )
            if chart.stacked:
                twin, common["stackgroup"] = None, label
            if twin is not None:
                name = f"{name} (under {twin['name']})"
            # numpy arrays, not lists: Plotly deep-copies trace data, and copying an array is one memcpy
            trace = common | {"y": values[keep], "mode": mode, "name": name, "meta": key, "line": line}
            if not single:
                trace["marker"] = {"symbol": SYMBOLS[order % len(SYMBOLS)]}
            traces.append(trace)
    rows = math.ceil(
        sum(t.get("showlegend", True) for t in traces) / 2
    )  # the legend: two entries a row, under the plot
    layout = {
        "title": {"text": chart.title},
        "height": 300 + 20 * rows,
        "margin": {"l": 60, "r": 10, "t": 40, "b": 40},
        "xaxis": {"title": {"text": "minutes" if x_axis == "time" else "step"}},
        # exponent notation, not SI suffixes: a KL of 1.5e-7 must not read "150n"
        "yaxis": {"title": {"text": chart.unit}, "exponentformat": "e"},
        # under the x axis title, outside the plot area, however many runs are overlaid
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.2, "yanchor": "top"},
        "showlegend": bool(traces),
        # What the chart shows (x axis and runs): Plotly.react keeps a user's zoom across the redraws of one such view
        # (app/web/monitor_charts.js), and lets it go when another run or x axis is picked.
        "uirevision": f"{x_axis}|{'|'.join(runs)}",
    }
    if any(t.get("yaxis") == "y2" for t in traces):
        layout["yaxis2"] = {
            "title": {"text": chart.right_unit},
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "showgrid": False,
        }
        layout["margin"]["r"] = 60
    if not traces:  # words instead of empty axes with made-up ranges
        layout["xaxis"]["visible"] = False
        layout["yaxis"]["visible"] = False
        layout["annotations"] = [words_instead(chart.empty)]
    if mark is not None and x_axis == "step":
        step, text = mark
        line = {"type": "line", "x0": step, "x1": step, "yref": "paper", "y0": 0, "y1": 1, "line": {"dash": "dot"}}
        layout["shapes"] = [line]
        layout["annotations"] = [{"x": step, "yref": "paper", "y": 1, "text": text, "showarrow": False}]
    return go.Figure(data=traces, layout=layout, _validate=False)


def words_instead(text: str) -> dict:
    """An annotation in the middle of an empty chart: ``text`` (markup already made safe) where a plot would be."""
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False}


def evenly(n: int, max_points: int = MAX_POINTS) -> np.ndarray:
    """At most about ``max_points`` of ``n`` points at an even stride, the last always among them."""
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.append(np.arange(0, n, math.ceil(n / max_points)), n - 1))


def _same_line(trace: dict, xs: np.ndarray, ys: np.ndarray) -> bool:
    """Whether a trace already drawn has exactly these points (so a new one would lie hidden under it)."""
    return (
        len(trace["x"]) == len(xs)
        and np.array_equal(np.asarray(trace["x"]), np.asarray(xs))
        and np.allclose(trace["y"], ys, rtol=0, atol=1e-12, equal_nan=True)
    )


def _on_right(chart: Chart, key: str) -> bool:
    return any(key == k or (k.endswith("/") and key.startswith(k)) for k in chart.right)


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
