"""The dashboard server: the Gradio app, and ``grpo-studio serve``, which runs it beside the supervisor's scheduler.

The server process stays light: it imports Gradio, Plotly and SQLAlchemy, never torch (a later panel that needs a
model imports it on first use). Training happens in worker processes the scheduler starts; the UI reads what they
write to the database. Runs keep training when the browser or this process closes; on start the scheduler
reconciles statuses (runs whose worker died become failed) and simply goes on watching live workers.
"""

from __future__ import annotations

import html
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

import gradio as gr
from sqlalchemy.exc import SQLAlchemyError
from starlette.middleware import Middleware

from app import actions
from app.actions import Access, RunSummary
from app.serve_checks import parse_auth
from app.web import api
from app.web.guard import BodyLimit, LoginGuard
from app.web.page_script import PageScript, PlotlyBundle
from app.web.pages import compare, monitor, new_run, runs, sweeps
from app.web.pages.data_files import MAX_UPLOAD_BYTES, prune_uploads
from app.web.widgets import styles
from app.web.widgets.empty_states import runs_table_note
from app.web.widgets.verdict import problem, verdict
from trainer.supervise.schedule import share_slots
from trainer.sweeps.tending import Scheduler  # the supervisor's, tending the sweeps after each pass

log = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


TABS = ("new", "runs", "monitor", "compare", "sweeps")
TAB_LABELS = ("New run", "Runs", "Monitor", "Compare", "Sweeps")
# Keeps the address bar in step with the page (?tab=monitor&run=3) without a reload, so that a reload, a bookmark or
# a shared link lands on the same view (see landing()).
SET_PARAM = """(value) => {{
    if (!window.grpoStudioLanded) return [];  // the start-up selection of the first tab is not the user's choice
    const shown = {value};
    const url = new URL(window.location);
    if (shown === null || shown === undefined || shown === "") url.searchParams.delete("{key}");
    else url.searchParams.set("{key}", shown);
    window.history.replaceState(null, "", url);
    return [];
}}"""
# The tab's half of SET_PARAM: ?tab= names the tab shown when it runs. Gradio may run a tab's select handler late (a
# deep link's Monitor, opened by OPEN_TAB, had its handler run after the user's click on New run, and the address said
# Monitor while New run was shown, so a reload went back to the Monitor): an earlier tab's late handler writes nothing.
SET_TAB = """() => {{
    const selected = document.querySelector("button[role=tab][aria-selected=true]");
    if (!selected || selected.innerText.trim() !== "{label}") return [];
    return ({set_param})();
}}"""
# The overlay picker's value without the run the Monitor now shows (drawn over itself it adds nothing)
OVERLAY_WITHOUT_SHOWN = "(shown, overlaid) => [(overlaid || []).filter((run) => run !== shown)]"  # one output: one list
# Opens the tab the address names (?tab=monitor) by clicking its button, as a person would, once the page has loaded;
# until then SET_PARAM leaves the address alone (the first tab's start-up selection would overwrite ?tab=).
OPEN_TAB = """() => {{
    const labels = {labels};
    window.grpoStudioLanded = true;
    const wanted = labels[new URL(window.location).searchParams.get("tab")];
    const button = [...document.querySelectorAll("button[role=tab]")].find(b => b.innerText.trim() === wanted);
    if (wanted && button) button.click();
    return [];
}}"""


def _show_in_address(label: str, tab: str, key: str, drop: str = "") -> str:
    """The js that writes ``?tab=TAB&KEY=<shown>`` (without ``drop``) into the address once the tab labelled
    ``label`` is shown, as a click on the tab and the picker would have; a refused step, which leaves another tab
    shown, leaves the address as it is. (The id comes from a picker: a gr.State's value never reaches the browser.)"""
    dropped = f'\n    url.searchParams.delete("{drop}");' if drop else ""
    return f"""(shown) => {{
    const tab = document.querySelector("button[role=tab][aria-selected=true]");
    if (!tab || tab.innerText.trim() !== "{label}" || shown === null || shown === undefined) return [];
    const url = new URL(window.location);
    url.searchParams.set("tab", "{tab}");{dropped}
    url.searchParams.set("{key}", shown);
    window.history.replaceState(null, "", url);
    return [];
}}"""


# After a launch (follow_launch) the Monitor and the run launched; after "Compare with the base" on the Sweeps tab,
# Compare and its run; after a sweep is launched from the form, the Sweeps tab and the sweep.
SHOW_LAUNCHED = _show_in_address("Monitor", "monitor", "run")
SHOW_COMPARED = _show_in_address("Compare", "compare", "run")
SHOW_SWEEP = _show_in_address("Sweeps", "sweeps", "sweep", drop="run")
CSS = """
.field-invalid input, .field-invalid textarea { border-color: var(--error-border-color, #dc2626) !important; }
.field-invalid [data-testid="block-info"] { color: var(--error-text-color, #dc2626); }
"""


@dataclass(frozen=True)
class Landing:
    """Where a page load lands: the tab, the Monitor's run, the Compare page's run, and what the address asked for
    that is not here (said at the top of the page; empty when all was found)."""

    tab: str
    shown: int | None
    compared: int | None
    notice: str = ""
    sweep: int | None = None  # the Sweeps tab's sweep (?sweep=N), else the newest


def landing(query: Mapping[str, str], summaries: list[RunSummary], sweep_ids: list[int] | None = None) -> Landing:
    """Where a page load lands, from the address's ``tab``, ``run`` and ``sweep`` (``sweep_ids``: the sweeps, newest
    first; the Sweeps tab shows the named one, else the newest). The Monitor shows the named run, else the
    newest; Compare the named run if it can be sampled, else the newest that can (compare.ready_run).

    A tab or a run the address names that is not here is said, and no other run stands in for a missing one (it
    would look like the run asked for, and its picker would rewrite the user's link): the pickers stay empty."""
    asked_tab, asked_run = query.get("tab", ""), query.get("run", "")
    notes = []
    tab = asked_tab if asked_tab in TABS else "new"
    if asked_tab and tab != asked_tab:
        notes.append(f"there is no tab {_asked(asked_tab)} (the tabs are {', '.join(TABS)}): showing New run")
    ids = [r.id for r in summaries]
    try:
        wanted = int(asked_run) if asked_run else None
    except ValueError:
        wanted = None
        notes.append(f"{_asked(asked_run)} is not a run id (a whole number, as the Runs tab shows it)")
    if wanted is not None and wanted not in ids:
        notes.append(f"there is no run {wanted} (deleted, or kept in another database): pick one in the Run box")
    missing = bool(asked_run) and wanted not in ids
    shown = None if missing else (wanted if wanted is not None else (ids[0] if ids else None))
    sampleable = {run_id for _, run_id in compare.finished_runs(summaries)}
    compared = None if missing else (wanted if wanted in sampleable else compare.ready_run(summaries))
    sweep = _landed_sweep(query.get("sweep", ""), sweep_ids or [], notes)
    notice = verdict("warn", "Not found:", "; ".join(notes) + ".") if notes else ""
    return Landing(tab, shown, compared, notice, sweep)


def _landed_sweep(asked: str, sweep_ids: list[int], notes: list[str]) -> int | None:
    """The sweep the address names (a note when it is not here: then none), else the newest."""
    if not asked:
        return sweep_ids[0] if sweep_ids else None
    try:
        wanted = int(asked)
    except ValueError:
        notes.append(f"{_asked(asked)} is not a sweep id (a whole number, as the Sweeps tab lists it)")
        return None
    if wanted not in sweep_ids:
        notes.append(f"there is no sweep {wanted}: pick one in the Sweep box")
        return None
    return wanted


def _asked(value: str) -> str:
    """A value from the address, quoted for the page: as text, never as markup."""
    return "`" + html.escape(value[:60]).replace("`", "'") + "`"


def build_app(access: Access | None = None) -> gr.Blocks:
    """The whole dashboard as a gr.Blocks (not launched), under the operator's ``access`` rules."""
    access = access or Access()
    # Gradio keeps each upload in its cache; the New run page copies a data set under the data dir at once, so a
    # cached upload older than an hour is no longer needed by anyone (checked every hour).
    # No telemetry: Gradio otherwise reports each page built and launched to api.gradio.app and asks it for the
    # latest version; a dashboard on a user's own machine, often offline, tells no one (SECURITY.md).
    with gr.Blocks(title="grpo-studio", delete_cache=(3600, 3600), analytics_enabled=False) as demo:
        api.register(access)  # first, so the named endpoints keep their names (app/web/api.py)
        gr.Markdown("# grpo-studio\nLaunch and watch GRPO fine-tuning runs.")
        landing_notice = gr.Markdown(elem_id="landing-notice")  # what the address asked for that is not here
        with gr.Tabs() as tabs:
            with gr.Tab(TAB_LABELS[0], id="new") as new_tab:
                form = new_run.build(access)
            with gr.Tab(TAB_LABELS[1], id="runs") as runs_tab:
                runs_note = gr.Markdown(elem_id="runs-empty")  # what to do while the table is empty
                table, search, runs_id = runs.build(form, new_run.config_values, tabs, access)
                # every way the table changes (the tick, the search box, an action's refresh) passes by here
                table.change(runs_table_note, [table, search], runs_note, show_progress="hidden")
                demo.load(runs_table_note, [table, search], runs_note, show_progress="hidden")
            with gr.Tab(TAB_LABELS[2], id="monitor") as monitor_tab:
                run_picker, overlay, monitor_timers = monitor.build(monitor_tab)
            with gr.Tab(TAB_LABELS[3], id="compare") as compare_tab:
                compare_picker, compare_timer = compare.build()
            with gr.Tab(TAB_LABELS[4], id="sweeps") as sweeps_tab:
                sweeps_page = sweeps.build(access)
        every_tab = (new_tab, runs_tab, monitor_tab, compare_tab, sweeps_tab)
        for tab_id, tab_label, tab in zip(TABS, TAB_LABELS, every_tab):
            tab_param = SET_PARAM.format(key="tab", value=f'"{tab_id}"')
            tab.select(None, None, None, js=SET_TAB.format(label=tab_label, set_param=tab_param))
        # A page's polls run only while its tab is shown: each tick of a hidden Monitor still sent its table, log,
        # banner and slider, and with the learning map's and the evaluation's ticks the browser's main thread was
        # busy enough that a click on another tab waited tens of seconds on a loaded machine.
        polls = {"monitor": monitor_timers, "compare": [compare_timer], "sweeps": [sweeps_page.timer]}
        every_poll = [timer for timers in polls.values() for timer in timers]
        for tab_id, tab in zip(TABS, every_tab):
            tab.select(_switch(every_poll, polls.get(tab_id, [])), None, every_poll, show_progress="hidden")
        for picker in (run_picker, compare_picker, runs_id):
            picker.change(None, picker, None, js=SET_PARAM.format(key="run", value="value"))
        sweeps_page.picker.change(None, sweeps_page.picker, None, js=SET_PARAM.format(key="sweep", value="value"))

        def follow_launch(run_id: int | None) -> list:
            """A launch leads to the Monitor of the run launched, in this browser tab, its polls going."""
            if run_id is None:  # the launch was refused: the form says why
                return [gr.update(), gr.update(), *[gr.update() for _ in every_poll]]
            choices = runs.run_choices(actions.runs())
            return [
                gr.update(choices=choices, value=run_id),
                gr.Tabs(selected="monitor"),
                *_switch(every_poll, polls["monitor"])(),
            ]

        form.launched.change(
            follow_launch, form.launched, [run_picker, tabs, *every_poll], show_progress="hidden"
        ).then(None, run_picker, None, js=SHOW_LAUNCHED)
        # the Sweeps tab's member, opened in the Monitor as a launch opens its run
        sweeps_page.open_monitor.click(
            follow_launch, sweeps_page.member, [run_picker, tabs, *every_poll], show_progress="hidden"
        ).then(None, run_picker, None, js=SHOW_LAUNCHED)

        def follow_compare(run_id: int | None) -> list:
            """The Sweeps tab's member in Compare (base against it), when it has saved an adapter to sample."""
            keep = [gr.update(), gr.update(), *[gr.update() for _ in every_poll]]
            if run_id is None:
                return [*keep, problem("pick a member first")]
            choices = compare.finished_runs(actions.runs())
            if all(value != run_id for _, value in choices):
                said = f"run {int(run_id)} has no adapter to sample yet: Compare offers a run once it has saved one"
                return [*keep, problem(said)]
            return [
                gr.update(choices=choices, value=run_id),
                gr.Tabs(selected="compare"),
                *_switch(every_poll, polls["compare"])(),
                "",
            ]

        sweeps_page.open_compare.click(
            follow_compare,
            sweeps_page.member,
            [compare_picker, tabs, *every_poll, sweeps_page.message],
            show_progress="hidden",
        ).then(None, compare_picker, None, js=SHOW_COMPARED)

        def follow_sweep(sweep_id: int | None) -> list:
            """A sweep launched from the form leads to its Sweeps view, in this browser tab, its poll going."""
            if sweep_id is None:  # refused: the form says why
                return [gr.update(), gr.update(), *[gr.update() for _ in every_poll]]
            return [
                gr.update(choices=sweeps.sweep_choices(), value=sweep_id),
                gr.Tabs(selected="sweeps"),
                *_switch(every_poll, polls["sweeps"])(),
            ]

        form.swept.change(
            follow_sweep, form.swept, [sweeps_page.picker, tabs, *every_poll], show_progress="hidden"
        ).then(None, sweeps_page.picker, None, js=SHOW_SWEEP)

        def land(request: gr.Request):
            summaries = actions.runs()
            sweep_list = actions.sweeps()
            landed = landing(dict(request.query_params), summaries, [s.id for s in sweep_list])
            choices = runs.run_choices(summaries)
            return (
                gr.update(choices=choices, value=landed.shown),
                gr.update(choices=overlay_choices(choices, landed.shown)),
                gr.update(choices=compare.finished_runs(summaries), value=landed.compared),
                landed.shown if landed.tab == "runs" else gr.update(),
                gr.update(choices=sweeps.sweep_choices(sweep_list), value=landed.sweep),
                landed.notice,
            )

        # the tab opens once the pickers are filled (earlier, the first tab's start-up selection wins)
        landed_in = [run_picker, overlay, compare_picker, runs_id, sweeps_page.picker, landing_notice]
        demo.load(land, None, landed_in, show_progress="hidden").then(
            None, None, None, js=OPEN_TAB.format(labels=json.dumps(dict(zip(TABS, TAB_LABELS))))
        )
        demo.load(new_run.draft_values, form.draft, form.fields, show_progress="hidden")  # no spinner on 75 fields
        ticker = gr.Timer(3.0)

        shown = gr.State(None)  # what this browser was last sent (see refresh_lists)
        # The shown run leaves the overlay in the browser, at once: a value sent back by the server was the overlay as
        # it stood when the event fired, and on a loaded machine it arrived after the user's next pick and undid it
        run_picker.change(None, [run_picker, overlay], overlay, js=OVERLAY_WITHOUT_SHOWN)
        run_picker.change(overlay_offered, run_picker, overlay, show_progress="hidden")
        ticker.tick(
            refresh_lists,
            [search, shown, run_picker],
            [table, run_picker, overlay, compare_picker, shown],
            show_progress="hidden",
        )
    api.hide_widget_events(demo)
    return untracked_when_hidden(demo)


def untracked_when_hidden(demo: gr.Blocks) -> gr.Blocks:
    """Give every event that shows no progress no components to show it on (``show_progress_on=[]``).

    Gradio's page keeps a loading status for each component an event has shown progress on (all its outputs unless
    told otherwise: gradio 6.31 frontend, Blocks-*.js ``get progress_targets(){return this.show_progress_on||this.outputs}``),
    and at every status message of every event it writes each of those statuses again, finding each component by a
    walk of the whole component tree (``update_loading_stati_state``, core-*.js ``update_state``). The form's draft,
    restored at each load, put its 75 fields on that list, and the polls their outputs: a live Monitor cost Chromium
    17.7 CPU-s every 30 s, 10.9 without (bench/live_monitor.py). An event whose progress is hidden shows nothing on
    them anyway; the events that fill the form show theirs on their answer (app/web/pages/new_run.py, runs.py)."""
    for fn in demo.fns.values():
        if fn.show_progress == "hidden" and fn.show_progress_on is None:
            fn.show_progress_on = []
    return demo


def _switch(timers: list[gr.Timer], running: list[gr.Timer]):
    """An event function that sets each of ``timers`` going when it is one of ``running`` and stops the others."""
    flags = [any(timer is kept for kept in running) for timer in timers]
    return lambda: [gr.Timer(active=flag) for flag in flags]


def overlay_choices(choices: list, shown: int | None) -> list:
    """The overlay picker's choices: every run but the one the Monitor shows (drawn over itself it adds nothing)."""
    return [choice for choice in choices if choice[1] != shown]


def overlay_offered(shown: int | None) -> dict:
    """The overlay picker's choices once the Monitor shows run ``shown``: every other run. Its value is left as the
    browser holds it (OVERLAY_WITHOUT_SHOWN has let go of ``shown`` there)."""
    choices = runs.run_choices(actions.runs())
    return gr.update(choices=overlay_choices(choices, shown))


def refresh_lists(query: str | None, previous: tuple | None, shown: int | None = None) -> tuple:
    """One dashboard tick: the Runs table (filtered by the search box) and the run pickers, from one run-list read.
    ``previous`` is what this browser was sent last ((picker choices, table rows), kept in its gr.State). What has not
    changed is not sent again: a picker that is replaced resets while someone types in it, and a table of a thousand
    runs is about 100 KB of JSON to send and redraw every 3 s. ``shown``: the run the Monitor shows, which the overlay
    picker does not offer. Returns the table, three pickers and the new state."""
    try:
        summaries = actions.runs()
    except SQLAlchemyError:  # the Monitor's header says what is wrong with the database
        return gr.update(), gr.update(), gr.update(), gr.update(), previous
    lists = runs.run_choices(summaries), compare.finished_runs(summaries)
    rows = runs.table_rows(actions.matching(summaries, query))
    sent_lists, sent_rows = previous or (None, None)
    table = gr.update() if rows == sent_rows else rows
    if lists == sent_lists:
        return table, gr.update(), gr.update(), gr.update(), (lists, rows)
    choices, finished = lists
    overlay = gr.update(choices=overlay_choices(choices, shown))
    return table, gr.update(choices=choices), overlay, gr.update(choices=finished), (lists, rows)


# Gradio's queue looks for new events every 1 ms while it has none (gradio 6.31 queueing.py:149 `sleep_when_free`, read
# by Queue.start_processing at :508-546) and for progress to send every 10 ms (:150, Queue.start_progress_updates at
# :561-569): an idle dashboard, no page open, used about 5 % of a core on that alone (bench/idle_server.py). A look
# every 20 ms and 50 ms is a wait no one can see.
IDLE_LOOK_SECONDS = 0.02
PROGRESS_LOOK_SECONDS = 0.05


def pace_queue(demo: gr.Blocks) -> gr.Blocks:
    """Set how often ``demo``'s queue (after ``demo.queue()``) looks for new events and for progress to send."""
    demo._queue.sleep_when_free = IDLE_LOOK_SECONDS
    demo._queue.progress_update_sleep_when_free = PROGRESS_LOOK_SECONDS
    return demo


def middleware(max_upload_bytes: int) -> list[Middleware]:
    """What stands in front of Gradio's routes, outermost first: request bodies bounded, logins throttled and
    everything but the login page kept from a visitor who is not logged in (app/web/guard.py), the page's own script
    ahead of Gradio's and the Plotly bundle the Monitor draws with (app/web/page_script.py)."""
    return [
        Middleware(BodyLimit, max_upload_bytes=max_upload_bytes),
        Middleware(LoginGuard),
        Middleware(PageScript),
        Middleware(PlotlyBundle),
    ]


def launch(
    demo: gr.Blocks,
    host: str,
    port: int,
    credentials: tuple[str, str] | None,
    max_upload_bytes: int = MAX_UPLOAD_BYTES,
    block: bool = True,
) -> None:
    """Serve ``demo`` at ``host:port`` (blocks until interrupted unless ``block`` is False; then ``demo.close()``
    stops it).

    Gradio's launch() then asks its own server for ``/`` once with a 3 s timeout (gradio 6.31 networking.py
    ``url_ok``, called at blocks.py:3592) and takes a timeout for "localhost is not accessible": on a busy machine
    the dashboard died right after it had started to answer, telling the operator to set share=True (issue 58.8).
    ``_frontend=False`` is the launch() argument that skips that look and nothing else (its only use in 6.31); the
    server is known to answer by then, since launch() has just had its ``startup-events`` answered by it, with no
    timeout. tests/web/test_serve_start.py holds a server whose own HEAD is answered slowly to that."""
    pace_queue(demo.queue(default_concurrency_limit=8)).launch(
        max_file_size=max_upload_bytes,
        app_kwargs={"middleware": middleware(max_upload_bytes)},
        server_name=host,
        server_port=port,
        auth=credentials,
        show_error=True,
        # downloads (exported configs, adapter zips, merged models) are written under the data dir only
        allowed_paths=[str(actions.data_dir() / "exports")],
        prevent_thread_lock=not block,
        css=CSS + styles.CSS,
        quiet=True,  # no "set share=True" hint: the command line says where to open the dashboard
        _frontend=False,
    )


def serve(
    host: str = "127.0.0.1",
    port: int = 7860,
    auth: str | None = None,
    access: Access | None = None,
    max_concurrent: int = 1,
    max_upload_bytes: int = MAX_UPLOAD_BYTES,
) -> None:
    """Start the scheduler and the dashboard; blocks until interrupted. ``auth`` must already be checked with
    :func:`parse_auth` (the command line does that, for the flag and the environment variable alike). Uploads over
    ``max_upload_bytes`` are refused while they arrive (Gradio's ``max_file_size``: 413 before the file is kept)."""
    credentials = parse_auth(auth)
    if host not in LOOPBACK and credentials is None:
        banner = "!" * 100
        log.warning(
            "\n%s\nWARNING: grpo-studio listens on %s without authentication: anyone who can reach this "
            "port can start training runs.\nSet --auth user:password or GRPO_STUDIO_AUTH.\n%s",
            banner,
            host,
            banner,
        )
    # the queue is the supervisor's (trainer.supervise.schedule); the Compare panel frees its model before a start
    scheduler = Scheduler(max_concurrent, before_start=compare.release_for_run)
    share_slots(max_concurrent)  # the evaluation jobs it starts count against the same limit (issue 58.6)
    scheduler.start()
    # uvicorn takes X-Forwarded-For from loopback peers by default: a client through an SSH tunnel or a local proxy
    # could then name any address and escape the login limit (app/web/guard.py); an operator behind a trusted proxy sets it
    os.environ.setdefault("FORWARDED_ALLOW_IPS", "")
    demo = build_app(access)
    prune_uploads()
    started = time.perf_counter()
    launch(demo, host, port, credentials, max_upload_bytes)
    log.info("dashboard stopped after %.0f s", time.perf_counter() - started)
