"""Migrations: a database made by the 0.1 release upgrades in place with nothing lost, the migrations build exactly
the schema the models describe, and processes that start at once don't trip over each other."""

from __future__ import annotations

import json
import math
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.orm import sessionmaker

from app.actions.monitor_state import RunCache
from storage import queries
from storage.db import make_engine
from storage.migrate import HEAD, MIGRATIONS, current_revision
from storage.models import Base
from tests.helpers import FIXTURES, unshare_available

FIXTURE = FIXTURES / "grpo-studio-0.1.sql"
ROOT = Path(__file__).resolve().parents[2]


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
    _reads_back_whole(make_engine(f"sqlite:///{path}"))


def _reads_back_whole(engine) -> None:
    """The 0.1 fixture's every row, read through the upgraded schema, and a new write taken (the engine is disposed)."""
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


def _as_it_was(path: Path) -> None:
    """The 0.1 database untouched by a migration that did not finish: its tables, no revision, its rows, no damage."""
    with sqlite3.connect(path) as con:
        tables = sorted(row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        assert tables == ["evaluations", "metrics", "run_logs", "runs", "samples"]  # no _alembic_tmp_ copy left
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
        assert con.execute("SELECT count(*) FROM metrics").fetchone()[0] == 9
        assert "parent_run_id" not in [row[1] for row in con.execute("PRAGMA table_info(runs)")]


# A process killed by the OOM killer or a power cut while it migrates: it stops right after 0008 renamed its copy of
# `runs` into place (the old table dropped, run_logs not yet rebuilt), the worst moment to die.
KILLED_MIDWAY = """
import sys, time
from pathlib import Path
from sqlalchemy import Engine, event

def pause(conn, cursor, statement, *args):
    if statement.startswith("ALTER TABLE _alembic_tmp_runs RENAME TO runs"):
        Path(sys.argv[2]).write_text("midway")
        time.sleep(600)

event.listen(Engine, "after_cursor_execute", pause)
from storage.db import make_engine
make_engine(f"sqlite:///{sys.argv[1]}")
"""


def test_a_migration_killed_midway_leaves_the_database_as_it_was_and_the_next_start_finishes_it(tmp_path):
    """Issue 35 item 10: ``kill -9`` of a migrating process, with the real process and the real signal."""
    path = _database_from_0_1(tmp_path / "killed.db")
    midway = tmp_path / "midway"
    child = subprocess.Popen([sys.executable, "-c", KILLED_MIDWAY, str(path), str(midway)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while not midway.exists():
            assert child.poll() is None and time.monotonic() < deadline, "the migration never reached its midway point"
            time.sleep(0.1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    _as_it_was(path)
    _reads_back_whole(make_engine(f"sqlite:///{path}"))


# Migrates a 0.1 database on a small tmpfs (a private mount namespace, no root needed) that a ballast file has filled
# to ``free`` bytes; then frees the disk and starts again. Prints what a user was told each time.
ON_A_FULL_DISK = """
import json, os, shutil, sys
home, fixture, free = sys.argv[1], sys.argv[2], int(sys.argv[3])
shutil.copy(fixture, os.path.join(home, "old.db"))
st = os.statvfs(home)
with open(os.path.join(home, "ballast"), "wb") as handle:
    handle.write(bytes(max(0, st.f_bavail * st.f_frsize - free)))
from storage.db import StorageError, make_engine
try:
    make_engine(f"sqlite:///{home}/old.db")
    told = "upgraded"
except StorageError as exc:
    told = str(exc)
shutil.copy(os.path.join(home, "old.db"), os.path.join(sys.argv[4], "after-failure.db"))
os.remove(os.path.join(home, "ballast"))
make_engine(f"sqlite:///{home}/old.db").dispose()
shutil.copy(os.path.join(home, "old.db"), os.path.join(sys.argv[4], "after-retry.db"))
print("TOLD" + json.dumps(told))
"""


@pytest.mark.skipif(not unshare_available(), reason="needs user namespaces (unshare -Urm) for a private tmpfs")
@pytest.mark.parametrize("free", [0, 8 * 1024, 64 * 1024])
def test_a_migration_that_meets_a_full_disk_changes_nothing_and_says_the_disk_is_full(tmp_path, free):
    """Issue 35 item 10: a real full disk during a migration. With no room at all, and with a few pages' room (SQLite
    then fails writing its -wal or -shm file, and says "disk I/O error"), the user reads that the disk is full and
    what to do; the database is as it was, and once there is room the next start migrates it whole."""
    fixture = _database_from_0_1(tmp_path / "fixture.db")
    home, copies = tmp_path / "disk", tmp_path / "copies"
    home.mkdir(), copies.mkdir()
    script = tmp_path / "on_a_full_disk.py"
    script.write_text(ON_A_FULL_DISK)
    mount = f"mount -t tmpfs -o size=4m tmpfs {home} && exec {sys.executable} {script} {home} {fixture} {free} {copies}"
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", mount], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "TOLD" in done.stdout, done.stderr[-3000:]
    told = json.loads(done.stdout.rsplit("TOLD", 1)[1].splitlines()[0])
    assert told.startswith(f"the disk holding the database {home}/old.db is full"), told
    assert told.endswith("free some space, then try again") and "\n" not in told
    _as_it_was(copies / "after-failure.db")
    _reads_back_whole(make_engine(f"sqlite:///{copies / 'after-retry.db'}"))


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
