"""Bringing a database to the current schema, in place, on first use by any grpo-studio process.

Alembic owns the schema (``storage/migrations/versions``, one revision per change; the first is the 0.1 release's
schema). A database created by 0.1 has the tables but no ``alembic_version``: it is stamped with revision 0001 and
then upgraded, so nothing in it is touched except by later revisions.

Several processes may start at once (the dashboard and a worker), so migrating happens under a lock: a file lock
beside a SQLite database, an advisory lock on PostgreSQL. The common case, a database already at ``HEAD``, is one
query and does not import Alembic (a worker's start-up stays fast).
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, inspect, text

HEAD = "0010"  # the newest revision; tests/storage/test_migrations.py checks it against Alembic's own view
BASELINE = "0001"  # the 0.1 schema, which databases from before migrations already have
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_ADVISORY_LOCK_ID = 0x6772706F  # "grpo"


def upgrade(engine: Engine) -> None:
    """Create or upgrade the schema of ``engine``'s database to ``HEAD``."""
    if current_revision(engine) == HEAD:
        return
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with _lock(engine), engine.connect() as connection, _sqlite_rebuildable(connection):
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _ADVISORY_LOCK_ID})
            else:
                # One transaction for every statement, the DDL included (Python's sqlite3 begins one only before
                # INSERT/UPDATE/DELETE, so a table copy could be left half done): a process killed mid-migration
                # leaves the database as it was.
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            config.attributes["connection"] = connection
            tables = inspect(connection).get_table_names()
            if "runs" in tables and "alembic_version" not in tables:
                command.stamp(config, BASELINE)
            command.upgrade(config, "head")
            _check_foreign_keys(connection)


@contextlib.contextmanager
def _sqlite_rebuildable(connection) -> Iterator[None]:
    """Foreign keys off for the migration on SQLite: rebuilding a table drops the old copy, and dropping ``runs``
    with foreign keys on would delete every row that belongs to a run (ON DELETE CASCADE). SQLite reads this pragma
    only outside a transaction; they are turned on again before the connection goes back to the pool."""
    if connection.dialect.name != "sqlite":
        yield
        return
    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
    connection.commit()  # ends SQLAlchemy's own bookkeeping; sqlite3 began no transaction for a pragma
    try:
        yield
    finally:
        connection.exec_driver_sql("PRAGMA foreign_keys=ON")
        connection.commit()


def _check_foreign_keys(connection) -> None:
    """Every row still belongs to a run that exists (checked before the migration commits, since foreign keys were
    off while it ran); a violation rolls the migration back."""
    if connection.dialect.name != "sqlite":
        return
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"the migration left {len(broken)} rows whose run does not exist; nothing was changed")


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None for an empty database or one from before migrations)."""
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


@contextlib.contextmanager
def _lock(engine: Engine) -> Iterator[None]:
    """A file lock beside a SQLite database (PostgreSQL locks in the transaction itself)."""
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:":
        yield
        return
    with open(f"{database}.migrate-lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
