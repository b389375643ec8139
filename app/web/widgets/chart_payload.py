"""The Monitor's charts as one JSON payload per poll, drawn in the browser by app/web/monitor_charts.js (issue 59).

Each chart used to be a gr.Plot: the page mounted a Gradio component (and its loading status) per chart, evaluated
Gradio's Plotly bundle for them, and every poll re-sent every changed figure whole, all its points again. Now the
figures are still built here in Python, by the same pure builders (app/web/widgets/charts.py), but what travels is
one value for all of them: per chart its whole figure the first time, and after that only the points each trace
gained (a live run's step adds one point per trace, so a poll is a few hundred bytes instead of every series again).

What the browser holds is known from a handshake, not assumed: every payload carries a token, the browser answers
with the token of the last payload it applied (the carrier's value, sent back as an input of the next poll), and a
payload of points to append is only sent on top of the figures the browser acknowledged. Anything else (a first
poll, a payload the browser missed or could not apply) gets every chart's figure whole.

A figure is sent as plain JSON: lists rather than Plotly's base64 arrays (points have to be appended to them), a
non-finite value as null (Plotly draws a gap for it, as it did for NaN), and the theme (Plotly's default template,
the same for every chart) once per whole payload rather than once per chart.
"""

from __future__ import annotations

import functools
import html
import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.io as pio

# a payload's token: unique in this process, so two polls of one page answered at once never share one
_TOKENS = itertools.count(1)
XY = ("x", "y")


@dataclass
class Drawn:
    """What one browser page holds of the Monitor's charts, as far as the server knows: each drawn chart's figure as
    last sent (plain JSON), the charts it was told to hide, and the token of the last payload sent."""

    figures: dict[str, dict] = field(default_factory=dict)
    hidden: set[str] = field(default_factory=set)
    token: int | None = None


def plain(value: Any) -> Any:
    """``value`` (a trace or layout from Plotly) as plain JSON: numpy arrays as lists, non-finite numbers as null."""
    if isinstance(value, np.ndarray):
        items = value.tolist()
        return [plain(v) for v in items] if value.dtype.kind in "fcO" else items
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def figure_json(figure) -> dict:
    """A Plotly figure as the browser draws it: its traces and its layout, without the theme (sent once)."""
    layout = figure.layout.to_plotly_json()
    layout.pop("template", None)
    return {"data": [plain(trace.to_plotly_json()) for trace in figure.data], "layout": plain(layout)}


@functools.cache
def theme() -> dict:
    """The theme every figure of ours is drawn with: Plotly's default template."""
    return plain(pio.templates[pio.templates.default].to_plotly_json())


def appended(old: dict, new: dict) -> dict | None:
    """``new`` as what it adds to ``old``: per trace the points past the ones ``old`` has (``extend``: trace index,
    its new xs, its new ys) and the layout when it changed; None when ``new`` is not ``old`` with points appended
    (another trace, a renamed one, or points that moved: a smoothed series thinned out differently past 1,200 points)."""
    if len(old["data"]) != len(new["data"]):
        return None
    extend = []
    for index, (was, now) in enumerate(zip(old["data"], new["data"])):
        if {k: v for k, v in was.items() if k not in XY} != {k: v for k, v in now.items() if k not in XY}:
            return None
        xs, ys = was.get("x") or [], was.get("y") or []
        if now.get("x", [])[: len(xs)] != xs or now.get("y", [])[: len(ys)] != ys or len(xs) != len(ys):
            return None
        if len(now.get("y", [])) > len(ys):
            extend.append([index, now["x"][len(xs) :], now["y"][len(ys) :]])
    change: dict[str, Any] = {"extend": extend}
    if old["layout"] != new["layout"]:
        change["layout"] = new["layout"]
    return change


def summary(figure: dict) -> str:
    """A chart in words, for a screen reader (its box's aria-label): its title and each series' latest value, or,
    with nothing drawn, the words the chart shows instead."""
    layout = figure["layout"]
    title = (layout.get("title") or {}).get("text", "chart")
    axis = ((layout.get("xaxis") or {}).get("title") or {}).get("text", "x")
    said = []
    for trace in figure["data"]:
        xs, ys = trace.get("x") or [], trace.get("y") or []
        if trace.get("showlegend") is False or not xs:
            continue
        if trace.get("type") == "heatmap":  # the learning map: its rows are prompts, its columns steps
            said.append(f"prompts {len(ys)}, steps {len(xs)}")
            continue
        points = [(x, y) for x, y in zip(xs, ys) if isinstance(y, (int, float))]
        if points:
            x, y = points[-1]
            name = f"{trace['name']} " if trace.get("name") else ""
            said.append(f"{name}{y:.3g} at {axis} {x if isinstance(x, int) else format(x, '.4g')}")
    if not said:
        said = [note.get("text", "") for note in layout.get("annotations") or []]
    return _words(f"{title}: " + "; ".join(said))


def _words(text: str) -> str:
    """Markup as plain words: line breaks as spaces, tags dropped, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", text.replace("<br>", " ")))


KEEP = object()  # a chart the poll left as the browser has it


def payload(changes: Mapping[str, Any], drawn: Drawn, ack: int | None) -> dict | None:
    """The value to send for one poll, and ``drawn`` brought up to it (updated in place). ``changes``: chart name ->
    its new Plotly figure, None to hide it, or :data:`KEEP`; ``ack``: the token of the last payload the browser
    applied. None: nothing to send (nothing changed, and the browser holds what was sent)."""
    whole = ack != drawn.token  # the browser does not hold what was last sent: every chart goes whole
    charts: dict[str, dict] = {}
    for name, change in changes.items():
        if change is KEEP:
            continue
        if change is None:
            drawn.figures.pop(name, None)
            drawn.hidden.add(name)
            charts[name] = {"hidden": True}
            continue
        new = figure_json(change)
        old = drawn.figures.get(name)
        step = None if whole or old is None else appended(old, new)
        if step is not None and not step["extend"] and "layout" not in step:
            drawn.figures[name] = new
            continue  # drawn already, exactly so
        charts[name] = step if step is not None else {"figure": new}
        charts[name]["label"] = summary(new)
        drawn.figures[name], drawn.hidden = new, drawn.hidden - {name}
    if whole:
        for name, figure in drawn.figures.items():
            charts.setdefault(name, {"figure": figure, "label": summary(figure)})
        for name in drawn.hidden:
            charts.setdefault(name, {"hidden": True})
    if not charts:
        return None
    sent = {"token": next(_TOKENS), "base": None if whole else drawn.token, "charts": charts}
    if any("figure" in chart for chart in charts.values()):
        sent["template"] = theme()
    drawn.token = sent["token"]
    return sent
