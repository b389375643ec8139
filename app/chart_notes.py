"""Notes that a run's config adds to its Monitor charts, where a chart would otherwise mislead or go silent.

- Clipped policy ratios with ``num_iterations`` = 1 (TRL's default, one optimisation pass per generation batch): the
  ratio pi_new/pi_old is exactly 1 by construction, so clipping never acts and the chart is flat at 0. Without a word
  that reads as "the speed limit is working"; the note says that 0 is what this config gives, and when it would not.
- KL with beta = 0 (TRL's default): TRL computes no KL term at all (SPEC.md), so no KL series is logged. The empty
  chart says so instead of "nothing logged yet"; when the worker measured KL itself (``measured_kl_steps``), the chart
  shows that line and says it is measured, not in the loss.

The config is read with ``.get`` and TRL's defaults, so a run stored before a field existed reads as TRL ran it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.charts import CHARTS, Chart

CLIP_NOTE = (
    "num_iterations = 1: one optimisation pass per batch, so the ratio is exactly 1 and clipping never acts;<br>"
    "0 is expected here (it moves only when a batch is reused, num_iterations > 1)"
)
KL_NOTE = "beta = 0: TRL computes no KL term at all, so there is none to chart<br>(set beta > 0, e.g. 0.04, to penalise and chart it)"
# at beta 0 the worker measures KL against the base itself (trainer/job/measures.py, every measured_kl_steps)
KL_MEASURED_NOTE = (
    "beta = 0: TRL computes no KL term; this line is measured against the base every few steps<br>on 16 completions "
    "spread over every group of the step's batch, not in the loss"
)


def chart_notes(config: Mapping[str, Any]) -> dict[str, str]:
    """Chart name -> the note this run's config calls for."""
    notes = {}
    if int(config.get("num_iterations", 1) or 1) == 1:
        notes["clip_ratio"] = CLIP_NOTE
    try:
        beta = float(config.get("beta", 0.0) or 0.0)
    except (TypeError, ValueError):
        beta = None
    if beta == 0.0:
        notes["kl"] = KL_NOTE
    return notes


def add_notes(figures: Sequence[Any], config: Mapping[str, Any], charts: Sequence[Chart] = CHARTS) -> list[Any]:
    """The figures (in ``charts`` order) with the notes of :func:`chart_notes`: on an empty chart in place of its
    "nothing logged" words; on a drawn chart under its title (a drawn KL chart at beta 0 is the measured KL, and says
    so)."""
    notes = chart_notes(config)
    out = list(figures)
    for index, chart in enumerate(charts):
        note = notes.get(chart.name)
        figure = out[index] if index < len(out) else None
        if note is None or figure is None or not hasattr(figure, "layout"):
            continue
        if not figure.data:
            figure.layout.annotations = [
                {"text": note, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False}
            ]
        else:
            figure.add_annotation(  # inside the plot's top edge, clear of the title
                text=KL_MEASURED_NOTE if chart.name == "kl" else note,
                xref="paper",
                yref="paper",
                x=0.5,
                y=0.97,
                yanchor="top",
                showarrow=False,
                font={"size": 11},
                bgcolor="rgba(255,255,255,0.8)",
            )
    return out
