"""A database that disappears is noticed (issue 35 item 5): a worker whose SQLite file is moved away (with its -wal
and -shm) notices at its next heartbeat that the file is no longer the one it opened and ends the run with one
sentence; a command that finds run directories but no database says so instead of creating an empty one."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import queries
from storage.db import StorageError, get_sessionmaker, make_engine, reset_engine
from tests.helpers import wait_for


def test_a_worker_notices_its_database_file_moved_away(database, tmp_path):
    from trainer.job.db_writer import DbWriter

    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "moved", {}, 4).id
    writer = DbWriter(run_id, flush_interval=0.05, heartbeat_seconds=0.05)
    try:
        wait_for(lambda: writer._last_beat > 0, 10, "the first heartbeat")
        assert writer.moved is None
        path = Path(database.removeprefix("sqlite:///"))
        away = tmp_path / "moved-away"
        away.mkdir()
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{path}{suffix}").exists():
                Path(f"{path}{suffix}").rename(away / f"{path.name}{suffix}")
        wait_for(lambda: writer.moved, 10, "the writer to notice")
        assert writer.moved == (
            f"the database file {path} is gone while the run trained (moved or deleted): the run stopped, its last "
            "rows are in the file it had opened; put that file back to see them"
        )
    finally:
        writer.close()


def test_the_run_error_is_that_sentence(tmp_path):
    from trainer.job.db_writer import DatabaseMoved
    from trainer.job.worker import failure_sentence
    from trainer.supervise.run_files import RunFiles

    files = RunFiles(tmp_path / "runs" / "1-abcd")
    files.root.mkdir(parents=True)
    assert failure_sentence(DatabaseMoved("the database file x is gone"), files, 1) == "the database file x is gone"


def test_a_missing_database_beside_run_directories_is_not_created_afresh(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    (home / "runs" / "6-0a1b2c3d").mkdir(parents=True)
    monkeypatch.setenv("GRPO_STUDIO_HOME", str(home))
    monkeypatch.delenv("DATABASE_URL")
    reset_engine()
    said = (
        f"there is no database at {home / 'grpo-studio.db'}, but {home / 'runs'} holds 1 run directories: the "
        "database was moved or deleted. Put it back (with its -wal and -shm files), or point DATABASE_URL at it; "
        f"to start an empty database instead, move {home / 'runs'} away first"
    )
    with pytest.raises(StorageError) as refused:
        make_engine(f"sqlite:///{home / 'grpo-studio.db'}")
    assert str(refused.value) == said
    from app.cli.main import main

    assert main(["runs"]) != 0
    assert said in capsys.readouterr().err
    assert not (home / "grpo-studio.db").exists()
    reset_engine()


def test_a_new_data_dir_still_gets_its_database(tmp_path):
    home = tmp_path / "fresh"
    home.mkdir()
    engine = make_engine(f"sqlite:///{home / 'grpo-studio.db'}")
    engine.dispose()
    assert (home / "grpo-studio.db").is_file()
