"""Migrations: a database made by the 0.1 release upgrades in place with nothing lost, the migrations build exactly
the schema the models describe, and processes that start at once don't trip over each other."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.orm import sessionmaker

from app.monitor_state import RunCache
from storage import queries
from storage.db import make_engine
from storage.migrate import HEAD, MIGRATIONS, current_revision
from storage.models import Base

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "grpo-studio-0.1.sql"
ROOT = Path(__file__).resolve().parent.parent


def _database_from_0_1(path: Path) -> Path:
    with sqlite3.connect(path) as con:
        con.executescript(FIXTURE.read_text())
    return path


def test_head_is_alembics_head():
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD


def test_a_0_1_database_upgrades_in_place_and_reads_back_whole(tmp_path):
    path = _database_from_0_1(tmp_path / "old.db")
    engine = make_engine(f"sqlite:///{path}")
    assert current_revision(engine) == HEAD
    Session = sessionmaker(engine, expire_on_commit=False)
    with Session.begin() as s:
        runs = queries.list_runs(s)
        assert sorted((r.name, r.status) for r in runs) == [("queued-one", "queued"), ("tiny-offline", "completed")]
        run = next(r for r in runs if r.name == "tiny-offline")
        assert (run.current_step, run.total_steps, run.output_dir) == (3, 3, "/data/runs/1-abcd1234")
        assert run.config["model_name_or_path"] == "builtin:tiny"
        assert (run.parent_run_id, run.parent_step) == (None, None)  # 0002: runs from before forks are no forks
        assert [(p.step, p.value) for p in queries.metric_series(s, run.id, "reward")] == [(1, 0.5), (2, 1.0), (3, 1.5)]
        assert all(math.isnan(p.value) for p in queries.metric_series(s, run.id, "loss"))  # NaN kept as NaN
        assert queries.sample_steps(s, run.id) == [1, 2, 3]
        assert [x.completion for x in queries.samples_at(s, run.id, 3)] == ["<answer>3</answer>"]
        assert queries.samples_at(s, run.id, 3)[0].rewards == {"correctness": 1.0}
        assert "resuming from checkpoint-2" in [line.message for line in queries.log_tail(s, run.id)]
        assert queries.latest_evaluation(s, run.id).results["tuned"]["correct"] == 0.71
        cache = RunCache(run.id)
        assert cache.poll(s) == 9  # 3 keys x 3 steps: the monitor reads the old run like a new one
    with Session.begin() as s:  # and the upgraded database takes new writes
        assert queries.create_run(s, "after-upgrade", {}, 1).id == 3
    engine.dispose()


def test_migrations_build_exactly_the_schema_the_models_describe(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    engine.dispose()


def test_processes_starting_at_once_migrate_once(tmp_path):
    path = _database_from_0_1(tmp_path / "shared.db")
    code = f"from storage.db import make_engine; make_engine('sqlite:///{path}'); print('ok')"
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE) for _ in range(3)]
    assert [p.communicate(timeout=120)[0].strip() for p in procs] == [b"ok"] * 3
    assert current_revision(make_engine(f"sqlite:///{path}")) == HEAD


def test_duplicate_metric_rows_of_an_old_database_fold_into_the_newest(tmp_path):
    """Issue 23, item 4: a database from before 0006 holds two ``epoch`` rows at a run's last step; the upgrade keeps
    the newer one and makes (run, key, step) unique."""
    path = _database_from_0_1(tmp_path / "dup.db")
    with sqlite3.connect(path) as con:
        run_id = con.execute("SELECT id FROM runs WHERE name = 'tiny-offline'").fetchone()[0]
        for value in (0.9, 1.0):
            con.execute(
                "INSERT INTO metrics (run_id, step, key, value, raw, wall_time) VALUES (?, 3, 'epoch', ?, NULL, 9)",
                (run_id, value),
            )
    engine = make_engine(f"sqlite:///{path}")
    Session = sessionmaker(engine, expire_on_commit=False)
    with Session.begin() as s:
        assert [(p.step, p.value) for p in queries.metric_series(s, run_id, "epoch")] == [(3, 1.0)]
        assert len(queries.metric_series(s, run_id, "reward")) == 3  # rows without a duplicate untouched
    with sqlite3.connect(path) as con:
        unique = [row for row in con.execute("PRAGMA index_list(metrics)") if row[1] == "ix_metrics_run_key_step"]
        assert unique and unique[0][2] == 1
    engine.dispose()
