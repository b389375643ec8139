"""A run's start, phase by phase, as the Monitor says it (issue 59): app/web/widgets/start_phases.py's plain logic on literal times,
and the Monitor's header over rows planted as the launcher and the worker write them."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np

from app.web.widgets.start_phases import phases_text, start_phases
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return (T0 + timedelta(seconds=seconds)).replace(tzinfo=None)  # naive, as SQLite hands them back


def _line(message: str, seconds: float) -> SimpleNamespace:
    return SimpleNamespace(message=message, created_at=_at(seconds))


def _run(status: str = "running", finished: float | None = None) -> SimpleNamespace:
    return SimpleNamespace(status=status, created_at=_at(0), finished_at=None if finished is None else _at(finished))


LINES = [
    _line("worker started (pid 12)", 2),
    _line("worker running (pid 12): loading the model", 80),
    _line("held-out evaluation every 2 steps on 8 problems", 95),
    _line("trainer ready in 30.00 s: data set 1.00 s, ...", 110),
]


def test_each_phase_has_its_own_time_and_the_current_one_is_marked():
    """The launch of the issue: queued 2 s, the worker's imports 78 s, then the model, the base's evaluation, steps."""
    now = T0.timestamp() + 200
    heldout = np.array([[0, 1.2, T0.timestamp() + 122.0]])  # the step-0 point, stored 12 s after the trainer was ready
    phases = start_phases(_run(), LINES, heldout)
    assert [(p.name, p.seconds(now)) for p in phases] == [
        ("queued", 2.0),
        ("starting", 78.0),
        ("loading", 30.0),
        ("heldout", 12.0),
        ("stepping", 78.0),
    ]
    assert phases_text(phases, now) == (
        "Start: queued 2s → worker starting (importing its libraries) 1m18s → loading the model 30s → "
        "the base's held-out evaluation 12s → **stepping 1m18s** (now)"
    )


def test_the_phase_the_run_is_in_is_the_last_one_reached():
    now = T0.timestamp() + 50
    assert phases_text(start_phases(_run("queued"), LINES[:1]), now) == (
        "Start: queued 2s → **worker starting (importing its libraries) 48s** (now)"
    )
    # the base's evaluation under way: no held-out point after the trainer was ready (an old one does not count)
    old = np.array([[0, 1.0, T0.timestamp() - 500.0]])
    phases = start_phases(_run(), LINES, old)
    assert [p.name for p in phases][-1] == "heldout" and phases[-1].ended is None
    # no evaluation configured: stepping begins when the trainer is ready
    phases = start_phases(_run(), [LINES[0], LINES[1], LINES[3]], None)
    assert [(p.name, p.began - T0.timestamp()) for p in phases][-1] == ("stepping", 110.0)


def test_a_resumed_run_counts_from_its_resume_and_an_ended_run_from_its_end():
    lines = [
        _line("resume requested", 300),
        _line("worker started (pid 13)", 303),
        _line("worker running (pid 13)", 310),
    ]
    phases = start_phases(_run("failed", finished=340), lines)
    assert [(p.name, p.seconds(0.0)) for p in phases] == [("queued", 3.0), ("starting", 7.0), ("loading", 30.0)]
    assert "(now)" not in phases_text(phases)


def test_the_monitor_says_a_started_worker_is_starting_not_that_the_run_starts_within_seconds():
    """The bug: a run whose worker the scheduler had started (queued, with a pid) read "Queued: it starts within a few
    seconds" until the worker marked it running."""
    from app.web.pages.monitor import refresh

    run_id = create_run(tiny_config(name="starting"))
    with get_sessionmaker().begin() as s:
        queries.worker_launched(s, queries.get_run(s, run_id), os.getpid(), None, "/tmp/x")
        queries.add_log(s, run_id, f"{queries.WORKER_STARTED} (pid {os.getpid()})")
    view = refresh(run_id, [], 0.0, "step", 0, {})
    assert "within a few seconds" not in view.header and "waiting behind" not in view.header
    # the times are the rows' (a loaded machine may put a second between them): the phases and which is current
    assert re.search(
        r"Start: queued \d+s → \*\*worker starting \(importing its libraries\) \d+s\*\* \(now\)$", view.header
    )
    with get_sessionmaker().begin() as s:
        queries.mark_running(s, queries.get_run(s, run_id), os.getpid(), "/tmp/x")
        queries.add_log(s, run_id, f"{queries.WORKER_RUNNING} (pid {os.getpid()}): loading the model")
    view = refresh(run_id, [], 0.0, "step", 0, view.caches)
    assert re.search(r"→ \*\*loading the model \d+s\*\* \(now\)$", view.header)
    assert view.log.endswith(f"INFO worker running (pid {os.getpid()}): loading the model")
