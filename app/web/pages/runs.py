"""Runs: the table of all runs and the actions on one (stop, resume, clone into the form, delete, download)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import gradio as gr

from app import actions
from app.actions import Access
from app.actions.liveness import liveness_problem
from app.markup import md
from app.web.widgets.errors import acted, said, show, user_error
from app.web.widgets.verdict import problem

COLUMNS = [
    "id",
    "name",
    "status",
    "step",
    "last reward",
    "KL",
    "held-out correct",
    "duration",
    "model",
    "data set",
    "where",
]
# In pixels, not shares of the box: shares squeezed every column on a phone until "status" wrapped one letter per line
# (and "completed" broke mid-word at 1440 px). About 1,150 px in all: the whole table fits a laptop's page, and a
# phone scrolls it sideways inside its box, the id and name pinned.
# "100/100" steps and "builtin:arithmetic" each on one line at 1440 px.
WIDTHS = ["50px", "150px", "110px", "85px", "80px", "70px", "120px", "95px", "150px", "175px", "130px"]


# --- callbacks ------------------------------------------------------------------------------------------------------
def run_rows(search: str | None = None) -> list[list]:
    """One table row per run (newest first), or per run whose name contains ``search`` or whose id it is."""
    return table_rows(actions.runs(search))


def table_rows(summaries: list[actions.RunSummary]) -> list[list]:
    """The Runs table's rows, from the one-statement run list (storage/summaries.py); one squeue call for the queue
    positions when a run waits in Slurm's queue."""
    places = actions.places(summaries)
    return [_row(summary, places[summary.id]) for summary in summaries]


def _row(run: actions.RunSummary, place: str) -> list:
    heldout = ""
    if run.evaluation:
        # one decimal, as the Compare page shows it: 53.5 % and 54.4 % must not both read "54%"
        heldout = f"{run.evaluation['base']['correct']:.1%} → {run.evaluation['tuned']['correct']:.1%}"
    elif run.last_heldout is not None:  # the held-out curve the run scored while training (eval_steps)
        heldout = f"{run.last_heldout:.1%} (while training)"
    return [
        run.id,
        run.name,
        status_text(run),
        f"{run.current_step}/{run.total_steps}",
        "" if run.last_reward is None else round(run.last_reward, 3),
        "" if run.last_kl is None else round(run.last_kl, 4),
        heldout,
        _duration(run),
        run.model or "",
        run.dataset or "",
        place,
    ]


def status_text(run: actions.RunSummary) -> str:
    """The status, with what is wrong when a running run's worker froze or its step hangs (app/actions/liveness.py)."""
    problem = liveness_problem(run)
    return f"{run.status} · {problem[1]}" if problem else str(run.status)


def _duration(run: actions.RunSummary) -> str:
    if run.started_at is None:
        return ""
    start = run.started_at if run.started_at.tzinfo else run.started_at.replace(tzinfo=UTC)
    end = run.finished_at or datetime.now(UTC)
    end = end if end.tzinfo else end.replace(tzinfo=UTC)
    return minutes_seconds((end - start).total_seconds())


def minutes_seconds(seconds: float | None) -> str:
    """``4m05s``, the time column of the run and sweep tables; empty before the run started."""
    if seconds is None:
        return ""
    whole = int(seconds)
    return f"{whole // 60}m{whole % 60:02d}s"


def run_choices(summaries: list[actions.RunSummary] | None = None) -> list[tuple[str, int]]:
    """(label, id) pairs for run pickers, newest first (the pickers filter as the user types)."""
    if summaries is None:
        summaries = actions.runs()
    return [(f"{r.id}: {r.name} ({r.status})", r.id) for r in summaries]


def stop_run(run_id) -> str:
    """Ask a live run to stop at its next step (a waiting run is simply marked stopped)."""
    sent = acted(actions.stop, run_id)
    return f"Run {run_id}: " + (
        "stop requested; it ends at the next step boundary." if sent else "stopped before it started."
    )


def resume_run(run_id) -> str:
    """Queue a stopped or failed run again; the worker continues from its latest checkpoint (a worker still saving
    after a stop is waited for)."""
    acted(actions.resume, run_id)
    return f"Run {run_id} queued to resume from its latest checkpoint."


def clone_config(run_id) -> actions.RunConfig:
    """The config of a run, renamed as a copy, for the New run form."""
    return acted(actions.clone, run_id)


def fork_steps(run_id):
    """The Fork control's step choices: the picked run's saved checkpoints, the latest selected."""
    steps = actions.checkpoints(int(run_id)) if run_id not in (None, "") else []
    return gr.update(choices=steps, value=steps[-1] if steps else None)


def fork(access: Access, run_id, step, settings: str) -> str:
    """Queue a fork of the run from its checkpoint at ``step``, with the changed settings (one key=value a line),
    under the operator's ``access`` rules, as the New run form is (app.actions.fork)."""
    new_id = acted(actions.fork, run_id, step, settings or "", access)
    return (
        f"Run {new_id} queued: a fork of run {run_id} from step {step}. Its steps continue from {int(step) + 1}, "
        "and the Monitor draws it over its parent."
    )


def delete_run(run_id, confirmed: bool) -> str:
    """Delete a finished run with its rows and files, after confirmation."""
    if not confirmed:
        raise user_error(f"tick 'yes, delete run {run_id}' to confirm: its metrics, samples and files are removed")
    name = acted(actions.delete, run_id)
    return f"Run {md(run_id)} ({md(name)}) deleted."


def adapter_zip(run_id) -> str:
    """A zip of the run's saved LoRA adapter, for download."""
    if run_id in (None, ""):
        raise user_error("pick a run first")
    target = actions.new_export_dir() / f"run-{int(run_id)}-adapter"
    (line,) = acted(lambda: actions.export(int(run_id), "final", zip_to=target))
    return line.removeprefix("adapter zipped to ")


def confirm_label(run_id) -> str:
    """The delete confirmation's label: it names the run it would delete."""
    if run_id in (None, ""):
        return "yes, delete it (pick a run first)"
    summaries = [s for s in actions.runs(str(int(run_id))) if s.id == int(run_id)]
    if not summaries:
        return f"yes, delete run {int(run_id)}"
    return f"yes, delete run {int(run_id)} ({summaries[0].name}) and its files"


def reported(action):
    """``action`` for a button: its message, or its refusal as a one-line message in the same place (not an error
    toast plus an "Error" pill over the last message, which is what a raised gr.Error shows)."""

    def run(*args) -> str:
        try:
            return action(*args)
        except gr.Error as exc:
            return problem(said(exc))

    return run


def download_adapter(run_id) -> tuple[dict, str]:
    """The adapter zip for the download box and a message; a refusal leaves the box empty and says why."""
    try:
        path = adapter_zip(run_id)
    except gr.Error as exc:
        return gr.update(value=None, visible=False), problem(said(exc))
    return gr.update(value=path, visible=True), f"Adapter of run {int(run_id)} zipped: {Path(path).name}"


def clone_into_form(run_id, config_values, fields: int) -> list:
    """The cloned config's values for the ``fields`` form widgets, then the form's status line, this page's message
    and the switch to the New run tab (a refusal changes nothing but the message)."""
    try:
        config = clone_config(run_id)
    except gr.Error as exc:
        return [gr.update()] * (fields + 1) + [problem(said(exc)), gr.update()]
    told = f"Cloned run {int(run_id)} into the New run form as **{md(config.name)}**: edit it and press Launch."
    return [*config_values(config), told, told, gr.Tabs(selected="new")]


# --- layout ---------------------------------------------------------------------------------------------------------
def build(form, config_values, tabs: gr.Tabs, access: Access) -> tuple[gr.Dataframe, gr.Textbox, gr.Number]:
    """Lay out the Runs page; returns its table and search box so the server's timer can refresh the table, and the
    run id box (filled from the URL). ``form`` is the New run page's :class:`~app.web.pages.new_run.Form`, which Clone
    fills before switching ``tabs`` to it."""
    search = gr.Textbox(label="Search runs", placeholder="a name, or a run id", elem_id="runs-search")
    table = gr.Dataframe(
        headers=COLUMNS,
        value=run_rows,
        interactive=False,
        elem_id="runs-table",
        wrap=True,
        column_widths=WIDTHS,
        pinned_columns=1,  # kept in view by app/web/widgets/styles.py
    )
    with gr.Row():
        run_id = gr.Number(label="Run id (or click a row)", precision=0, elem_id="runs-run-id", scale=1)
        stop = gr.Button("Stop", elem_id="runs-stop")
        resume = gr.Button("Resume", elem_id="runs-resume")
        clone = gr.Button("Clone into the form", elem_id="runs-clone")
        download = gr.Button("Download adapter", elem_id="runs-download")
    # each answer right under the controls that asked for it, inside the viewport where the button was pressed
    message = gr.Markdown(elem_id="runs-message")
    archive = gr.File(label="Adapter", interactive=False, visible=False, elem_id="runs-archive")
    with gr.Row():
        confirm = gr.Checkbox(label=confirm_label(None), elem_id="runs-confirm")
        delete = gr.Button("Delete run and files", variant="stop", elem_id="runs-delete")
    delete_message = gr.Markdown(elem_id="runs-delete-message")
    gr.Markdown(
        "**Fork** starts a new run from a saved checkpoint of the picked run with some settings changed (reward "
        "weights, beta, learning rate, temperature, max_steps...); settings that change the adapter's shape are "
        "refused. Its steps continue the parent's, and the Monitor draws both."
    )
    with gr.Row():
        fork_step = gr.Dropdown(label="Fork at step", choices=[], elem_id="runs-fork-step", scale=1)
        fork_settings = gr.Textbox(
            label="Changed settings", placeholder="beta=0.01\nmax_steps=300", lines=2, elem_id="runs-fork-set", scale=2
        )
        fork_button = gr.Button("Fork", elem_id="runs-fork", scale=1)
    fork_message = gr.Markdown(elem_id="runs-fork-message")

    def select(evt: gr.SelectData):
        return evt.row_value[0] if evt.row_value else None

    table.select(select, None, run_id)
    search.change(run_rows, search, table, show_progress="hidden")
    stop.click(reported(stop_run), run_id, message).then(None, js=show("runs-message")).then(run_rows, search, table)
    resume.click(reported(resume_run), run_id, message).then(None, js=show("runs-message")).then(
        run_rows, search, table
    )
    # the confirmation names the run and is cleared after every delete (and when another run is picked), so the
    # next click can't delete another run at once
    delete.click(
        lambda r, c: (reported(delete_run)(r, c), gr.update(value=False, label=confirm_label(None))),
        [run_id, confirm],
        [delete_message, confirm],
    ).then(None, js=show("runs-delete-message")).then(run_rows, search, table)
    run_id.change(fork_steps, run_id, fork_step)
    run_id.change(lambda r: gr.update(value=False, label=confirm_label(r)), run_id, confirm, show_progress="hidden")
    fork_button.click(reported(partial(fork, access)), [run_id, fork_step, fork_settings], fork_message).then(
        None, js=show("runs-fork-message")
    ).then(run_rows, search, table)
    download.click(download_adapter, run_id, [archive, message]).then(None, js=show("runs-message"))
    clone.click(
        lambda r: clone_into_form(r, config_values, len(form.fields)),
        run_id,
        [*form.fields, form.status, message, tabs],
        show_progress_on=message,  # not on each of the form's fields (app.web.server untracked_when_hidden)
    )
    return table, search, run_id
