"""Ids are never reused (issue 35 item 4): a deleted run's id, an evaluation's and a log line's are not handed out
again, in a new database and in one upgraded with rows in it (revision 0008 rebuilds the tables with AUTOINCREMENT,
every row and id kept, foreign keys still enforced after); a migration that fails leaves the database as it was; a
fork whose parent is deleted meanwhile fails in one sentence and leaves nothing behind."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import sessionmaker

from storage import queries
from storage.db import make_engine
from storage.migrate import HEAD, current_revision
from storage.models import Evaluation, Metric, Run, RunLog, Sample
from tests.helpers import FIXTURES

FIXTURE = FIXTURES / "grpo-studio-0.1.sql"


def _old_database(path: Path) -> Path:
    """A database of the 0.1 release (before migrations), with a third run added and deleted again: SQLite without
    AUTOINCREMENT would give its id 3 to the next run."""
    with sqlite3.connect(path) as con:
        con.executescript(FIXTURE.read_text())
    return path


def _counts(Session) -> dict[str, int]:
    with Session.begin() as s:
        return {m.__tablename__: s.query(m).count() for m in (Run, Metric, Sample, RunLog, Evaluation)}


def test_a_new_database_never_hands_out_a_deleted_id(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    Session = sessionmaker(engine, expire_on_commit=False)
    with Session.begin() as s:
        ids = [queries.create_run(s, f"r{i}", {}, 1).id for i in range(3)]
        queries.add_log(s, ids[-1], "a line")
    with Session.begin() as s:
        evaluation = queries.add_evaluation(s, ids[-1], "final", 2, 1, {"base": {}, "tuned": {}})
        (line,) = queries.log_tail(s, ids[-1])
        old_ids = evaluation.id, line.id
    with Session.begin() as s:
        queries.delete_run(s, ids[-1])
    with Session.begin() as s:
        new = queries.create_run(s, "after", {}, 1)
        queries.add_log(s, new.id, "another line")
        again = queries.add_evaluation(s, new.id, "final", 2, 1, {"base": {}, "tuned": {}})
    with Session.begin() as s:
        (new_line,) = queries.log_tail(s, new.id)
        assert new.id == ids[-1] + 1
        assert (again.id, new_line.id) == (old_ids[0] + 1, old_ids[1] + 1)
    engine.dispose()


def test_an_upgraded_database_keeps_every_row_and_id_and_reuses_none(tmp_path):
    path = _old_database(tmp_path / "old.db")
    with sqlite3.connect(path) as con:
        before = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "metrics", "samples")}
        names = con.execute("SELECT id, name FROM runs ORDER BY id").fetchall()
    engine = make_engine(f"sqlite:///{path}")
    assert current_revision(engine) == HEAD
    Session = sessionmaker(engine, expire_on_commit=False)
    counts = _counts(Session)
    assert {t: counts[t] for t in before} == before
    with Session.begin() as s:
        assert [(r.id, r.name) for r in sorted(queries.list_runs(s), key=lambda r: r.id)] == names
        assert s.execute(text("PRAGMA foreign_keys")).scalar() == 1  # back on for the pool's connections
        highest = max(r.id for r in queries.list_runs(s))
    with Session.begin() as s:  # the deleted highest run's id is not given again, and its rows went with it
        queries.delete_run(s, highest)
    with Session.begin() as s:
        assert queries.create_run(s, "after-upgrade", {}, 1).id == highest + 1
    with Session.begin() as s:  # the cascade still holds after the rebuild: deleting a run deletes its rows
        s.execute(text("DELETE FROM runs WHERE id = 1"))
    assert _counts(Session)["metrics"] == 0 and _counts(Session)["evaluations"] == 0
    with sqlite3.connect(path) as con:
        schema = dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    assert all("AUTOINCREMENT" in schema[t] for t in ("runs", "evaluations", "run_logs"))
    assert "REFERENCES runs (id) ON DELETE CASCADE" in schema["evaluations"]
    assert not [t for t in schema if t.startswith("_alembic_tmp")]
    engine.dispose()


def test_a_migration_that_fails_leaves_the_database_as_it_was(tmp_path, monkeypatch):
    """Every statement of a migration, its table copies included, is in one transaction: what a process killed
    mid-migration leaves is the old database, which the next start migrates again."""
    import storage.migrate as migrate

    path = _old_database(tmp_path / "old.db")
    with sqlite3.connect(path) as con:
        schema = sorted(con.execute("SELECT name, sql FROM sqlite_master").fetchall(), key=str)

    def killed(connection):
        raise RuntimeError("the process dies here, after every table was copied")

    monkeypatch.setattr(migrate, "_check_foreign_keys", killed)
    with pytest.raises(RuntimeError):
        make_engine(f"sqlite:///{path}")
    with sqlite3.connect(path) as con:
        assert sorted(con.execute("SELECT name, sql FROM sqlite_master").fetchall(), key=str) == schema
    monkeypatch.undo()
    engine = make_engine(f"sqlite:///{path}")
    assert current_revision(engine) == HEAD
    engine.dispose()


def test_a_fork_whose_parent_is_deleted_meanwhile_fails_in_one_sentence_and_leaves_nothing(monkeypatch):
    """The delete lands after the checkpoint is copied and before the fork's row: with ids reused the fork took its
    parent's id and said "forked from run 6" of itself."""
    import shutil

    import trainer.supervise.fork as fork_module
    from app import actions
    from storage.db import data_dir, get_sessionmaker
    from storage.models import RunStatus
    from tests.helpers import tiny_config
    from trainer.supervise.fork import ForkError, fork_run
    from trainer.supervise.run_files import RunFiles

    config = tiny_config(name="parent")
    with get_sessionmaker().begin() as s:
        queries.create_run(s, "older", config.to_dict(), 4)
        parent = queries.create_run(s, "parent", config.to_dict(), 4)
        parent.status = RunStatus.COMPLETED
        files = RunFiles.new(parent.id)
        checkpoint = files.checkpoints / "checkpoint-2"
        checkpoint.mkdir(parents=True)
        (checkpoint / "trainer_state.json").write_text("{}")
        queries.set_output_dir(s, parent, str(files.root))
        parent_id = parent.id
    copy = shutil.copytree

    def copy_then_delete(source, target, **kwargs):
        copied = copy(source, target, **kwargs)
        actions.delete(parent_id)  # another user's Delete, between the copy and the fork's row
        return copied

    monkeypatch.setattr(fork_module.shutil, "copytree", copy_then_delete)
    with pytest.raises(ForkError) as refused:
        fork_run(parent_id, 2, {"beta": 0.02})
    assert str(refused.value) == (
        f"run {parent_id} was deleted while its checkpoint was being copied: nothing was created"
    )
    with get_sessionmaker().begin() as s:
        assert [r.name for r in queries.list_runs(s)] == ["older"]
    assert sorted(p.name for p in (data_dir() / "runs").iterdir() if p.name.startswith(".fork-")) == []
    assert not files.root.exists()
