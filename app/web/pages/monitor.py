"""Monitor: live charts of a run (with optional overlays), progress and ETA, health alerts, the completions table
by step, and the log tail. A gr.Timer polls; each poll reads only the metric steps that arrived since the last one
(see app.actions.monitor_state).

The charts are not Gradio components: each poll sends all of them as one value (app/web/widgets/chart_payload.py:
whole figures the first time, then the points each series gained), which the page draws with Plotly into plain boxes
(app/web/monitor_charts.js). As 17 gr.Plot widgets they cost a deep link three times the root page's load (a
component and a loading status each, Gradio's Plotly bundle, a figure sent whole at every change; issue 59).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
from sqlalchemy.exc import SQLAlchemyError

from app import actions
from app.actions.monitor_state import RunCache, drawn_from, progress_text
from app.actions.reading import MAX_SAMPLES
from app.markup import code, fenced, md
from app.web.pages import learning
from app.web.widgets import chart_boxes
from app.web.widgets.chart_notes import add_notes
from app.web.widgets.chart_payload import Drawn, payload
from app.web.widgets.charts import CHARTS, Chart, build_figure, shown_charts
from app.web.widgets.completions import group_marks, turns_text
from app.web.widgets.empty_states import NO_RUNS_MONITOR, PICK_A_RUN
from app.web.widgets.other_metrics import other_figure, other_keys, other_text
from app.web.widgets.start_phases import phases_text, start_phases
from app.web.widgets.styles import CHART_NONE, CHART_SHOWN
from app.web.widgets.verdict import problem, verdict

log = logging.getLogger(__name__)

# The live pace: a step's point is in the chart within this plus the server's answer (bench/deep_link.py, target 2 s).
# At 1 s it was met, but a user's zoom on the live chart was lost under CI's load, cause not found (docs/benchmarks.md).
POLL_SECONDS = 2.0
# The polls' pace (the Monitor's and its learning panel's) while nothing shown can change on its own: no run picked, or
# the run and its overlays ended. They still look, for a run resumed from the command line or a new evaluation, say;
# at the live pace an open Monitor of a finished run cost its browser about half a core (measured with Chromium's own
# counters: a poll every 2 s, each a round of ~40 outputs, and the panel's every 5 s) and the server a tenth.
IDLE_POLL_SECONDS = 15.0
# The charts a user reads first, in one row above the fold: how much it earns, whether it carries over, how far it
# drifted, and how much of the batch taught anything (the zero-std share). The rest wait under "More charts", drawn
# only while that section is open.
FIRST = ("reward", "heldout", "kl", "reward_std")
MORE_TITLE = "More charts: " + ", ".join(
    title[0].lower() + title[1:] for title in (c.title.split(" (")[0] for c in CHARTS if c.name not in FIRST)
)
# The header as the browser may show it under the run picked: one that names another run (progress_text's "(run N) —")
# is replaced by "Reading run M…", at once, when the picker changes and whenever a poll's answer for the previous pick
# arrives after the new pick. Until the server's poll of the new run answered (a round trip, and on a loaded machine
# seconds in line), a member opened from the Sweeps tab showed "(run 6) — queued … waiting behind run 3 (running)"
# under a picker and an address saying run 7, runs 3 and 6 stopped minutes before (issue 59).
HEADER_OF_PICK = """(run, header) => {
    const named = /\\(run (\\d+)\\) —/.exec(header || "");
    const picked = (run === null || run === undefined || run === "") ? null : String(run);
    return (named && picked !== null && named[1] !== picked) ? `Reading run ${picked}…` : header;
}"""


@dataclass
class MonitorView:
    """What one poll shows, field by field; :func:`build` maps it onto the widgets in one place. ``gr.update()``
    leaves a widget as it is, None clears a chart."""

    header: str
    caches: dict[int, RunCache]
    banner: str = ""
    # no chart boxes until there is something to chart (a chart marked CHART_NONE is hidden: chart_boxes.change)
    figures: list[Any] = field(default_factory=lambda: [gr.update(value=None, elem_classes=[CHART_NONE])] * len(CHARTS))
    step: dict = field(default_factory=gr.update)  # the completions slider's range and value
    table: Any = field(default_factory=list)  # completions rows
    log: Any = ""
    other_pick: Any = field(default_factory=gr.update)  # the "other metrics" picker: its choices and value
    other_list: Any = ""  # the keys no chart draws, listed
    other_plot: Any = None  # the chart of the picked ones
    live: bool | None = False  # whether a run drawn can still change on its own (the polls' pace); None: as it was


def paces(live: bool) -> tuple[float, float]:
    """The seconds between the Monitor's polls and between the learning panel's, for a view that is ``live``."""
    return (POLL_SECONDS, learning.FOLLOW_SECONDS) if live else (IDLE_POLL_SECONDS, IDLE_POLL_SECONDS)


# --- callbacks ------------------------------------------------------------------------------------------------------
def health_markdown(series, max_completion_length: int | None, run=None, watch_alerts=()) -> str:
    """The alert banner: the run's one list of alerts (trainer.insight.alerts; ``watch_alerts``: the watch's history, cached
    per step by the caller), each with its hint, warnings before notes, or nothing. Every message is escaped: a reward
    name or a metric key in it is the user's text."""
    lines = []
    for a in actions.cached_alerts(series, max_completion_length, run, watch_alerts):
        if a.level == "note":
            lines.append(verdict("info", "Note:", f"**{md(a.message)}** — {md(a.hint)}"))
        elif a.source == "watch":
            state = "" if a.holds_now else ", cleared"
            lines.append(
                verdict("warn", "Watch:", f"**{md(a.name)}** ({md(a.steps)}{state}): {md(a.message)} — {md(a.hint)}")
            )
        else:
            lines.append(verdict("warn", "Warning:", f"**{md(a.message)}** — {md(a.hint)}"))
    return "\n\n".join(lines)


def completions_table(run_id: int | None, step: int | None) -> list[list[Any]]:
    """The sampled completions of one step (app.actions.samples; a step without samples shows the newest): group,
    prompt, completion (a tool run's turn by turn: app.web.widgets.completions.turns_text), each reward, total, advantage, and a
    mark on the best and worst answer of each group."""
    if run_id is None:
        return []
    try:
        read = actions.samples(int(run_id), step, limit=MAX_SAMPLES, newest_if_missing=True)
    except actions.ActionError:  # the run is gone
        return []
    samples = read["samples"]
    marks = group_marks([s["group"] for s in samples], [s["total_reward"] for s in samples])
    rows = []
    for s, mark in zip(samples, marks):
        scores = ", ".join(f"{k}={v:.3g}" if v is not None else f"{k}=n/a" for k, v in s["rewards"].items())
        rows.append(
            [
                read["step"],
                s["group"],
                mark,
                s["prompt"],
                turns_text(s["turns"]) if "turns" in s else s["completion"],
                s["reference_answer"] or "",
                scores,
                _round(s["total_reward"]),
                _round(s["advantage"]),
            ]
        )
    return rows


def completion_detail(evt: gr.SelectData) -> str:
    """The clicked row of the completions table in full: prompt, completion, reference and scores."""
    row = evt.row_value or []
    if len(row) < 9:
        return ""
    step, group, mark, prompt, completion, reference, scores, total, advantage = row[:9]
    return (
        f"**Step {md(step)}, group {md(group)}** {md(mark)} · total {md(total)} · advantage {md(advantage)} · "
        f"{md(scores)}\n\n**Prompt**\n{fenced(prompt)}\n**Completion**\n{fenced(completion)}\n"
        f"reference answer: {code(reference)}"
    )


def _figure_update(chart, noted: dict[str, Any], in_sight: list) -> dict:
    """A chart's update in a redraw: its figure where one was built (``noted``), hidden where it is in sight but the
    run has nothing for it (the tool chart of a run without tools), else left as the browser has it."""
    if chart.name in noted:
        return gr.update(value=noted[chart.name], elem_classes=[CHART_SHOWN])
    if chart in in_sight:
        return gr.update(value=None, elem_classes=[CHART_NONE])
    return gr.update()


def _round(value: float | None) -> float | str:
    return "" if value is None else round(value, 3)


def refresh(
    run_id, overlay, smoothing, x_axis, step, caches, pinned=False, raw=False, other=None, more=True
) -> MonitorView:
    """One timer tick: poll, then rebuild the header, alerts, charts, completions and log for the selection.
    ``more``: whether the "More charts" section is open; while it is closed only the :data:`FIRST` charts are built
    and sent (a live run's poll otherwise rebuilt and redrew 16 figures every 2 s, most of them out of sight).

    The completions table follows the newest sampled step unless the user has pinned the slider on an earlier one.
    A database that fails (damaged, full, locked) is reported in one sentence in the header, and the charts stay.
    """
    try:
        return _refresh(run_id, overlay, smoothing, x_axis, step, caches, pinned, raw, other, more)
    except SQLAlchemyError as exc:
        return _unread(problem(actions.describe_error(exc)), caches)
    except Exception:  # the header must not go on saying what it said before
        log.exception("the Monitor could not read run %s", run_id)
        return _unread(problem(f"the Monitor could not read run {run_id}; the server's log says why"), caches)


def _unread(header: str, caches: dict[int, RunCache]) -> MonitorView:
    """A poll that read nothing: ``header`` says why, and the charts, table and log stay as they are."""
    keep = gr.update()
    return MonitorView(
        header,
        caches,
        figures=[keep] * len(CHARTS),
        table=keep,
        log=keep,
        other_list=keep,
        other_plot=keep,
        live=None,
    )


def _undrawn(caches: dict[int, RunCache]) -> dict[int, RunCache]:
    """The caches, marked as having nothing drawn in the browser (its charts are being cleared), so that picking a run
    again draws its charts again."""
    for cache in caches.values():
        cache.drawn = None
    return caches


def waiting_text(running: list[int], ahead: list[int]) -> str:
    """What a queued run waits for: "waiting behind run 4 (running)" and how many queued runs are ahead of it
    (``running``, ``ahead``: the ids of the running runs and of the queued ones before it, ascending)."""
    if not running and not ahead:
        return verdict("wait", "Queued:", "it starts within a few seconds, when the dashboard's scheduler next looks.")
    behind = f"run {running[0]} (running)" if running else f"run {ahead[-1]} (queued)"
    more = len(running) + len(ahead) - 1
    return verdict(
        "wait",
        "Queued:",
        f"waiting behind {behind}" + (f" and {more} more" if more > 0 else "") + ". Its charts start then.",
    )


def _refresh(run_id, overlay, smoothing, x_axis, step, caches, pinned, raw, other=None, more=True) -> MonitorView:
    if run_id is None:
        return MonitorView(NO_RUNS_MONITOR if not actions.has_runs() else PICK_A_RUN, _undrawn(caches))
    read = actions.monitor_view(int(run_id), overlay, caches, raw=raw)  # the whole poll in one session
    run_ids, caches, runs, fork, main = read.run_ids, read.caches, read.runs, read.fork, read.main
    steps = read.sample_steps
    waiting = waiting_text(*read.queue) if read.queue is not None else ""
    if main is None:
        return MonitorView(f"Run {run_id} no longer exists: pick another run above.", _undrawn(caches))
    forked = ""
    if fork:
        forked = f"\n\nForked from run {fork[0]} at step {fork[1]}: drawn over its parent; the dotted line is the fork."
    # each phase of the start as it happens, with its own time (app/web/widgets/start_phases.py), while the run is live
    phases = phases_text(start_phases(main, read.start_lines, caches[int(run_id)].series.get("heldout/seconds")))
    starting = "\n\n" + phases if read.start_lines or waiting else ""
    log_text = "\n".join(f"{line.created_at:%H:%M:%S} {line.level} {line.message}" for line in read.log_lines)
    if starting and not any(caches[rid].series for rid in run_ids):  # no empty charts: say what it waits for
        return MonitorView(
            progress_text(main) + starting + ("\n\n" + waiting if waiting else "") + forked,
            _undrawn(caches),
            table=[],
            log=log_text,
            live=True,
        )
    labels = {f"{rid}: {runs[rid].name}": caches[rid].series for rid in run_ids if runs.get(rid)}
    live = any(not actions.RunStatus(runs[rid].status).terminal for rid in run_ids if runs.get(rid))
    header = progress_text(main, logged=caches[int(run_id)].series.get("reward")) + starting
    if waiting:  # a resumed run waits with the steps it logged before, a fork over its parent's
        header += "\n\n" + waiting
    if main.backend:
        header += f"\n\nModel path: {md(main.backend)}"
    header += forked
    if main.error:
        header += f"\n\n**Error:** {code(main.error.strip().splitlines()[-1])}"
    last = steps[-1] if steps else 0
    shown = step if pinned and step in steps else last
    worker_log = read.worker_log
    if worker_log:  # the library output (warnings, TRL's dicts) only on request: grpo-studio's lines say what matters
        log_text += "\n--- raw worker output ---\n" + worker_log
    others = other_keys(labels)
    picked = [key for key in (other or []) if key in others]
    view = (
        smoothing or 0.0,
        "time" if x_axis == "wall time" else "step",
        (fork[1], f"forked from run {fork[0]}") if fork else None,
    )
    drawn = (drawn_from(caches, run_ids, tuple(labels), *view), tuple(picked), bool(more))
    if caches[int(run_id)].drawn == drawn:  # nothing new to draw: the browser keeps its plots (and their zoom)
        figures, other_plot = [gr.update()] * len(CHARTS), gr.update()
    else:
        in_sight = [chart for chart in CHARTS if more or chart.name in FIRST]
        charted = shown_charts(main.config or {})  # a run without tools has no tool chart, not an empty one
        drawn_now = [chart for chart in in_sight if chart in charted]
        built = [build_figure(chart, labels, *view) for chart in drawn_now]
        notes = add_notes(built, main.config or {}, drawn_now, off=read.measures_off, series=caches[int(run_id)].series)
        noted = dict(zip((chart.name for chart in drawn_now), notes))
        figures = [_figure_update(chart, noted, in_sight) for chart in CHARTS]
        other_plot = other_figure(labels, picked, *view[:2]) if more else gr.update()
        caches[int(run_id)].drawn = drawn
    cache = caches[int(run_id)]
    if cache.watch_step != cache.last_step:  # the watch judges every step of the run: once per new step
        cache.watch, cache.watch_step = actions.watch_alerts(int(run_id), cache.series), cache.last_step
    return MonitorView(
        header,
        caches,
        banner=health_markdown(cache.series, main.config.get("max_completion_length"), main, cache.watch),
        figures=figures,
        # From 0 (a probed run's step 0), not the first sampled step: the timer sends the slider's value back as an
        # input, and a value the page still holds under a raised minimum made Gradio refuse the tick with a toast
        # ("Value 0 is less than minimum value 1"). Gradio also needs minimum < maximum.
        step=gr.update(minimum=0, maximum=max(last, 1), value=shown),
        table=completions_table(int(run_id), shown),
        log=log_text,
        other_pick=gr.update(choices=others, value=picked),
        other_list=other_text(others),
        other_plot=other_plot,
        live=live,
    )


# the chart of the "other metrics" picked (app/web/widgets/other_metrics.py), in a box like the others'
OTHER = Chart("other", "Other metrics", (), "")


def boxes_of(charts: list[Chart]) -> list[str]:
    """The boxes of ``charts``, each with its meaning under it."""
    return [chart_boxes.box(f"chart-{chart.name}", chart.title, chart.meaning) for chart in charts]


# --- layout ---------------------------------------------------------------------------------------------------------
def build(tab: gr.Tab) -> tuple[gr.Dropdown, gr.Dropdown, list[gr.Timer]]:
    """Lay out the Monitor page in ``tab`` (its opening polls); returns the run picker (refreshed by the server), the
    overlay picker and the poll timers."""
    caches = gr.State({})
    pinned = gr.State(False)  # True once the user moves the step slider away from the newest step
    with gr.Row():
        # wide enough for "12: a-run-name (completed)": on a phone each picker takes a line of its own
        run = gr.Dropdown(choices=[], value=None, label="Run", elem_id="monitor-run", scale=2, min_width=320)
        overlay = gr.Dropdown(
            choices=[],
            value=[],
            label="Overlay runs",
            elem_id="monitor-overlay",
            multiselect=True,
            scale=2,
            min_width=320,
        )
        smoothing = gr.Slider(0.0, 0.99, value=0.0, step=0.01, label="Smoothing", elem_id="monitor-smoothing")
        x_axis = gr.Radio(["step", "wall time"], value="step", label="x axis")
    header = gr.Markdown(elem_id="monitor-progress")
    banner = gr.Markdown(elem_id="monitor-health")
    chart_boxes.grid(boxes_of([chart for chart in CHARTS if chart.name in FIRST]), elem_id="monitor-first")
    with gr.Accordion(MORE_TITLE, open=False, elem_id="monitor-more") as more_box:
        chart_boxes.grid(boxes_of([chart for chart in CHARTS if chart.name not in FIRST]))
        other_list = gr.Markdown(elem_id="monitor-other-list")
        other_pick = gr.Dropdown(
            choices=[], value=[], multiselect=True, label="Other metrics to chart", elem_id="monitor-other-pick"
        )
        chart_boxes.grid(boxes_of([OTHER]))
    charts = chart_boxes.carrier("monitor")
    drawn = gr.State(None)  # what this page holds of the charts (chart_payload.Drawn), from the first poll on
    more = gr.State(False)  # whether "More charts" is open: its charts are built and sent only then
    gr.Markdown("### Completions")
    step = gr.Slider(0, 1, value=0, step=1, label="Step", elem_id="monitor-step")
    table = gr.Dataframe(
        headers=["step", "group", "mark", "prompt", "completion", "reference", "rewards", "total", "advantage"],
        interactive=False,
        wrap=True,
        # in pixels (about 1,100 in all): the short numeric columns keep their width and prompt and completion wrap;
        # a phone scrolls the table sideways inside its box, the step pinned (shares of the box squeezed
        # every column there to a letter a line)
        column_widths=["55px", "70px", "75px", "175px", "300px", "100px", "175px", "75px", "110px"],
        pinned_columns=1,  # kept in view by app/web/widgets/styles.py
        max_height=600,
        elem_id="completions-table",
    )
    detail = gr.Markdown("<small>Click a row to read its whole completion here.</small>", elem_id="completion-detail")
    following = learning.build(
        run, table
    )  # the learning map, the reward-hacking watch and the token view (app/web/pages/learning.py)
    with gr.Accordion("Log", open=False, elem_id="monitor-log-section"):
        log = gr.Textbox(label="Log", lines=12, max_lines=30, elem_id="monitor-log")
        raw = gr.Checkbox(
            label="show the raw worker output (library warnings, TRL's per-step dicts)", elem_id="monitor-raw"
        )
    timer = gr.Timer(POLL_SECONDS, active=False)

    def show(*values, held=None, now_drawn=None) -> dict:
        """A poll's MonitorView onto the widgets: the one place its fields meet them. ``values``: refresh()'s, then
        the carrier's value (``held``: the token of the charts' last payload this page applied) and what that payload
        left drawn (``now_drawn``), which a caller of refresh()'s ten values alone may leave out."""
        if len(values) > 10:
            *values, held, now_drawn = values
        view = refresh(*values)
        now_drawn = now_drawn or Drawn()
        shown = {header: view.header, banner: view.banner, step: view.step, table: view.table, log: view.log}
        shown |= {other_pick: view.other_pick, other_list: view.other_list}
        if view.live is not None:  # the Monitor's poll and the learning panel's follow their pace
            poll, follow = paces(view.live)
            shown |= {timer: gr.update(value=poll), following: gr.update(value=follow)}
        updates = zip((*CHARTS, OTHER), (*view.figures, view.other_plot))
        changes = {f"chart-{chart.name}": chart_boxes.change(update) for chart, update in updates}
        sent = payload(changes, now_drawn, chart_boxes.ack(held))
        return shown | {charts: gr.update() if sent is None else sent, drawn: now_drawn, caches: view.caches}

    inputs = [run, overlay, smoothing, x_axis, step, caches, pinned, raw, other_pick, more, charts, drawn]
    # what show() fills (Gradio matches by key)
    outputs = [header, banner, step, table, log, charts, drawn, caches, other_pick, other_list, timer, following]
    # One listener for the poll and every control, so a browser has one redraw in flight at a time: a deep link's
    # load changed the run and the overlay and a tick came at once, and three redraws of every chart, each from an
    # empty cache, kept the page busy for seconds (bench/deep_link.py). The next one starts from the state the last
    # one left (which says what the browser already has drawn). The other-metrics picker by .input, not .change:
    # each poll sets its choices, which must not trigger another poll.
    # In the browser, at once: never another run's header under this pick (the header's change: a late answer). Before
    # the poll's listener: the page runs a trigger's listeners in the order they were added, each after the last
    # one's answer, and after the poll's the header already names the new run.
    for event in (run.change, header.change):
        event(None, [run, header], header, js=HEADER_OF_PICK, show_progress="hidden")
    # the tab's opening polls at once, rather than at the timer's first tick (2 s after the tab starts it)
    triggers = [timer.tick, tab.select] + [control.change for control in (run, overlay, smoothing, x_axis, raw)]
    gr.on(triggers + [other_pick.input], show, inputs, outputs, show_progress="hidden", trigger_mode="always_last")
    # opening "More charts" draws them at once (the poll then keeps them current); closing it stops that
    for event, is_open in ((more_box.expand, True), (more_box.collapse, False)):
        event(lambda flag=is_open: flag, None, more, show_progress="hidden").then(
            show, inputs, outputs, show_progress="hidden"
        )

    def pick_step(run_id, value):
        steps = actions.sample_steps(run_id)
        return completions_table(run_id, value), bool(steps) and value != steps[-1]

    # typing a step into the slider's box counts as much as dragging it
    gr.on([step.release, step.input], pick_step, [run, step], [table, pinned], trigger_mode="always_last")
    table.select(completion_detail, None, detail)
    run.change(lambda: False, None, pinned)
    return run, overlay, [timer, following]
