"""Figure builders of the Monitor's learning panel (app/web/pages/learning.py): the prompts × steps heat map, each step's
share of groups that carried signal, and the coloured tokens of one completion. Pure: rows in, figure (or HTML)
out."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from app.markup import html_text
from storage.learning import TokenValues
from trainer.insight.learning_map import CLASSES, HELDOUT, LearningMap

MAX_ROWS = 160  # prompts drawn: past this a row is under 3 px at the figure's height cap; the CLI lists them all
ROW_PX = 14
CLASS_MARK = {
    "learning": "↗",
    "forgetting": "↘",
    "learnt": "★",
    "seen once": "·",
    "never solved": "✗",
    "mostly solved": "≈",
    "always solved": "✓",
}


def _label(text: str, width: int = 38) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def learning_heatmap(lm: LearningMap, max_rows: int = MAX_ROWS) -> go.Figure:
    """Prompts (rows, sorted by class: learning, forgetting, learnt, seen once, never solved, mostly solved, always
    solved; training prompts above held-out problems) × steps, coloured by pass rate; a blank cell is a step that did not sample the prompt."""
    lines = lm.lines[:max_rows]
    index = {step: i for i, step in enumerate(lm.steps)}
    z = [[None] * len(lm.steps) for _ in lines]
    for row, line in enumerate(lines):
        for visit in line.visits:
            z[row][index[visit.step]] = visit.rate
    labels = [
        f"{CLASS_MARK[ln.cls]} {'[held-out] ' if ln.source == HELDOUT else ''}{html_text(_label(ln.prompt))} · {row}"
        for row, ln in enumerate(lines)
    ]  # the row number keeps two prompts that read alike once cut on rows of their own
    hover = [[f"{ln.cls}<br>{html_text(_label(ln.prompt, 80))}" for _ in lm.steps] for ln in lines]
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=lm.steps,
            y=labels,
            text=hover,
            hovertemplate="step %{x}<br>%{text}<br>pass rate %{z:.0%}<extra></extra>",
            colorscale=[[0.0, "#c0392b"], [0.5, "#f4d03f"], [1.0, "#1e8449"]],
            zmin=0,
            zmax=1,
            colorbar={"title": "pass rate", "tickformat": ".0%"},
            meta="learning-map",
        )
    )
    counts = lm.counts()
    shown = "" if len(lm.lines) <= max_rows else f" (first {max_rows} of {len(lm.lines)})"
    figure.update_layout(
        title="Prompts × steps: " + ", ".join(f"{counts[c]} {c}" for c in CLASSES) + shown,
        height=min(1800, 140 + ROW_PX * max(len(lines), 4)),
        margin={"l": 10, "r": 10, "t": 50, "b": 40},
        yaxis={"autorange": "reversed", "automargin": True, "tickfont": {"size": 10}},
        xaxis={"title": "step"},
    )
    return figure


def signal_figure(lm: LearningMap) -> go.Figure:
    """The share of each step's groups whose rewards differed: the part of the batch GRPO learnt from."""
    steps = list(lm.signal)
    figure = go.Figure(go.Bar(x=steps, y=[lm.signal[s] for s in steps], marker_color="#2874a6", meta="signal"))
    figure.update_layout(
        title="Groups that carried a learning signal",
        height=260,
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        yaxis={"tickformat": ".0%", "range": [0, 1]},
        xaxis={"title": "step"},
    )
    return figure


def _colour(logprob: float) -> str:
    """Red for a token the policy found unlikely, through white, to green for a sure one."""
    p = math.exp(max(logprob, -30.0))
    red, green = (255, int(255 * p / 0.5)) if p < 0.5 else (int(255 * (1 - p) / 0.5), 255)
    return f"rgb({red},{green},{min(red, green)})"


def token_html(values: TokenValues, advantage: float | None) -> str:
    """One completion's tokens, each coloured by its probability under the policy, with its log-probability,
    entropy and the reference's log-probability on hover, under a line with the completion's advantage."""
    parts = []
    for i, token in enumerate(values.tokens):
        lp = values.logprobs[i]
        tip = f"log p {lp:.3f} (p {math.exp(lp):.2f})"
        if values.entropies is not None:
            tip += f" · entropy {values.entropies[i]:.3f}"
        if values.ref_logprobs is not None:
            tip += f" · reference log p {values.ref_logprobs[i]:.3f}"
        shown = html_text(token).replace("\n", "↵<br>") or "∅"
        parts.append(
            f'<span class="tok" data-logprob="{lp:.4f}" title="{html_text(tip)}" '
            f'style="background:{_colour(lp)};padding:1px 0;border-radius:2px">{shown}</span>'
        )
    lps = values.logprobs
    sure = sum(1 for lp in lps if lp > math.log(0.5))
    head = (
        f"<b>step {values.step}, completion #{values.sample_index}</b> · advantage "
        f"{'n/a' if advantage is None else f'{advantage:+.3f}'} · {len(lps)} tokens, sum log p {sum(lps):.2f}, "
        f"{sure} of them with p > 0.5"
    )
    if values.entropies:
        head += f", mean entropy {sum(values.entropies) / len(values.entropies):.3f}"
    legend = "<small>red: tokens the policy found unlikely; green: sure ones. Hover a token for its values.</small>"
    body = "".join(parts)
    return f'<div id="token-values">{head}<br>{legend}<div style="font-family:monospace;line-height:1.8">{body}</div></div>'
