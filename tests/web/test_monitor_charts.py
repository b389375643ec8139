"""The Monitor's charts without a browser (issue 29): notes from the run's config, two axes, smoothing that leaves the
held-out curve and a faded raw line, and redraws skipped when nothing is new. tests/browser/test_browser_widths.py shows the
same charts in Chromium."""

from __future__ import annotations

import numpy as np
import pytest

from app.actions.monitor_state import RunCache, drawn_from
from app.web.widgets.chart_notes import CLIP_NOTE, KL_MEASURED_NOTE, KL_NOTE, add_notes, chart_notes, clip_note
from app.web.widgets.charts import CHARTS, RAW_OPACITY, build_all, build_figure
from trainer.config import RunConfig

CHART = {c.name: c for c in CHARTS}


def points(*values):
    return [(i + 1, float(v), float(i)) for i, v in enumerate(values)]


def test_clip_note_for_one_pass_and_kl_note_for_beta_zero():
    assert chart_notes({"beta": 0.0}) == {"clip_ratio": CLIP_NOTE, "kl": KL_NOTE}
    # a batch reused after an optimizer step (GA 1, μ 2) can clip; a KL term is logged at beta > 0
    assert chart_notes({"beta": 0.04, "num_iterations": 2}) == {
        "clip_ratio": clip_note({"num_iterations": 2}),
    }
    assert "1 is not a multiple of steps_per_generation × num_iterations = 1 × 2" in clip_note({"num_iterations": 2})
    assert "clipping can act" in clip_note({"num_iterations": 2})


def test_a_stored_config_without_beta_reads_as_the_beta_its_run_trained_with():
    """Issue 60.2: the notes read a stored config's missing beta as 0.0 and said TRL computes no KL term, where the
    worker, reading the same config as a RunConfig, trained with RunConfig's beta (0.04) and a KL term."""
    stored = {key: value for key, value in RunConfig().to_dict().items() if key != "beta"}
    assert RunConfig().beta > 0
    assert "kl" not in chart_notes(stored)  # TRL's own KL chart: nothing to explain
    assert chart_notes({**stored, "beta": 0.0})["kl"] == KL_NOTE


def test_the_clip_note_says_whether_the_runs_own_settings_let_clipping_act():
    """Issue 34: TRL keeps the sampler's log-probs only when gradient_accumulation_steps is not a multiple of
    steps_per_generation × num_iterations (trl grpo_trainer.py:2642-2644); the audit measured 0 at every step with
    GA 2, steps_per_generation 1, μ 2. steps_per_generation counts micro-batches."""
    aligned = clip_note({"num_iterations": 2, "gradient_accumulation_steps": 2, "steps_per_generation": 1})
    assert "2 is a multiple of steps_per_generation × num_iterations = 1 × 2" in aligned and "never acts" in aligned
    spread = clip_note({"gradient_accumulation_steps": 1, "steps_per_generation": 4})  # μ 1, a batch over 4 updates
    assert "clipping can act" in spread
    assert clip_note({}) == CLIP_NOTE and "never acts" in CLIP_NOTE  # TRL's defaults


def test_the_empty_kl_chart_of_a_beta_zero_run_says_why_and_a_drawn_clip_chart_keeps_its_data():
    figures = add_notes(build_all({"run": {"clip_ratio/region_mean": points(0, 0, 0)}}), {"beta": 0})
    kl, clip = figures[CHARTS.index(CHART["kl"])], figures[CHARTS.index(CHART["clip_ratio"])]
    assert [a.text for a in kl.layout.annotations] == [KL_NOTE]
    assert CLIP_NOTE in [a.text for a in clip.layout.annotations] and list(clip.data[0].y) == [0, 0, 0]
    measured = add_notes(build_all({"run": {"kl": points(0.1, 0.2)}}), {"beta": 0})  # a measured KL: no excuse
    assert KL_NOTE not in [a.text for a in measured[CHARTS.index(CHART["kl"])].layout.annotations]
    # the line drawn at beta 0 is the worker's measured KL (issue 30): it says it is not in the loss
    assert KL_MEASURED_NOTE in [a.text for a in measured[CHARTS.index(CHART["kl"])].layout.annotations]


def test_std_and_share_of_groups_have_an_axis_each():
    fig = build_figure(
        CHART["reward_std"], {"run": {"reward_std": points(0.5, 0.4), "frac_reward_zero_std": points(0.25, 0.5)}}
    )
    assert [(t.meta, t.yaxis) for t in fig.data] == [("reward_std", None), ("frac_reward_zero_std", "y2")]
    assert fig.layout.yaxis.title.text == "std (points)" and fig.layout.yaxis2.title.text == "share of groups"
    assert fig.layout.yaxis2.overlaying == "y" and fig.layout.yaxis2.side == "right"


def test_smoothing_leaves_the_heldout_curve_and_a_faded_raw_line():
    values = [0.2, 0.9, 0.3, 0.94]
    heldout = build_figure(CHART["heldout"], {"run": {"heldout/correct": points(*values)}}, smoothing=0.8)
    assert [t.meta for t in heldout.data] == ["heldout/correct"] and list(heldout.data[0].y) == values
    reward = build_figure(CHART["reward"], {"run": {"reward": points(*values)}}, smoothing=0.8)
    raw, smoothed = reward.data
    assert raw.meta == "reward (raw)" and list(raw.y) == values and raw.opacity == RAW_OPACITY
    assert raw.showlegend is False and raw.line.color == smoothed.line.color
    assert smoothed.y[-1] == pytest.approx(0.6, abs=0.1) and smoothed.y[-1] != values[-1]


def test_equal_caches_draw_equal_figures_and_a_new_step_draws_again():
    cache = RunCache(1, series={"reward": np.array([[1, 0.5, 0.0]])})
    first = drawn_from({1: cache}, [1], ("1: a",), 0.0, "step", None)
    assert drawn_from({1: cache}, [1], ("1: a",), 0.0, "step", None) == first
    assert drawn_from({1: cache}, [1], ("1: a",), 0.5, "step", None) != first  # another smoothing
    cache.series["reward"] = np.array([[1, 0.5, 0.0], [2, 0.7, 1.0]])
    assert drawn_from({1: cache}, [1], ("1: a",), 0.0, "step", None) != first


def test_the_monitor_hides_its_charts_without_a_run_and_does_not_redraw_what_it_drew():
    import gradio as gr

    from app.web.pages import monitor
    from app.web.widgets.empty_states import NO_RUNS_MONITOR, PICK_A_RUN
    from app.web.widgets.styles import CHART_NONE, CHART_SHOWN
    from storage import queries
    from storage.db import get_sessionmaker

    view = monitor.refresh(None, [], 0.0, "step", 0, {})
    assert view.header == NO_RUNS_MONITOR
    assert all(f["elem_classes"] == [CHART_NONE] and f["value"] is None for f in view.figures)
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "drawn", {"beta": 0.0}, 2).id
        for step in (1, 2):
            queries.add_metric_rows(s, queries.metric_rows(run_id, step, {"reward": step / 2}, float(step)))
    assert monitor.refresh(None, [], 0.0, "step", 0, {}).header == PICK_A_RUN
    first = monitor.refresh(run_id, [], 0.0, "step", 0, {})
    # every chart but the tool chart, which a run without tools does not have (tests/tools/test_tool_turns.py)
    classes = {chart.name: f["elem_classes"] for chart, f in zip(CHARTS, first.figures)}
    assert classes.pop("tools") == [CHART_NONE] and all(c == [CHART_SHOWN] for c in classes.values())
    assert list(first.figures[0]["value"].data[0].y) == [0.5, 1.0]
    again = monitor.refresh(run_id, [], 0.0, "step", 0, first.caches)  # nothing new: the browser keeps its plots
    assert all(f == gr.update() for f in again.figures)
    cleared = monitor.refresh(None, [], 0.0, "step", 0, again.caches)
    back = monitor.refresh(run_id, [], 0.0, "step", 0, cleared.caches)  # picked again after the charts went: drawn
    assert list(back.figures[0]["value"].data[0].y) == [0.5, 1.0]


def test_a_closed_more_charts_section_gets_only_the_first_charts_until_it_opens():
    """Issue 36 items 12-13: while "More charts" is closed a poll builds and sends the four first charts only (the
    others keep what they hold); opening it draws every chart at once, though no step arrived."""
    import gradio as gr

    from app.web.pages import monitor
    from storage import queries
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "sections", {"beta": 0.0}, 2).id
        for step in (1, 2):
            row = {"reward": step / 2, "kl": 0.01 * step, "loss": 0.1, "entropy": 1.0 - step / 10}
            queries.add_metric_rows(s, queries.metric_rows(run_id, step, row, float(step)))
    closed = monitor.refresh(run_id, [], 0.0, "step", 0, {}, more=False)
    names = [chart.name for chart in CHARTS]
    sent = {name for name, f in zip(names, closed.figures) if f != gr.update()}
    assert sent == set(monitor.FIRST)
    assert list(closed.figures[names.index("kl")]["value"].data[0].y) == [0.01, 0.02]
    assert closed.other_plot == gr.update()
    opened = monitor.refresh(run_id, [], 0.0, "step", 0, closed.caches, more=True)
    assert all(f != gr.update() for f in opened.figures)
    assert list(opened.figures[names.index("entropy")]["value"].data[0].y) == [0.9, 0.8]
    assert all(f == gr.update() for f in monitor.refresh(run_id, [], 0.0, "step", 0, opened.caches).figures)


def test_series_drawn_on_the_same_line_say_which_one_they_lie_under():
    """Issue 36 item 15: four format rewards all at 0.5 draw one line; the legend says the others lie under the first,
    and a series that differs at one step, or stands on the other axis, is not said to."""
    same = points(0.5, 0.5, 0.5)
    series = {
        "rewards/soft_format/mean": same,
        "rewards/strict_format/mean": same,
        "rewards/xml/mean": points(0.5, 0.5, 0.25),
    }
    names = [t.name for t in build_figure(CHARTS[0], {"run": series}).data]
    assert names == ["soft_format", "strict_format (under soft_format)", "xml"]
    std_chart = next(c for c in CHARTS if c.name == "reward_std")
    both = {"reward_std": points(0.2, 0.2), "frac_reward_zero_std": points(0.2, 0.2)}  # one left, one right axis
    assert [t.name for t in build_figure(std_chart, {"run": both}).data] == ["reward std", "zero-std groups"]


def test_a_drawn_charts_note_sits_above_its_plot_not_on_its_line():
    """Issue 36 item 15: the measured-KL note (and any note on a drawn chart) is drawn between the title and the plot,
    in a top margin made for it, where inside the plot it covered the line."""
    (kl,) = add_notes([build_figure(CHARTS[3], {"run": {"kl_measured": points(0.1, 0.2)}})], {"beta": 0}, [CHARTS[3]])
    note = kl.layout.annotations[-1]
    assert note.text == KL_MEASURED_NOTE and note.y == 1 and note.yanchor == "bottom" and note.yref == "paper"
    assert kl.layout.margin.t >= 60


def test_the_monitor_polls_at_the_live_pace_only_while_a_run_it_draws_is_live():
    """A finished run, or no run, is looked at every IDLE_POLL_SECONDS (for a resume from elsewhere); a queued or
    running run, shown or overlaid, every POLL_SECONDS."""
    import os

    from app.web.pages import monitor
    from storage import queries
    from storage.db import get_sessionmaker
    from storage.models import RunStatus

    def pace(run_id, overlay=()):
        live = monitor.refresh(run_id, list(overlay), 0.0, "step", 0, {}).live
        return monitor.POLL_SECONDS if live else monitor.IDLE_POLL_SECONDS

    assert pace(None) == monitor.IDLE_POLL_SECONDS == 15.0 and monitor.POLL_SECONDS == 2.0
    with get_sessionmaker().begin() as s:
        ended, live = (queries.create_run(s, name, {"beta": 0.0}, 2).id for name in ("ended", "live"))
        queries.add_metric_rows(s, queries.metric_rows(ended, 1, {"reward": 0.5}, 1.0))
    assert pace(live) == monitor.POLL_SECONDS  # queued: it starts soon
    with get_sessionmaker().begin() as s:
        queries.mark_running(s, queries.get_run(s, live), os.getpid(), "/nonexistent")
        queries.finish_run(s, queries.get_run(s, ended), RunStatus.COMPLETED)
    assert pace(live) == monitor.POLL_SECONDS
    assert pace(ended) == monitor.IDLE_POLL_SECONDS
    assert pace(ended, [live]) == monitor.POLL_SECONDS  # a live run drawn over it
    with get_sessionmaker().begin() as s:
        queries.finish_run(s, queries.get_run(s, live), RunStatus.STOPPED)
    assert pace(ended, [live]) == monitor.IDLE_POLL_SECONDS
    assert pace(99999) == monitor.IDLE_POLL_SECONDS  # a run that is gone
