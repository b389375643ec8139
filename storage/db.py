"""The engine and session factory: one of each per process, created on first use.

Where the data lives: ``$GRPO_STUDIO_HOME`` (default ``~/.grpo-studio``) holds the SQLite file, run directories and
the built-in model cache. ``$DATABASE_URL`` overrides the database with any SQLAlchemy URL.

SQLite runs in WAL mode with a busy timeout, because a worker process writes while the dashboard reads; foreign keys
are switched on so deleting a run cascades to its metrics, samples and log.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from storage.models import Base

# How long a writer waits for a lock held by another process before SQLite raises "database is locked".
BUSY_TIMEOUT_S = 30

_engine: Engine | None = None
_sessionmaker: sessionmaker[Session] | None = None


def data_dir() -> Path:
    """The data directory (``$GRPO_STUDIO_HOME`` or ``~/.grpo-studio``), created if missing."""
    path = Path(os.environ.get("GRPO_STUDIO_HOME") or Path.home() / ".grpo-studio").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_url() -> str:
    """``$DATABASE_URL`` if set, else the SQLite file in the data directory."""
    return os.environ.get("DATABASE_URL") or f"sqlite:///{data_dir() / 'grpo-studio.db'}"


def _configure_sqlite(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
    cursor.execute("PRAGMA foreign_keys=ON")
    # WAL makes NORMAL durable against application crashes (a SIGKILLed worker loses nothing it committed).
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with grpo-studio's SQLite settings; the schema is created if missing."""
    kwargs: dict = {}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
    engine = create_engine(url, **kwargs)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _configure_sqlite)
    Base.metadata.create_all(engine)
    return engine


def get_engine() -> Engine:
    """The process-wide engine, created (with the schema) on first use."""
    global _engine
    if _engine is None:
        _engine = make_engine(database_url())
    return _engine


def get_sessionmaker() -> sessionmaker[Session]:
    """The process-wide session factory; use as ``with get_sessionmaker().begin() as s:``."""
    global _sessionmaker
    if _sessionmaker is None:
        _sessionmaker = sessionmaker(get_engine(), expire_on_commit=False)
    return _sessionmaker


def reset_engine() -> None:
    """Forget the process-wide engine (after changing ``$DATABASE_URL`` or ``$GRPO_STUDIO_HOME``, e.g. in tests)."""
    global _engine, _sessionmaker
    if _engine is not None:
        _engine.dispose()
    _engine = None
    _sessionmaker = None
