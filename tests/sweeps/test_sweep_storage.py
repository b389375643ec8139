"""Sweeps in the database (issue 41): revision 0009 brings an old database up with its runs kept (members of no
sweep), and a sweep's members read back in order with their point, objective, reward, KL and why they stopped."""

from __future__ import annotations

import sqlite3

from sqlalchemy.orm import sessionmaker

from storage import queries
from storage import sweeps as sweep_rows
from storage.db import make_engine
from storage.migrate import HEAD, current_revision
from storage.models import RunStatus, SweepState
from tests.storage.test_migrations import _database_from_0_1


def test_an_old_database_gains_the_sweeps_table_and_its_runs_belong_to_no_sweep(tmp_path):
    path = _database_from_0_1(tmp_path / "old.db")
    engine = make_engine(f"sqlite:///{path}")
    assert current_revision(engine) == HEAD  # 0009 or later
    Session = sessionmaker(engine, expire_on_commit=False)
    with Session.begin() as s:
        runs = queries.list_runs(s)
        assert sorted(r.name for r in runs) == ["queued-one", "tiny-offline"]  # rows kept
        assert [(r.sweep_id, r.sweep_point, r.sweep_stop) for r in runs] == [(None, None, None)] * 2
        assert sweep_rows.list_sweeps(s) == []
        sweep = sweep_rows.create_sweep(s, "after-upgrade", {"method": "grid"}, {"beta": 0.0}, "reward", "max")
        member = queries.create_run(s, "m", {}, 1, sweep_id=sweep.id, sweep_point={"beta": 0.0})
        assert member.id == 3 and sweep.id == 1  # ids continue after the old runs'
    engine.dispose()
    with sqlite3.connect(path) as con:  # a member's sweep is a real foreign key, and runs keeps AUTOINCREMENT (0008)
        assert con.execute("PRAGMA foreign_key_list(runs)").fetchall()[0][2] == "sweeps"
        assert "AUTOINCREMENT" in con.execute("SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()[0]


def _sweep_with_members(s):
    sweep = sweep_rows.create_sweep(s, "grid", {"method": "grid"}, {}, "heldout/correct", "max")
    first = queries.create_run(s, "grid-1", {}, 10, sweep_id=sweep.id, sweep_point={"beta": 0.0})
    second = queries.create_run(s, "grid-2", {}, 10, sweep_id=sweep.id, sweep_point={"beta": 0.04})
    queries.create_run(s, "not-a-member", {}, 10)
    rows = queries.metric_rows(first.id, 0, {"heldout/correct": 0.2, "reward": 0.5, "kl": 0.0}, 1.0)
    rows += queries.metric_rows(first.id, 5, {"heldout/correct": 0.6, "reward": 1.5, "kl": 0.01}, 2.0)
    rows += queries.metric_rows(first.id, 10, {"heldout/correct": 0.4, "reward": 1.7, "kl": 0.02}, 3.0)
    queries.add_metric_rows(s, rows)
    return sweep, first, second


def test_a_sweeps_members_read_back_in_order_with_their_objective_now_and_best():
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as s:
        sweep, first, second = _sweep_with_members(s)
        members = sweep_rows.members(s, sweep)
        assert [(m.name, m.point) for m in members] == [("grid-1", {"beta": 0.0}), ("grid-2", {"beta": 0.04})]
        one, two = members
        assert one.objective == [(5, 0.6), (10, 0.4)]  # step 0's 0.2 is the base model's (issue 57.5)
        assert (one.objective_now, one.objective_best("max"), one.objective_best("min")) == (0.4, 0.6, 0.4)
        assert (one.reward, one.kl) == (1.7, 0.02)
        assert (two.objective_now, two.objective_best("max"), two.reward, two.kl) == (None, None, None, None)


def test_a_stop_reason_is_in_the_members_row_and_log_and_a_skipped_member_is_stopped():
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as s:
        sweep, first, second = _sweep_with_members(s)
        queries.sweep_stopped(s, second, "skipped: the probe says wasted (every group scored alike)")
        assert second.status == RunStatus.STOPPED and second.error.startswith("skipped: the probe")
        assert [line.message for line in queries.log_tail(s, second.id)] == [
            "sweep: skipped: the probe says wasted (every group scored alike)"
        ]
        assert sweep_rows.members(s, sweep)[1].stop_reason.startswith("skipped: the probe")


def test_a_sweep_finishes_only_once_every_member_has_ended():
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as s:
        sweep, first, second = _sweep_with_members(s)
        queries.finish_run(s, first, RunStatus.COMPLETED)
        assert not sweep_rows.finish_if_done(s, sweep) and sweep.state == SweepState.ACTIVE
        queries.finish_run(s, second, RunStatus.FAILED, "boom")
        assert sweep_rows.finish_if_done(s, sweep)
        assert sweep.state == SweepState.FINISHED and sweep.finished_at is not None
        assert sweep_rows.list_sweeps(s, SweepState.ACTIVE) == []
