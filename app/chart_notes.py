"""Notes that a run's config adds to its Monitor charts, where a chart would otherwise mislead or go silent.

- Clipped policy ratios with ``num_iterations`` = 1 (TRL's default, one optimisation pass per generation batch): the
  ratio pi_new/pi_old is exactly 1 by construction, so clipping never acts and the chart is flat at 0. Without a word
  that reads as "the speed limit is working"; the note says that 0 is what this config gives, and when it would not.
- KL with beta = 0 (TRL's default): TRL computes no KL term at all (SPEC.md), so no KL series is logged. The empty
  chart says so instead of "nothing logged yet"; when the worker measured KL itself (``measured_kl_steps``), the chart
  shows that line and says it is measured, not in the loss.
- A measure the worker turned off mid-run (it failed; trainer.job.measures says so in the run's log): the KL chart at
  beta 0 says "measured KL turned off at step N" with the reason, instead of going silent.

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
    "beta = 0: TRL computes no KL term; this line is measured against the base<br>every few steps, not in the loss"
)


# the charts that show a measure of the worker's (metric key -> chart name)
MEASURE_CHARTS = {"kl_measured": "kl"}


def off_note(measure: str, when: str) -> str:
    """The note on a chart whose measure turned itself off: ``when`` is "at step N: reason"."""
    step, _, reason = when.partition(": ")
    label = "measured KL" if measure == "kl_measured" else measure
    return f"{label} turned off {step}, so the line ends there:<br>{reason[:140]}"


def chart_notes(config: Mapping[str, Any], off: Mapping[str, str] | None = None) -> dict[str, str]:
    """Chart name -> the note this run's config calls for, and for a measure that turned itself off (``off``:
    storage.queries.measures_off), that."""
    notes = {}
    if int(config.get("num_iterations", 1) or 1) == 1:
        notes["clip_ratio"] = CLIP_NOTE
    try:
        beta = float(config.get("beta", 0.0) or 0.0)
    except (TypeError, ValueError):
        beta = None
    if beta == 0.0:
        notes["kl"] = KL_NOTE
        for measure, when in (off or {}).items():
            if measure in MEASURE_CHARTS:
                notes[MEASURE_CHARTS[measure]] = off_note(measure, when)
    return notes


def add_notes(
    figures: Sequence[Any],
    config: Mapping[str, Any],
    charts: Sequence[Chart] = CHARTS,
    off: Mapping[str, str] | None = None,
) -> list[Any]:
    """The figures (in ``charts`` order) with the notes of :func:`chart_notes`: on an empty chart in place of its
    "nothing logged" words; on a drawn chart under its title (a drawn KL chart at beta 0 is the measured KL, and says
    so, or that it turned off)."""
    notes = chart_notes(config, off)
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
                text=KL_MEASURED_NOTE if chart.name == "kl" and note == KL_NOTE else note,
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
