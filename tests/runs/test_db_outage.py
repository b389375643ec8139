"""The worker's writer through a database that does not answer (issue 23, item 1), in-process and fast: an outside
``BEGIN EXCLUSIVE`` on the SQLite file while rows arrive; rows past the memory bound go to the run directory's file
and come back in order; a flush during the outage does not wait for the database; nothing is written twice; what is
not cured by waiting (a full disk) is not retried. The same against a real training run: tests/runs/test_faults.py."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from storage import queries
from storage.db import get_sessionmaker, is_transient
from trainer.job.db_writer import DbWriter

# waits: outside locks held a second or two (8 s of wall for 0.3 CPU-s, measured alone): the waiting lane's
# (tests/suite/xdist_lanes.py)
pytestmark = pytest.mark.waits


def _sqlite_file() -> str:
    return get_sessionmaker().kw["bind"].url.database


def _rows_per_step_and_key(run_id: int) -> dict[tuple[int, str], int]:
    with get_sessionmaker().begin() as s:
        counts = s.execute(
            text("SELECT step, key, COUNT(*) FROM metrics WHERE run_id = :r GROUP BY step, key"), {"r": run_id}
        )
        return {(step, key): n for step, key, n in counts}


def _step(writer: DbWriter, run_id: int, step: int) -> None:
    writer.metrics(queries.metric_rows(run_id, step, {"reward": step / 10, "kl": 0.01, "epoch": step / 100}, 1.0))
    writer.samples([dict(run_id=run_id, step=step, group_index=0, prompt="p", completion=f"c{step}", rewards={})])
    writer.progress(step)


@pytest.mark.timeout(300)  # a hang guard: a flush that waited for the lock would never return while it is held
def test_an_outside_lock_holds_rows_spills_them_and_replays_them_in_order(tmp_path):
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "locked", {}, 60).id
    spill = tmp_path / "pending-writes.jsonl"
    writer = DbWriter(run_id, flush_interval=0.05, spill_path=spill, memory_rows=20)
    for step in range(1, 11):
        _step(writer, run_id, step)
    writer.flush()
    outside = sqlite3.connect(_sqlite_file(), timeout=0)
    outside.execute("BEGIN EXCLUSIVE")
    try:
        for step in range(11, 41):
            _step(writer, run_id, step)
            time.sleep(0.02)
        writer.flush()  # during the outage it returns once the rows are in the file, not when the lock goes
        assert spill.is_file() and len(spill.read_text().splitlines()) > 0
        time.sleep(1.5)
        for step in range(41, 51):  # and more after the spill: memory holds them behind the file
            _step(writer, run_id, step)
    finally:
        outside.rollback()
        outside.close()
    writer.close()
    counts = _rows_per_step_and_key(run_id)
    assert counts == {(step, key): 1 for step in range(1, 51) for key in ("reward", "kl", "epoch")}
    with get_sessionmaker().begin() as s:
        assert queries.sample_steps(s, run_id) == list(range(1, 51))
        assert [x.completion for x in queries.samples_at(s, run_id, 33)] == ["c33"]
        run = queries.get_run(s, run_id)
        assert run.current_step == 50 and run.heartbeat_at is not None
        lines = [line.message for line in queries.log_tail(s, run_id)]
    note = next(line for line in lines if line.startswith("the database did not take writes for "))
    assert "database is locked" in note and "rows" in note and "pending-writes.jsonl" in note
    assert not spill.exists()  # replayed and removed


def test_close_keeps_retrying_then_gives_up_saying_where_the_rows_are(tmp_path):
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "gone", {}, 5).id
    spill = tmp_path / "pending-writes.jsonl"
    writer = DbWriter(run_id, flush_interval=0.05, spill_path=spill, grace_seconds=1.5)
    outside = sqlite3.connect(_sqlite_file(), timeout=0)
    outside.execute("BEGIN EXCLUSIVE")
    try:
        _step(writer, run_id, 1)
        with pytest.raises(RuntimeError, match=r"did not answer for 2 s .*5 rows not written, kept in .*pending"):
            writer.close()
    finally:
        outside.rollback()
        outside.close()
    assert len(spill.read_text().splitlines()) == 3  # metrics, samples, progress: nothing dropped


def test_a_lock_released_before_close_loses_nothing_and_close_does_not_fail(tmp_path):
    """Training ends while the database is locked: close() waits for it (within its grace) instead of failing."""
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "late", {}, 3).id
    writer = DbWriter(run_id, flush_interval=0.05, spill_path=tmp_path / "p.jsonl", grace_seconds=60)
    outside = sqlite3.connect(_sqlite_file(), timeout=0, check_same_thread=False)  # released by a timer thread
    outside.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(2.0, outside.rollback)
    release.start()
    for step in (1, 2, 3):
        _step(writer, run_id, step)
    writer.close()  # no exception
    release.join()
    outside.close()
    assert _rows_per_step_and_key(run_id) == {(s, k): 1 for s in (1, 2, 3) for k in ("reward", "kl", "epoch")}


@pytest.mark.parametrize(
    ("message", "transient"),
    [
        ("database is locked", True),
        ("connection failed: connection to server at 127.0.0.1 failed: Connection refused", True),
        ("terminating connection due to administrator command", True),
        ("database or disk is full", False),
        ("no such table: metrics", False),
    ],
)
def test_only_what_waiting_cures_is_retried(message, transient):
    assert is_transient(OperationalError("INSERT ...", {}, Exception(message))) is transient
