"""A frozen worker or a hanging step never reads as a healthy "running" (issue 23, item 2): the verdicts of
app/actions/liveness.py on run rows, and where a user reads them (the Monitor's header and banner, the Runs table,
``grpo-studio runs``). The real SIGSTOP of a worker: tests/runs/test_faults.py."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from app.actions.liveness import liveness_alerts, liveness_problem
from app.actions.monitor_state import progress_text
from app.cli.main import main
from storage import queries
from storage.db import get_sessionmaker

NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)


def _run(beat_age: float | None, step_age: float | None, step_seconds: float | None = 0.6, status="running"):
    ago = lambda s: None if s is None else NOW - timedelta(seconds=s)  # noqa: E731
    return SimpleNamespace(
        id=1, name="r", status=status, current_step=25, total_steps=40, started_at=NOW - timedelta(minutes=5),
        finished_at=None, heartbeat_at=ago(beat_age), stepped_at=ago(step_age), step_seconds=step_seconds,
    )  # fmt: skip


def test_no_heartbeat_and_no_step_is_stalled_with_how_long_and_the_usual_pace():
    assert liveness_problem(_run(62, 65), NOW) == (
        "stalled",
        "stalled: no step and no heartbeat for 62 s (steps took 0.6 s)",
    )


def test_a_step_that_hangs_while_the_heartbeat_goes_on_is_a_slow_step():
    name, text = liveness_problem(_run(2, 80, step_seconds=4.0), NOW)
    assert name == "slow_step" and text == "slow step: no step for 80 s (steps took 4.0 s); the worker is alive"


def test_late_but_normal_is_no_alarm():
    assert liveness_problem(_run(4, 3), NOW) is None
    assert liveness_problem(_run(4, 100, step_seconds=30.0), NOW) is None  # a 30 s step pace: 100 s is not slow
    assert liveness_problem(_run(10, None, None), NOW) is None  # loading the model: beating, no step yet
    assert liveness_problem(_run(None, None, None), NOW) is None  # a run from before heartbeats
    assert liveness_problem(_run(500, 500, status="completed"), NOW) is None


def test_before_the_first_step_a_frozen_worker_is_stalled_too():
    assert (
        liveness_problem(_run(45, None, None), NOW)[1]
        == "stalled: no step and no heartbeat for 45 s (no step timed yet)"
    )


def test_the_monitor_says_stalled_instead_of_an_eta_and_the_banner_says_what_to_check():
    frozen = _run(62, 65)
    header = progress_text(frozen, now=NOW)
    assert "stalled: no step and no heartbeat for 62 s (steps took 0.6 s)" in header and "ETA" not in header
    assert "ETA" in progress_text(_run(1, 1), now=NOW)
    [alert] = liveness_alerts(frozen, NOW)
    assert alert.name == "stalled" and "frozen or gone" in alert.hint


def test_grpo_studio_runs_and_the_runs_table_show_a_stalled_run(capsys):
    from app.web.pages.runs import status_text
    from storage.summaries import run_summaries

    started = time.monotonic()
    with get_sessionmaker().begin() as s:
        run = queries.create_run(s, "frozen", {}, 40)
        queries.mark_running(s, run, pid=1, output_dir="/tmp/frozen")
        run.heartbeat_at = datetime.now(UTC) - timedelta(seconds=90)  # as a SIGSTOPped worker leaves it
        queries.set_progress(s, run.id, 25, stepped_at=datetime.now(UTC) - timedelta(seconds=91), step_seconds=0.6)
    from unittest import mock

    with mock.patch("trainer.supervise.workers.is_alive", return_value=True):  # pid 1 is alive, but not our worker
        assert main(["runs"]) == 0
    out = capsys.readouterr().out
    # 90 s when the CLI read the run; a second or two more on a busy machine
    stalled = re.search(r"stalled: no step and no heartbeat for (\d+) s \(steps took 0\.6 s\)", out)
    assert "running" in out and stalled and 90 <= int(stalled.group(1)) <= 90 + time.monotonic() - started, out
    with get_sessionmaker().begin() as s:
        [summary] = run_summaries(s)
    assert status_text(summary).startswith("running · stalled: no step and no heartbeat for 9")
