"""The engine and session factory: one of each per process, created on first use.

Where the data lives: ``$GRPO_STUDIO_HOME`` (default ``~/.grpo-studio``) holds the SQLite file, run directories and
the built-in model cache. ``$DATABASE_URL`` overrides the database with any SQLAlchemy URL.

SQLite runs in WAL mode with a busy timeout, because a worker process writes while the dashboard reads; foreign keys
are switched on so deleting a run cascades to its metrics, samples and log.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from storage.migrate import upgrade

# How long a writer waits for a lock held by another process before SQLite raises "database is locked".
BUSY_TIMEOUT_S = 30
POOL_SIZE, MAX_OVERFLOW = 2, 8  # per process, on a database server (see make_engine)

_engine: Engine | None = None
_sessionmaker: sessionmaker[Session] | None = None


def data_dir() -> Path:
    """The data directory (``$GRPO_STUDIO_HOME`` or ``~/.grpo-studio``), created if missing."""
    path = Path(os.environ.get("GRPO_STUDIO_HOME") or Path.home() / ".grpo-studio").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_export_dir() -> Path:
    """A fresh directory under ``<data dir>/exports`` for one download (a config, an adapter zip, a merged model).
    Everything the dashboard writes for a user stays under the data dir, in a directory of its own."""
    root = data_dir() / "exports"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=root))


def slug(text: str, fallback: str = "run") -> str:
    """A file-name-safe version of a user-given name: letters, digits, ``.-_`` only, no leading dot, at most 60
    characters. File names are derived from this, never from the raw name (``../../x`` becomes ``x``)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-_")[:60].strip(".-_")
    return cleaned or fallback


DEFAULT_DATABASE = "grpo-studio.db"  # the data dir's own database, where DATABASE_URL names none


def database_url() -> str:
    """``$DATABASE_URL`` if set, else the SQLite file in the data directory."""
    return os.environ.get("DATABASE_URL") or f"sqlite:///{data_dir() / DEFAULT_DATABASE}"


def _configure_sqlite(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
    cursor.execute("PRAGMA foreign_keys=ON")
    # WAL makes NORMAL durable against application crashes (a SIGKILLed worker loses nothing it committed).
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or an in-memory one)."""
    if not url.startswith("sqlite:///") or url.endswith(":memory:"):
        return None
    return Path(url.removeprefix("sqlite:///").split("?", 1)[0])


def file_identity(path: Path | None) -> tuple[int, int] | None:
    """(device, inode) of a database file, or None when there is none at ``path``: a worker compares it at each
    heartbeat with the file it opened, since SQLite writes on into a file that was moved or replaced."""
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _missing_database_problem(path: Path | None) -> str | None:
    """Why the data dir's own database (``grpo-studio.db``) must not be created afresh: it is missing beside run
    directories (it was moved or deleted; a new empty one said "No runs yet" beside live runs' files). Another file
    named by ``DATABASE_URL`` is the operator's choice: a new one is created as asked."""
    if path is None or path.exists() or path.resolve() != (data_dir() / DEFAULT_DATABASE).resolve():
        return None
    runs = data_dir() / "runs"
    found = [p for p in runs.iterdir() if p.is_dir() and p.name[:1].isdigit()] if runs.is_dir() else []
    if not found:
        return None
    return (
        f"there is no database at {path}, but {runs} holds {len(found)} run directories: the database was moved or "
        f"deleted. Put it back (with its -wal and -shm files), or point DATABASE_URL at it; to start an empty "
        f"database instead, move {runs} away first"
    )


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with grpo-studio's SQLite settings; the schema is created or upgraded in place. A database that
    can't be opened raises :class:`StorageError` with one sentence saying what to do."""
    kwargs: dict = {}
    if problem := _missing_database_problem(sqlite_path(url)):
        raise StorageError(problem)
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
    else:  # a server may close idle connections (a dashboard left open overnight): test before use
        kwargs["pool_pre_ping"] = True
        # Few connections kept open per process: each worker holds at most POOL_SIZE idle (its steps and its writer
        # thread), so PostgreSQL's default max_connections of 100 serves ~45 runs at once; bursts (the dashboard's
        # concurrent handlers) open up to MAX_OVERFLOW more, closed when returned.
        kwargs["pool_size"], kwargs["max_overflow"] = POOL_SIZE, MAX_OVERFLOW
    try:
        engine = create_engine(url, **kwargs)
    except (ArgumentError, ImportError) as exc:
        raise StorageError(
            f"DATABASE_URL is not a usable database URL ({exc}); e.g. sqlite:////path/to/file.db"
        ) from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _configure_sqlite)
    try:
        upgrade(engine)  # creates the schema, or brings an older one up to date (storage/migrate.py)
    except SQLAlchemyError as exc:
        engine.dispose()
        raise StorageError(describe_error(exc, engine)) from None
    return engine


class StorageError(RuntimeError):
    """The database can't be used; the message says what is wrong, where, and what to do."""


def describe_error(exc: BaseException, engine: Engine | None = None) -> str:
    """One sentence for a database failure, without the SQL statement SQLAlchemy appends to its messages."""
    reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
    url = (engine or _engine).url if (engine or _engine) is not None else None
    where = (url.database if url is not None and url.drivername.startswith("sqlite") else None) or (
        url.render_as_string(hide_password=True) if url is not None else "in use"
    )
    lowered = reason.lower()
    if "malformed" in lowered or "not a database" in lowered or "file is encrypted" in lowered:
        return (
            f"the database {where} is damaged ({reason}): stop grpo-studio and move the file aside (a new one is "
            "created on the next start), or restore a backup"
        )
    if "disk is full" in lowered or "no space" in lowered:
        return f"the disk holding the database {where} is full ({reason}): free some space, then try again"
    if "disk i/o error" in lowered:
        # SQLite reports a write that found no room in its -wal or -shm file as an I/O error, not as a full disk
        free = _free_bytes(url.database if url is not None and url.drivername.startswith("sqlite") else None)
        if free is not None and free < LOW_DISK_BYTES:
            return (
                f"the disk holding the database {where} is full ({free // 1024} KB free; SQLite said {reason}): free "
                "some space, then try again"
            )
        return f"the disk holding the database {where} failed to read or write ({reason}): check the disk and its free space"
    if "unable to open" in lowered or "readonly" in lowered or "permission" in lowered:
        return f"the database {where} can't be opened for writing ({reason}): check that its directory exists and is writable"
    if "too many clients" in lowered or "remaining connection slots" in lowered:
        return (
            f"the database server {where} refuses more connections ({reason}): each running worker holds up to "
            f"{POOL_SIZE}; raise the server's max_connections, or run fewer at once"
        )
    if "locked" in lowered:
        return f"the database {where} is locked by another process ({reason}): try again in a moment"
    return f"the database {where} failed: {reason}"


# What a database says when waiting cures it: SQLite busy or locked by another process, a PostgreSQL server that
# dropped the connection (restarted, failed over) or is not accepting connections yet.
_TRANSIENT = (
    "database is locked",
    "database table is locked",
    "database is busy",
    "connection refused",
    "server closed the connection",
    "terminating connection",
    "could not connect",
    "connection failed",
    "connection is closed",
    "connection timed out",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
)


LOW_DISK_BYTES = 1 << 20  # below this much room, an I/O error of SQLite's is a full disk


def _free_bytes(database: str | None) -> int | None:
    """The room left on the file system of a SQLite ``database`` file (None for another database, or none to ask)."""
    if not database or database == ":memory:":
        return None
    try:
        return shutil.disk_usage(Path(database).resolve().parent).free
    except (OSError, ValueError, RuntimeError):  # a NUL in the path, a loop of links: no figure, not a second error
        return None


def is_transient(exc: BaseException) -> bool:
    """Whether a database failure is one that waiting cures (see ``_TRANSIENT``), as opposed to one that a retry
    would only repeat: a full disk, a damaged file, a constraint."""
    from sqlalchemy.exc import DBAPIError, DisconnectionError

    if isinstance(exc, DisconnectionError) or (isinstance(exc, DBAPIError) and exc.connection_invalidated):
        return True
    if not isinstance(exc, DBAPIError) or type(exc).__name__ not in ("OperationalError", "InterfaceError"):
        return False
    text = str(exc.orig or exc).lower()
    return "disk is full" not in text and any(words in text for words in _TRANSIENT)


def retry_transient(action, deadline: float, what: str, wait_cap: float = 5.0):
    """``action()`` (which opens its own transaction), tried again with backoff while it fails with a transient error
    and ``time.monotonic()`` is before ``deadline``; returns its result or raises the last error. For the few writes
    a worker makes outside its writer thread (the backend line, a resume's dropped steps, the final status)."""
    import logging
    import time

    delay, waited_since = 0.25, None
    while True:
        try:
            result = action()
        except Exception as exc:
            if not is_transient(exc) or time.monotonic() >= deadline:
                raise
            if waited_since is None:
                waited_since = time.monotonic()
                logging.getLogger(__name__).warning("writing %s: %s; retrying", what, describe_error(exc))
            time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
            delay = min(delay * 2, wait_cap)
            continue
        if waited_since is not None:
            logging.getLogger(__name__).warning(
                "wrote %s after waiting %.0f s for the database", what, time.monotonic() - waited_since
            )
        return result


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
