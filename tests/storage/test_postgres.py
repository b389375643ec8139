"""PostgreSQL for real (``DATABASE_URL=postgresql+psycopg://…``): migrations, the run life cycle, NaN metrics, the
monitor's incremental poll, concurrent writers, and the queue training a run through a worker process. The server
is a throw-away cluster (tests/conftest.py: postgres_server); each test gets a fresh database."""

from __future__ import annotations

import math
import os
import threading
import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.orm import sessionmaker

from app.actions.monitor_state import RunCache
from storage import queries
from storage.db import get_sessionmaker, make_engine, reset_engine
from storage.migrate import HEAD, current_revision
from storage.models import Base, RunStatus
from storage.summaries import run_summaries
from tests.helpers import create_run, run_row, tiny_config, wait_for

pytestmark = pytest.mark.slow  # every test here talks to a real PostgreSQL server


@pytest.fixture
def Session(postgres_url):
    engine = make_engine(postgres_url)
    yield sessionmaker(engine, expire_on_commit=False)
    engine.dispose()


def test_migrations_build_the_models_schema_on_postgres(postgres_url):
    engine = make_engine(postgres_url)
    assert current_revision(engine) == HEAD
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    engine.dispose()


def test_run_life_cycle_metrics_and_incremental_poll(Session):
    with Session.begin() as s:
        run = queries.create_run(s, "pg", {"beta": 0.04}, total_steps=3)
        queries.mark_running(s, run, pid=1, output_dir="/tmp/pg")
        run_id = run.id
    cache = RunCache(run_id)
    for step in (1, 2, 3):
        with Session.begin() as s:
            rows = queries.metric_rows(run_id, step, {"reward": step / 2, "loss": float("nan")}, 100.0 + step)
            queries.add_metric_rows(s, rows)
            queries.set_progress(s, run_id, step)
        with Session.begin() as s:
            assert cache.poll(s) == 2  # only what arrived since the last poll
            summary = next(r for r in run_summaries(s) if r.id == run_id)  # the run list's kept latest values
            assert (summary.current_step, summary.last_reward, summary.last_kl) == (step, step / 2, None)
    assert cache.series["reward"][:, 1].tolist() == [0.5, 1.0, 1.5]
    assert all(math.isnan(v) for v in cache.series["loss"][:, 1])
    with Session.begin() as s:
        queries.finish_run(s, queries.get_run(s, run_id), RunStatus.COMPLETED)
    with Session.begin() as s:
        assert queries.get_run(s, run_id).status == "completed"
        queries.delete_run(s, run_id)
    with Session.begin() as s:
        assert queries.metric_series(s, run_id, "reward") == []  # cascaded


def test_packed_metric_blocks_read_back_on_postgres(Session):
    """storage/series.py on PostgreSQL (bytea for the packed points): the same checks as on SQLite."""
    from tests.storage.test_storage import test_packed_blocks_read_back_as_the_rows_they_copy_from_any_step as check

    check(Session)


def test_concurrent_writers_lose_nothing(Session):
    with Session.begin() as s:
        run_ids = [queries.create_run(s, f"w{i}", {}, 100).id for i in range(4)]
    errors = []

    def write(run_id: int) -> None:
        try:
            for step in range(1, 101):
                with Session.begin() as s:
                    queries.add_metric_rows(s, queries.metric_rows(run_id, step, {"reward": 1.0, "kl": 0.1}, step))
                    queries.set_progress(s, run_id, step)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(r,)) for r in run_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Session.begin() as s:
        assert [len(queries.metric_series(s, r, "reward")) for r in run_ids] == [100] * 4
        assert [queries.get_run(s, r).current_step for r in run_ids] == [100] * 4


@pytest.mark.slow
def test_the_queue_trains_a_run_on_postgres(postgres_url, tiny_model_path, monkeypatch):
    from trainer.supervise.schedule import schedule

    monkeypatch.setenv("DATABASE_URL", postgres_url)  # the worker process inherits it
    reset_engine()
    try:
        first = create_run(tiny_config(name="pg-queue-1", max_steps=2))
        second = create_run(tiny_config(name="pg-queue-2", max_steps=2))
        with get_sessionmaker().begin() as s:
            assert schedule(s, max_concurrent=1) == [first]  # one slot: the second waits in the queue
        wait_for(lambda: run_row(first).status in ("completed", "failed"), 300, "the first run to end")
        assert run_row(first).status == "completed", run_row(first).error
        with get_sessionmaker().begin() as s:
            assert [p.step for p in queries.metric_series(s, first, "reward")] == [1, 2]
            assert queries.sample_steps(s, first) == [1, 2]
            assert schedule(s, max_concurrent=1) == [second]
        wait_for(lambda: run_row(second).status in ("completed", "failed"), 300, "the second run to end")
        assert run_row(second).status == "completed", run_row(second).error
    finally:
        monkeypatch.delenv("DATABASE_URL")
        reset_engine()


@pytest.fixture
def shared(postgres_url, monkeypatch):
    """This test's PostgreSQL database as the process's own (the helpers' sessions and the workers' use it)."""
    monkeypatch.setenv("DATABASE_URL", postgres_url)
    reset_engine()
    yield postgres_url
    monkeypatch.delenv("DATABASE_URL")
    reset_engine()


def test_two_dashboards_scheduling_at_once_start_one_run_on_postgres(shared, monkeypatch):
    """Issue 35 item 10 on PostgreSQL: the count of training runs and the starts share one advisory lock."""
    from tests.runs.test_schedule_across_processes import schedule_at_once, started_by

    first, second = create_run(tiny_config(name="first")), create_run(tiny_config(name="second"))
    assert schedule_at_once(shared, monkeypatch) == [first]
    assert started_by(shared) == [first] and second != first


def test_an_evaluation_committed_late_does_not_take_the_slot_a_later_one_is_taking_on_postgres(shared, monkeypatch):
    """Issue 35 item 2 on PostgreSQL: job A's row got the smaller id but was committed after job B's (two requests at
    once); B is taking the one slot when A's process decides. Without the queue's lock A reads B as queued behind it
    and takes the slot too; with it, A waits until B's turn is written, then queues behind B."""
    from trainer.evaluation.eval_job import queue_state, wait_turn
    from trainer.supervise.processes import process_start_time

    monkeypatch.setenv("GRPO_STUDIO_MAX_CONCURRENT_RUNS", "1")
    here = os.getpid(), process_start_time(os.getpid())
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "evaluated", tiny_config().to_dict(), 4).id
    late = get_sessionmaker()()  # job A's request, its row written but not committed yet
    a = queries.add_evaluation(late, run_id, "final", 2, 0, status=RunStatus.QUEUED)
    late.flush()
    queries.evaluation_started(late, a, *here)
    late.flush()
    with get_sessionmaker().begin() as s:  # job B's request, committed first
        b = queries.add_evaluation(s, run_id, "final", 2, 0, status=RunStatus.QUEUED)
        s.flush()
        queries.evaluation_started(s, b, *here)
        first, second = a.id, b.id
    assert first < second
    takes_turn, taking = queries.evaluation_takes_turn, threading.Event()

    def slow_to_take(session, row):  # B between its check and its write, as a loaded machine has it
        if row.id == second:
            taking.set()
            time.sleep(1.0)
        takes_turn(session, row)

    monkeypatch.setattr(queries, "evaluation_takes_turn", slow_to_take)
    turns: list[int] = []

    def job(evaluation_id: int) -> None:
        if wait_turn(evaluation_id, poll_s=0.05):
            turns.append(evaluation_id)

    threads = [threading.Thread(target=job, args=(second,), daemon=True)]
    threads[0].start()
    assert taking.wait(30)
    late.commit()  # A's row is seen now, and A's process decides while B is still taking the slot
    late.close()
    threads.append(threading.Thread(target=job, args=(first,), daemon=True))
    threads[1].start()
    wait_for(lambda: second in turns, 30, "B's turn")
    time.sleep(1.0)  # A polls on meanwhile
    assert turns == [second], "two evaluations took the one slot"
    assert queue_state(first).startswith(f"queued behind evaluation {second} of run {run_id} (running)")
    with get_sessionmaker().begin() as s:
        queries.finish_evaluation(s, queries.get_evaluation(s, second), RunStatus.COMPLETED, {})
    wait_for(lambda: turns == [second, first], 30, "A's turn once B has finished")
    for thread in threads:
        thread.join(30)


def test_the_progress_printer_waits_out_a_postgresql_restart_in_one_line(postgres_cluster, shared):
    """Issue 58: while the server restarted, a foreground run's progress thread printed a 100-line traceback. With
    the server stopped, each tick says nothing more after one line; once it is back, every step written is printed."""
    import io

    from app.cli.output import ProgressPrinter

    if postgres_cluster.data is None:
        pytest.skip("GRPO_STUDIO_TEST_POSTGRES_URL names a server of your own: not stopped by the tests")
    run_id = create_run(tiny_config(name="pg-outage", max_steps=2))
    out = io.StringIO()
    printer = ProgressPrinter(run_id, out)
    with get_sessionmaker().begin() as s:
        queries.add_metric_rows(s, queries.metric_rows(run_id, 1, {"reward": 1.25}, 1.0))
    assert printer.poll_or_wait() is True
    postgres_cluster.pg_ctl("-m", "fast", "-w", "stop")  # open connections terminated, new ones refused
    try:
        assert [printer.poll_or_wait(), printer.poll_or_wait()] == [False, False]
    finally:
        postgres_cluster.pg_ctl("-o", postgres_cluster.options, "-w", "-l", str(postgres_cluster.data / "log"), "start")
    with get_sessionmaker().begin() as s:  # the pool pings first (storage.db): a dead connection is replaced
        queries.add_metric_rows(s, queries.metric_rows(run_id, 2, {"reward": 2.5}, 2.0))
    assert printer.poll_or_wait() is True

    lines = out.getvalue().splitlines()
    assert lines[0].startswith("step 1/2   reward 1.250") and lines[2].startswith("step 2/2   reward 2.500")
    assert lines[1].startswith(f"run {run_id}: the database can't be reached (") and lines[1].endswith(
        "still following, trying again every 1 s: nothing is lost, the steps meanwhile are printed when it answers"
    )
    assert len(lines) == 3
