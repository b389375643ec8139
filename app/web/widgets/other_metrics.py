"""The Monitor's "other metrics": every metric key a run logged that no chart of :data:`app.web.widgets.charts.CHARTS` draws,
listed and chartable on request, so a key the dashboard doesn't know yet (a newer TRL's, a custom one) is never
dropped. Pure functions, series in, names and figures out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from app.web.widgets.charts import CHARTS, Chart, Series, build_figure, chart_keys


def charted_keys(available: Sequence[str]) -> set[str]:
    """The keys among ``available`` that some monitor chart draws."""
    return {key for chart in CHARTS for key in chart_keys(chart, list(available))}


def other_keys(runs: Mapping[str, Series]) -> list[str]:
    """The keys the runs logged (any of them) that no chart draws, sorted: what the "other metrics" panel lists."""
    logged = {key for series in runs.values() for key in series}
    return sorted(logged - charted_keys(sorted(logged)))


def other_text(keys: Sequence[str]) -> str:
    """The panel's line listing ``keys``."""
    if not keys:
        return "<small>Every metric this run logged has a chart above.</small>"
    return f"<small>Logged but not charted above ({len(keys)}): {', '.join(f'`{k}`' for k in keys)}</small>"


def other_figure(
    runs: Mapping[str, Series], keys: Sequence[str], smoothing: float = 0.0, x_axis: str = "step"
) -> go.Figure:
    """One chart of the chosen other ``keys`` for the runs, drawn like every monitor chart."""
    chart = Chart(
        "other",
        "Other metrics",
        tuple(keys),
        "Metrics without a chart of their own.",
        empty="pick metrics above to chart them",
    )
    return build_figure(chart, runs, smoothing, x_axis)
