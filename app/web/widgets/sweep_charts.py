"""Plotly figure builders for the Sweeps view: pure functions, a sweep's rows in, figures out.

- :func:`parcoords_figure`: the members' points as parallel coordinates, one axis per swept setting and the objective
  last, each line coloured by the objective (the brighter, the better, whichever the direction). A choice or
  true/false setting is a categorical axis (``tickvals`` 0, 1, ... with the values as ``ticktext``); a numeric setting
  whose values span two decades or more (a learning rate) is drawn in log10, ticked at its values. A member with no
  value of the objective yet (queued, skipped by the probe, failed before its first evaluation) has no place on the
  last axis: it is left out, and the chart says which.
- :func:`curves_figure`: each member's objective over its steps, one line a member, the best one thick and the others
  thin and faded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import plotly.graph_objects as go

from app.markup import html_text
from app.web.widgets.charts import words_instead

COLORSCALE = "Viridis"
BEST_COLOR = "#d62728"
LOG_SPAN = 100.0  # a positive setting whose largest value is this many times its smallest is drawn in log10


class Member(Protocol):
    """What the builders read of a member (app.actions.MemberRow)."""

    run_id: int
    point: dict[str, Any]
    objective_now: float | None


def settings_order(definition: Mapping[str, Any], rows: Sequence[Member]) -> list[str]:
    """The swept settings in the sweep's order (its definition's), then any other a point holds."""
    names = list((definition or {}).get("settings") or {})
    for row in rows:
        names += [name for name in row.point if name not in names]
    return names


def unscored(rows: Sequence[Member]) -> list[Member]:
    """The members the parallel coordinates leave out: those without a value of the objective yet."""
    return [row for row in rows if row.objective_now is None or not math.isfinite(row.objective_now)]


def dimension(name: str, values: Sequence[Any], declared: Any = None) -> dict[str, Any]:
    """One axis of the parallel coordinates for setting ``name`` over ``values`` (one a drawn member). ``declared``:
    the setting as the sweep's definition gives it (its list of values orders a categorical axis)."""
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if not numeric:
        categories = [v for v in declared if v in values] if isinstance(declared, list) else []
        categories += [v for v in dict.fromkeys(values) if v not in categories]
        index = {_key(v): i for i, v in enumerate(categories)}
        return {
            "label": name,
            "values": [index[_key(v)] for v in values],
            "tickvals": list(range(len(categories))),
            "ticktext": [_text(v) for v in categories],
            "range": [0, max(len(categories) - 1, 1)],
        }
    floats = [float(v) for v in values]
    if floats and min(floats) > 0 and max(floats) / min(floats) >= LOG_SPAN:
        ticks = sorted(set(floats))
        return {
            "label": f"{name} (log)",
            "values": [math.log10(v) for v in floats],
            "tickvals": [math.log10(v) for v in ticks],
            "ticktext": [f"{v:g}" for v in ticks],
        }
    return {"label": name, "values": floats, **span(floats)}


def span(values: Sequence[float]) -> dict[str, Any]:
    """An axis range around a single value (Plotly's own would have no span, and ticks made up around it); nothing
    for values that differ."""
    if not values or min(values) != max(values):
        return {}
    half = abs(values[0]) / 10 or 0.5  # a tenth either side: a share of 0.89 stays between 0.8 and 1
    return {"range": [values[0] - half, values[0] + half]}


def parcoords_figure(
    rows: Sequence[Member], definition: Mapping[str, Any], objective: str, direction: str = "max"
) -> go.Figure:
    """The members' points as parallel coordinates, coloured by ``objective`` (see the module's docstring)."""
    left_out = unscored(rows)
    drawn = [row for row in rows if all(row is not out for out in left_out)]
    note = ""
    if left_out:
        ids = ", ".join(str(row.run_id) for row in left_out)
        note = f"not drawn, no {objective} yet: run{'s' if len(left_out) > 1 else ''} {ids}"
    layout: dict[str, Any] = {
        "title": {"text": f"Points, coloured by {html_text(objective)} ({direction})"},
        "height": 360,
        "margin": {"l": 70, "r": 70, "t": 80, "b": 70},
    }
    if not drawn:
        layout["annotations"] = [
            words_instead(html_text(f"no member has a value of {objective} yet: the chart fills in as they score"))
        ]
        layout["xaxis"] = layout["yaxis"] = {"visible": False}
        return go.Figure(layout=layout)
    settings = (definition or {}).get("settings") or {}
    axes = [
        dimension(name, [row.point.get(name) for row in drawn], settings.get(name))
        for name in settings_order(definition, drawn)
    ]
    scores = [float(row.objective_now) for row in drawn]
    axes.append({"label": f"{objective} ({direction})", "values": scores, **span(scores)})
    line = {
        "color": scores,
        "colorscale": COLORSCALE,
        "reversescale": direction == "min",  # bright is better either way
        "showscale": True,
        # one score for all: the colour bar spans the objective's axis, not a range Plotly makes up around it
        **{key: bound for key, bound in zip(("cmin", "cmax"), span(scores).get("range", ()))},
    }
    if note:
        layout["annotations"] = [
            {
                "text": html_text(note),
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": -0.2,
                "showarrow": False,
                "xanchor": "left",
            }
        ]
    trace = go.Parcoords(dimensions=axes, line=line, meta=[row.run_id for row in drawn])
    return go.Figure(data=[trace], layout=layout)


def curves_figure(
    curves: Mapping[int, Sequence[tuple[int, float]]],
    labels: Mapping[int, str],
    best: int | None,
    objective: str,
) -> go.Figure:
    """Each member's ``objective`` over its steps (``curves``: run id -> (step, value) points), the ``best`` member's
    line thick and on top, the others thin and faded; ``labels`` name them in the legend."""
    traces = []
    for run_id in sorted(curves, key=lambda r: (r == best, r)):  # the best drawn last: on top
        points = curves[run_id]
        if not points:
            continue
        top = run_id == best
        traces.append(
            go.Scatter(
                x=[step for step, _ in points],
                y=[value for _, value in points],
                mode="lines+markers",
                name=html_text(labels.get(run_id, f"run {run_id}")) + (" (best)" if top else ""),
                meta=run_id,
                line={"width": 4 if top else 1.5, "color": BEST_COLOR if top else None},
                opacity=1.0 if top else 0.55,
            )
        )
    layout: dict[str, Any] = {
        "title": {"text": f"{html_text(objective)} by step, one line a member"},
        "height": 360,
        "margin": {"l": 60, "r": 10, "t": 40, "b": 40},
        "xaxis": {"title": {"text": "step"}},
        "yaxis": {"title": {"text": html_text(objective)}, "exponentformat": "e"},
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.2, "yanchor": "top"},
    }
    if not traces:
        layout["annotations"] = [words_instead(html_text(f"no member has logged {objective} yet"))]
        layout["xaxis"]["visible"] = layout["yaxis"]["visible"] = False
    return go.Figure(data=traces, layout=layout)


def _key(value: Any) -> tuple[str, str]:
    return type(value).__name__, repr(value)


def _text(value: Any) -> str:
    return html_text(str(value).lower() if isinstance(value, bool) else str(value))
