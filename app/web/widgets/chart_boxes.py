"""The boxes the dashboard's Plotly charts are drawn in by app/web/monitor_charts.js, and the carrier that hands them
each poll's payload (app/web/widgets/chart_payload.py). A box is plain HTML inside one gr.HTML per group of charts: the
page mounts no Gradio component per chart, and no loading status is kept for one.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import gradio as gr

from app.web.widgets.chart_payload import KEEP
from app.web.widgets.styles import CHART_NONE, CHART_SHOWN

# A carrier's script: each payload of its stream to app/web/monitor_charts.js, and, as its value, the token of the
# last one applied, which the next poll sends back (chart_payload.payload). On its mount (the widgets mounted again)
# the charts held are drawn into the new boxes, and Plotly is fetched if it was not.
CARRIER = """
const take = () => {{
    const sent = props.value;
    if (sent && sent.charts) props.value = {{ ack: window.grpoCharts.apply(sent, "{stream}") }};
}};
watch("value", take);
take();
window.grpoCharts.sync();
"""


def carrier(stream: str) -> gr.HTML:
    """The invisible widget whose value is ``stream``'s payloads on the way in and the page's token on the way out;
    an event's input and output both (``ack``)."""
    return gr.HTML(None, html_template="", js_on_load=CARRIER.format(stream=stream), visible="hidden")


def ack(held: Any) -> int | None:
    """The token a carrier's value says the page applied last (None before any, or while a payload is unread)."""
    return held.get("ack") if isinstance(held, dict) else None


def box(box_id: str, title: str, meaning: str = "") -> str:
    """One chart's box: its plot, named to a screen reader by ``title`` until the chart's summary replaces that, and
    its ``meaning`` under it. It says it is loading until its chart is drawn (app/web/widgets/styles.py)."""
    caption = f'<small class="chart-meaning">{html.escape(meaning)}</small>' if meaning else ""
    return (
        f'<div class="chart-box"><div id="{box_id}" class="{CHART_SHOWN}" role="figure" '
        f'aria-label="{html.escape(title)}"><div class="chart-plot"></div></div>{caption}</div>'
    )


def grid(boxes: Sequence[str], **kwargs) -> gr.HTML:
    """``boxes`` side by side as the width allows (a phone stacks them), in one widget."""
    return gr.HTML('<div class="chart-grid">' + "".join(boxes) + "</div>", js_on_load=None, **kwargs)


def change(update: Any) -> Any:
    """A chart's change as a page module holds it (a ``gr.update`` of its figure and its box's class, or a bare
    figure or None) as chart_payload.payload takes it: the figure, None to hide the chart (a box marked CHART_NONE,
    or no figure), or KEEP."""
    if isinstance(update, dict) and update.get("__type__") == "update":
        if CHART_NONE in update.get("elem_classes", ()):
            return None
        return update["value"] if "value" in update else KEEP
    return update
