"""One limit across processes (issue 35 item 10): two dashboards that each allow one training run and schedule at
the same moment start one run between them, not one each. Each "dashboard" here is an engine of its own on the same
SQLite file (as two processes have; tests/storage/test_postgres.py does the same on PostgreSQL), scheduling in its own
thread; starting a worker is replaced by recording a live worker on the row, held a moment as a real start takes."""

from __future__ import annotations

import os
import threading
import time

from sqlalchemy.orm import sessionmaker

from storage import queries
from storage.db import make_engine
from tests.helpers import create_run, tiny_config
from trainer.supervise import schedule
from trainer.supervise.processes import process_start_time


def test_two_dashboards_scheduling_at_once_start_one_run(database, monkeypatch):
    first, second = create_run(tiny_config(name="first")), create_run(tiny_config(name="second"))
    assert schedule_at_once(database, monkeypatch) == [first]  # tests/storage/test_postgres.py: the same on PostgreSQL
    assert second not in started_by(database)


def schedule_at_once(url: str, monkeypatch) -> list[int]:
    """Two dashboards on ``url``, each allowing one run, scheduling at the same moment; returns the runs started."""
    started: list[int] = []

    def start_worker(session, run):
        queries.worker_launched(session, run, os.getpid(), process_start_time(os.getpid()), "/tmp/none")
        started.append(run.id)
        time.sleep(0.5)  # a real start spawns a process; the other dashboard schedules meanwhile
        return os.getpid()

    monkeypatch.setattr(schedule, "start_worker", start_worker)
    engines = [make_engine(url), make_engine(url)]
    gate = threading.Barrier(2)

    def dashboard(engine) -> None:
        gate.wait()
        with sessionmaker(engine, expire_on_commit=False).begin() as session:
            schedule.schedule(session, max_concurrent=1)

    threads = [threading.Thread(target=dashboard, args=(engine,)) for engine in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for engine in engines:
        engine.dispose()
    return started


def started_by(url: str) -> list[int]:
    """The runs of ``url`` that have a worker recorded."""
    engine = make_engine(url)
    with sessionmaker(engine).begin() as session:
        started = [run.id for run in queries.list_runs(session) if run.pid]
    engine.dispose()
    return started
