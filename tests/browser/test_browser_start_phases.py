"""What the page says while things start (issue 59), in Chromium against `grpo-studio serve`: one server and one browser
for the module.

The run's start is driven from here, row by row, as the launcher and the worker write it (a worker started, the run
taken, the trainer ready, the base's held-out point stored): each phase is then on the page while it lasts, not only
when a real worker on a loaded machine happens to be slow enough to be seen in it.
"""

from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

from app.web.widgets.start_phases import phases_text, start_phases
from storage import queries
from storage.db import get_sessionmaker
from storage.models import RunStatus
from tests.browser.harness import CHROMIUM, NO_CHROMIUM, start_server
from tests.helpers import BROWSER_TIMEOUT_MS, PAGE_WAIT_S, create_run, run_row, tiny_config, wait_for
from trainer.supervise.processes import process_start_time

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]


@pytest.fixture(scope="module")
def server(tiny_model_path, module_database):
    yield from start_server("serve-start-phases.log")


def _write(*lines: str, run_id: int, then=None) -> None:
    """Append log lines to the run (from this process, as another connection: the worker's), after ``then(session,
    run)``."""
    with get_sessionmaker().begin() as s:
        if then is not None:
            then(s, queries.get_run(s, run_id))
        for line in lines:
            queries.add_log(s, run_id, line)


def _current(header: str) -> str | None:
    """The phase the header marks as the current one (bold, "(now)"), without its time."""
    found = re.search(r"([a-z][a-z' ()-]*?) \d+(?:s|m\d\ds)\*?\*? \(now\)", header)
    return found.group(1) if found else None


def test_the_monitor_shows_each_start_phase_as_it_happens_with_its_own_time(server, browser):
    """The launch of the issue: the worker had started 2 s after Launch, and the Monitor said "Queued: it starts
    within a few seconds" until it had imported its libraries (78 s). Now each phase shows while it lasts."""
    url, _ = server
    me = os.getpid()  # a live process stands in for the worker, so the scheduler's reconcile leaves the run alone
    run_id = create_run(tiny_config(name="starting", eval_steps=2))
    _write(
        f"{queries.WORKER_STARTED} (pid {me})",
        run_id=run_id,
        then=lambda s, run: queries.worker_launched(s, run, me, process_start_time(me), "/tmp/start-phases"),
    )
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        page.goto(f"{url}?tab=monitor&run={run_id}")
        header = page.locator("#monitor-progress")
        seen = []

        def now_in(phase: str):
            text = header.inner_text()
            current = _current(text)
            if current and (not seen or seen[-1] != current):
                seen.append(current)
            return current == phase and text

        text = wait_for(lambda: now_in("worker starting (importing its libraries)"), PAGE_WAIT_S, "worker starting")
        assert "within a few seconds" not in text and "waiting behind" not in text
        _write(
            f"{queries.WORKER_RUNNING} (pid {me}): loading the model",
            run_id=run_id,
            then=lambda s, run: queries.mark_running(s, run, me, "/tmp/start-phases", process_start_time(me)),
        )
        wait_for(lambda: now_in("loading the model"), PAGE_WAIT_S, "loading the model")
        _write(f"{queries.HELDOUT_EVERY}2 steps on 8 problems", "trainer ready in 1.00 s", run_id=run_id)
        wait_for(lambda: now_in("the base's held-out evaluation"), PAGE_WAIT_S, "the base's held-out evaluation")
        evaluated = time.time()  # the base's held-out point, stored as the worker's evaluation does
        with get_sessionmaker().begin() as s:
            rows = queries.metric_rows(run_id, 0, {"heldout/correct": 0.25, "heldout/seconds": 1.5}, evaluated)
            queries.add_metric_rows(s, rows)
        text = wait_for(lambda: now_in("stepping"), PAGE_WAIT_S, "stepping")
        assert seen == [
            "worker starting (importing its libraries)",
            "loading the model",
            "the base's held-out evaluation",
            "stepping",
        ]
        # every ended phase with the time its rows say it took, as app/web/widgets/start_phases.py reads them
        with get_sessionmaker().begin() as s:
            run, lines = queries.get_run(s, run_id), queries.start_lines(s, run_id)
            phases = start_phases(run, lines, np.array([[0, 1.5, evaluated]]))
        ended = phases_text(phases[:-1]).replace("**", "")
        assert [p.name for p in phases] == ["queued", "starting", "loading", "heldout", "stepping"]
        assert ended in text.replace("**", "")
    finally:
        page.close()
        with get_sessionmaker().begin() as s:
            queries.finish_run(s, queries.get_run(s, run_id), RunStatus.STOPPED)
    assert run_row(run_id).status == RunStatus.STOPPED
