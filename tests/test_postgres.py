"""PostgreSQL for real (``DATABASE_URL=postgresql+psycopg://…``): migrations, the run life cycle, NaN metrics, the
monitor's incremental poll, concurrent writers, and the queue training a run through a worker process. The server
is a throw-away cluster (tests/conftest.py: postgres_server); each test gets a fresh database."""

from __future__ import annotations

import math
import threading

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.orm import sessionmaker

from app.monitor_state import RunCache
from storage import queries
from storage.db import get_sessionmaker, make_engine, reset_engine
from storage.migrate import HEAD, current_revision
from storage.models import Base, RunStatus
from storage.summaries import run_summaries

from .helpers import create_run, run_row, tiny_config, wait_for

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
    from .test_storage import test_packed_blocks_read_back_as_the_rows_they_copy_from_any_step as check

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
    from trainer.job.launch import schedule

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
