"""Sweeps: a sweep's members side by side (issue 41). The picker lists every sweep with its state, how many members
have ended and the best so far; under it one row per member (its point, status, step, objective now and best,
reward, KL, time and why the sweep stopped it, the best one marked), the points as parallel coordinates coloured by
the objective, and the members' objective curves overlaid. The picked member (the best one unless another is
picked) is one click from its Monitor, from Compare (base against it) and from a fork of its best checkpoint.

Everything comes from app.actions (sweep_detail reads the table in one session). A gr.Timer ticks while the tab is
shown; it reads the sweep while the sweep is live (once every member has ended and that was drawn, a tick reads
nothing), and a poll that finds nothing new sends nothing. Opening the Monitor or Compare switches
the tab in app/web/server.py, which holds the other pages' widgets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import gradio as gr

from app import actions
from app.actions import Access
from app.markup import md
from app.web.pages.runs import minutes_seconds
from app.web.widgets.errors import acted, said, show
from app.web.widgets.sweep_charts import curves_figure, parcoords_figure
from app.web.widgets.verdict import problem, verdict

POLL_SECONDS = 4.0  # a member scores at its evaluations, seconds apart at the least
COLUMNS = ["best", "run", "point", "status", "step", "now", "best so far", "reward", "KL", "time", "stopped because"]
# In pixels, as the Runs table's (a phone scrolls the table sideways in its box, the mark and run id pinned)
WIDTHS = ["75px", "55px", "190px", "95px", "70px", "65px", "95px", "75px", "75px", "75px", "360px"]
BEST_MARK = "★ best"
SORTS = ("point order", "objective, best first", "status")
NO_SWEEPS = (
    "**No sweeps yet:** define one in **New run → Sweep** (the settings to vary, then *Launch sweep*), or from a "
    "terminal: `grpo-studio sweep tiny-grid`."
)
PICK_A_SWEEP = "**Pick a sweep** in the *Sweep* box above to see its members, their points and their curves."


# --- callbacks ------------------------------------------------------------------------------------------------------
def sweep_label(summary: actions.SweepSummary) -> str:
    """A sweep as the picker lists it: ``3: tiny-grid (active, 2/4 ended, best run 7: 0.625)``."""
    best = "" if summary.best_run_id is None else f", best run {summary.best_run_id}: {summary.best_value:.3g}"
    return f"{summary.id}: {summary.name} ({summary.state}, {summary.ended}/{summary.members} ended{best})"


def sweep_choices(summaries: Sequence[actions.SweepSummary] | None = None) -> list[tuple[str, int]]:
    """(label, id) pairs for the sweep picker, newest first."""
    if summaries is None:
        summaries = actions.sweeps()
    return [(sweep_label(s), s.id) for s in summaries]


def sort_members(rows: Sequence[actions.MemberRow], by: str, direction: str = "max") -> list[actions.MemberRow]:
    """The members in the order ``by`` (one of :data:`SORTS`) asks: as the sweep's points were made; by the objective
    now, best first in the sweep's ``direction``, those without one last; or by status (live ones first)."""
    rows = list(rows)
    if by == SORTS[1]:
        sign = -1 if direction == "max" else 1
        return sorted(rows, key=lambda r: (r.objective_now is None, sign * (r.objective_now or 0.0), r.run_id))
    if by == SORTS[2]:
        live = ("running", "starting", "queued")
        return sorted(rows, key=lambda r: (r.status not in live, r.status, r.run_id))
    return sorted(rows, key=lambda r: r.run_id)


def member_row(row: actions.MemberRow) -> list[Any]:
    """One line of the members table, in :data:`COLUMNS` order."""
    why = row.stop_reason or ""
    if row.error and row.error != row.stop_reason:  # a skipped member's error is its stop reason
        why = (why + " · " if why else "") + "error: " + row.error.strip().splitlines()[-1]
    return [
        BEST_MARK if row.best else "",
        row.run_id,
        actions.point_text(row.point),
        row.status,
        f"{row.step}/{row.total_steps}",
        _round(row.objective_now),
        _round(row.objective_best),
        _round(row.reward),
        _round(row.kl, 4),
        minutes_seconds(row.seconds),
        why,
    ]


def _round(value: float | None, digits: int = 3) -> float | str:
    return "" if value is None or not math.isfinite(value) else round(value, digits)


def member_label(row: actions.MemberRow) -> str:
    """A member as its picker and the curves' legend name it: ``7: top_p=1 beta=0.04``."""
    return f"{row.run_id}: {actions.point_text(row.point)}"


def best_step(curve: Sequence[tuple[int, float]], direction: str) -> int | None:
    """The step at which a member's objective was best (the earliest of equals); None without a value."""
    if not curve:
        return None
    sign = 1 if direction == "max" else -1
    return max(curve, key=lambda point: (sign * point[1], -point[0]))[0]


def nearest_checkpoint(steps: Sequence[int], step: int | None) -> int | None:
    """The saved checkpoint closest to ``step`` (the earlier of two as close: it holds what scored, not what
    followed); the latest without a step; None without checkpoints."""
    if not steps:
        return None
    if step is None:
        return max(steps)
    return min(steps, key=lambda s: (abs(s - step), s))


def fork_settings(step: int | None, total_steps: int) -> str:
    """What the fork's settings box starts with: nothing, unless the checkpoint is the member's last step (a fork
    there with its own max_steps would have nothing to train), then as many steps again."""
    return f"max_steps={step + total_steps}" if step is not None and step >= total_steps else ""


@dataclass
class SweepView:
    """What one poll shows; :func:`build` maps it onto the widgets in one place (``gr.update()``: left as it is)."""

    header: str
    rows: Any = field(default_factory=list)
    parcoords: Any = None
    curves: Any = None
    members: Any = field(default_factory=gr.update)  # the member picker's choices and value
    sweeps: Any = field(default_factory=gr.update)  # the sweep picker's choices (their labels say how far each is)
    live: bool = False  # whether the sweep still has members to end
    # what the browser now has (see refresh): (sweep id, sort, rows, curve lengths, live)
    drawn: tuple | None = None


def header_text(table: actions.SweepTable) -> str:
    """The sweep's state in a line: what it searches, how far it is, its best member (and, for TPE, whether its
    asked points lean on results yet)."""
    s = table.summary
    settings = ", ".join(table.definition.get("settings") or {})
    best = "no member has scored yet"
    if s.best_run_id is not None:
        best = f"best so far: run {s.best_run_id}, {md(s.objective)} {s.best_value:.3g} (marked {BEST_MARK})"
    state = verdict("wait", "Live:") if s.state == "active" else verdict("ok", "Finished:")
    leaning = f" {table.leaning}" if table.leaning else ""
    return (
        f"{state} **{md(s.name)}** (sweep {s.id}) — {s.method} over {md(settings)}, {s.direction} {md(s.objective)} — "
        f"{s.ended} of {s.members} members ended; {best}.{leaning}"
    )


def refresh(sweep_id, sort: str | None, picked, drawn: tuple | None) -> SweepView:
    """One poll of the sweep picked: its table, charts and member picker, rebuilt only when something changed since
    ``drawn`` (what this browser was sent last). ``picked`` is the member the user chose (in the picker or by a row),
    None if they chose none: the member picker keeps the user's choice while it is a member, else it follows the best
    member as the best changes (the first member while none has scored)."""
    if sweep_id in (None, ""):
        # a sweep created elsewhere (the CLI, the API) is offered at the next tick
        found = actions.sweeps()
        return SweepView(NO_SWEEPS if not found else PICK_A_SWEEP, sweeps=gr.update(choices=sweep_choices(found)))
    keep = gr.update()
    if drawn is not None and drawn[:2] == (int(sweep_id), sort) and not drawn[-1]:
        # drawn after every member had ended: nothing can change (the timer ticks on while the tab is shown, and
        # this tick reads nothing)
        return SweepView(keep, keep, keep, keep, keep, keep, False, drawn)
    try:
        table = actions.sweep_detail(int(sweep_id))
    except actions.ActionError as exc:
        return SweepView(problem(exc.message), drawn=None)
    s = table.summary
    live = s.state == "active"
    rows, lengths = tuple(map(member_row, table.rows)), tuple(map(len, table.curves.values()))
    now = (int(sweep_id), sort, rows, lengths, live)
    if now == drawn:  # nothing new: the browser keeps its table and charts (and a zoom or an axis brushed)
        return SweepView(keep, keep, keep, keep, keep, keep, live, drawn)
    ids = [row.run_id for row in table.rows]
    keep_pick = picked if picked in ids else s.best_run_id if s.best_run_id is not None else (ids[0] if ids else None)
    labels = {row.run_id: member_label(row) for row in table.rows}
    return SweepView(
        header_text(table),
        [member_row(r) for r in sort_members(table.rows, sort or SORTS[0], s.direction)],
        parcoords_figure(table.rows, table.definition, s.objective, s.direction),
        curves_figure(table.curves, labels, s.best_run_id, s.objective),
        gr.update(choices=[(labels[i], i) for i in ids], value=keep_pick),
        gr.update(choices=sweep_choices()),
        live,
        now,
    )


def stop_picked(sweep_id) -> str:
    """Stop the sweep picked (app.actions.stop_sweep): no member asked or pruned, its live members stopped."""
    if sweep_id in (None, ""):
        return problem("pick a sweep first")
    try:
        changed = acted(actions.stop_sweep, int(sweep_id))
    except gr.Error as exc:
        return problem(said(exc))
    runs = ", ".join(map(str, changed.members)) or "none was live"
    return verdict(
        "ok", "Stopped:", f"sweep {changed.sweep_id} asks and prunes no member now; members stopped: run {runs}."
    )


def resume_picked(sweep_id) -> str:
    """Resume the sweep picked (app.actions.resume_sweep): active again, the members its stop ended queued."""
    if sweep_id in (None, ""):
        return problem("pick a sweep first")
    try:
        changed = acted(actions.resume_sweep, int(sweep_id))
    except gr.Error as exc:
        return problem(said(exc))
    runs = ", ".join(map(str, changed.members)) or "none"
    return verdict("go", "Resumed:", f"sweep {changed.sweep_id} is active again; members queued to continue: {runs}.")


def delete_picked(sweep_id, confirmed: bool) -> str:
    """Delete the sweep picked with every member, after the confirmation naming it (as the Runs page's delete)."""
    if sweep_id in (None, ""):
        return problem("pick a sweep first")
    if not confirmed:
        return problem(
            f"tick '{delete_label(sweep_id)}' to confirm: every member's metrics, samples and files are removed"
        )
    try:
        changed = acted(actions.delete_sweep, int(sweep_id))
    except gr.Error as exc:
        return problem(said(exc))
    return verdict("ok", "Deleted:", f"sweep {changed.sweep_id} and its {len(changed.members)} members.")


def delete_label(sweep_id) -> str:
    """The delete confirmation's label: it names the sweep it would delete."""
    if sweep_id in (None, ""):
        return "yes, delete the sweep (pick one first)"
    return f"yes, delete sweep {int(sweep_id)} and every member"


def fork_from_best(access: Access, sweep_id, run_id, settings: str | None) -> str:
    """Queue a fork of member ``run_id`` from its checkpoint nearest the step where its objective was best, with
    its own settings and ``settings`` changed (one key=value a line), through app.actions.fork as the Runs page's
    Fork is."""
    if sweep_id in (None, "") or run_id in (None, ""):
        return problem("pick a sweep and one of its members first")
    try:
        table = actions.sweep_detail(int(sweep_id))
    except actions.ActionError as exc:
        return problem(exc.message)
    direction, objective = table.summary.direction, table.summary.objective
    top = best_step(table.curves.get(int(run_id), []), direction)
    step = nearest_checkpoint(actions.checkpoints(int(run_id)), top)
    if step is None:
        return problem(f"run {int(run_id)} has saved no checkpoint yet: a fork starts from one")
    try:
        new_id = acted(actions.fork, int(run_id), step, settings or "", access)
    except gr.Error as exc:
        return problem(said(exc))
    where = f"its best {md(objective)} was at step {top}" if top is not None else f"no {md(objective)} yet"
    return verdict(
        "go",
        "Queued:",
        f"run {new_id}, a fork of run {int(run_id)} from its checkpoint at step {step} ({where}). Open it in the "
        "Monitor from the Runs tab; its steps continue from there.",
    )


def fork_hint(sweep_id, run_id) -> str:
    """The fork's settings box for the member picked (see :func:`fork_settings`)."""
    if sweep_id in (None, "") or run_id in (None, ""):
        return ""
    try:
        table = actions.sweep_detail(int(sweep_id))
    except actions.ActionError:
        return ""
    row = next((r for r in table.rows if r.run_id == int(run_id)), None)
    if row is None:
        return ""
    top = best_step(table.curves.get(row.run_id, []), table.summary.direction)
    return fork_settings(nearest_checkpoint(actions.checkpoints(row.run_id), top), row.total_steps)


# --- layout ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepsPage:
    """The widgets app/web/server.py wires to the other tabs: the sweep picker (filled from the address and after a
    sweep is launched), the member picker and the buttons that open it in the Monitor and in Compare, the timer."""

    picker: gr.Dropdown
    member: gr.Dropdown
    open_monitor: gr.Button
    open_compare: gr.Button
    message: gr.Markdown
    timer: gr.Timer


def build(access: Access) -> SweepsPage:
    """Lay out the Sweeps page inside the current gr.Blocks."""
    with gr.Row():
        picker = gr.Dropdown(
            choices=sweep_choices(), value=None, label="Sweep", elem_id="sweeps-picker", scale=3, min_width=320
        )
        sort = gr.Radio(list(SORTS), value=SORTS[0], label="Sort members by", elem_id="sweeps-sort", scale=2)
    header = gr.Markdown(NO_SWEEPS, elem_id="sweeps-header")
    table = gr.Dataframe(
        headers=COLUMNS,
        interactive=False,
        wrap=True,
        column_widths=WIDTHS,
        pinned_columns=2,  # kept in view by app/web/widgets/styles.py
        elem_id="sweeps-table",
    )
    with gr.Row():
        member = gr.Dropdown(
            choices=[],
            value=None,
            label="Member (the best one unless you pick another)",
            elem_id="sweeps-member",
            scale=2,
            min_width=260,
        )
        open_monitor = gr.Button("Open in Monitor", variant="primary", elem_id="sweeps-monitor", scale=1)
        open_compare = gr.Button("Compare with the base", elem_id="sweeps-compare", scale=1)
    with gr.Row():
        fork_set = gr.Textbox(
            label="Fork from its best checkpoint, with these settings changed (one key=value a line)",
            placeholder="max_steps=300",
            lines=1,
            elem_id="sweeps-fork-set",
            scale=3,
        )
        fork_button = gr.Button("Fork from best checkpoint", elem_id="sweeps-fork", scale=1)
    with gr.Row():
        stop_button = gr.Button("Stop sweep", variant="stop", elem_id="sweeps-stop", scale=1)
        resume_button = gr.Button("Resume sweep", elem_id="sweeps-resume", scale=1)
        confirm = gr.Checkbox(label=delete_label(None), value=False, elem_id="sweeps-confirm", scale=2)
        delete_button = gr.Button("Delete sweep", elem_id="sweeps-delete", scale=1)
    message = gr.Markdown(elem_id="sweeps-message")
    with gr.Row():
        with gr.Column(min_width=320):
            parcoords = gr.Plot(elem_id="sweeps-parcoords", show_label=False)
            gr.Markdown(
                "<small>One line a member through its point, one axis a swept setting, the objective last; the "
                "brighter the line, the better the member. Drag along an axis to pick out the lines that pass "
                "there.</small>"
            )
        with gr.Column(min_width=320):
            curves = gr.Plot(elem_id="sweeps-curves", show_label=False)
            gr.Markdown("<small>Each member's objective at each step it was scored; the best one in red.</small>")
    drawn = gr.State(None)
    chosen = gr.State(None)  # the member the user picked; None: the picker follows the best member
    timer = gr.Timer(POLL_SECONDS, active=False)

    def shown(sweep_id, sort_by, picked, sent):
        view = refresh(sweep_id, sort_by, picked, sent)
        return {
            header: view.header,
            table: view.rows,
            parcoords: view.parcoords,
            curves: view.curves,
            member: view.members,
            picker: view.sweeps,
            drawn: view.drawn,
        }

    outputs = [header, table, parcoords, curves, member, picker, drawn]
    inputs = [picker, sort, chosen, drawn]
    gr.on(
        [timer.tick, picker.change, sort.change],
        shown,
        inputs,
        outputs,
        show_progress="hidden",
        trigger_mode="always_last",
    )
    member.input(lambda value: value, member, chosen, show_progress="hidden")  # the user's pick, not a poll's
    picker.input(lambda: None, None, chosen, show_progress="hidden")  # another sweep: follow its best again
    member.change(fork_hint, [picker, member], fork_set, show_progress="hidden")
    fork_button.click(partial(fork_from_best, access), [picker, member, fork_set], message).then(
        None, js=show("sweeps-message")
    )

    for button, verb in ((stop_button, stop_picked), (resume_button, resume_picked)):
        button.click(verb, picker, message).then(None, js=show("sweeps-message")).then(
            shown, inputs, outputs, show_progress="hidden"
        )
    # the confirmation names the sweep and is cleared after every delete and when another sweep is picked
    delete_button.click(
        lambda sweep_id, ticked: (delete_picked(sweep_id, ticked), gr.update(value=False)),
        [picker, confirm],
        [message, confirm],
    ).then(None, js=show("sweeps-message"))
    picker.change(lambda s: gr.update(value=False, label=delete_label(s)), picker, confirm, show_progress="hidden")

    def pick_row(evt: gr.SelectData):
        row = evt.row_value or []
        picked = int(row[1]) if len(row) > 1 and str(row[1]).isdigit() else None
        return (picked, picked) if picked is not None else (gr.update(), gr.update())

    table.select(pick_row, None, [member, chosen])
    return SweepsPage(picker, member, open_monitor, open_compare, message, timer)
