"""What ``grpo-studio serve`` checks before it says "open http://...": that no other dashboard serves the same
database, and that its port is free.

One dashboard per database: each dashboard's scheduler starts queued runs up to its own ``--max-concurrent-runs``,
so two on one database would start two runs where each allows one. The first one claims the database with a lock
file under the data dir holding its pid and address (``dashboard.lock``, or ``dashboard-<hash>.lock`` for a
``$DATABASE_URL``); a second one is refused, naming them. A lock whose pid is gone (a dashboard killed with -9) is
stale and taken over. A port another program listens on is refused in one sentence naming a free one, instead of
Gradio's traceback and its advice about ``GRADIO_SERVER_PORT``.

Nothing here imports Gradio: ``serve`` says each of these refusals (and a malformed ``--auth`` or
``--max-upload-size``) before it imports the dashboard, which took 88-116 s on a machine at load 23 (issue 58.8).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import socket
from pathlib import Path

from storage.db import data_dir


class ServeRefused(Exception):
    """A dashboard that must not start; the message is one sentence for the operator."""


def lock_path() -> Path:
    """The lock file of the database this process uses."""
    url = os.environ.get("DATABASE_URL", "").strip()
    name = f"dashboard-{hashlib.sha256(url.encode()).hexdigest()[:12]}.lock" if url else "dashboard.lock"
    return data_dir() / name


def claim(host: str, port: int) -> Path:
    """Claim this database for this process's dashboard at ``host:port``; raises :class:`ServeRefused` naming the
    dashboard that holds it. Returns the lock file (:func:`release` gives it back)."""
    path = lock_path()
    mine = json.dumps({"pid": os.getpid(), "host": host, "port": port})
    for _ in range(3):  # a stale lock is removed, then claimed again; another process may win that race
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = _holder(path)
            if holder and _alive(holder["pid"]) and holder["pid"] != os.getpid():
                shown = _address(holder.get("host", "127.0.0.1"), holder.get("port", "?"))
                # (never the URL itself: it may hold a password)
                where = "the database $DATABASE_URL names" if os.environ.get("DATABASE_URL") else data_dir()
                raise ServeRefused(
                    f"another dashboard (pid {holder['pid']}, {shown}) already serves {where}: open that one, or stop "
                    "it first (two would each start runs up to their own limit)"
                ) from None
            path.unlink(missing_ok=True)  # stale: its dashboard is gone
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(mine)
        return path
    raise ServeRefused(f"could not claim {path}: another dashboard is starting on this data dir right now")


def release(path: Path) -> None:
    """Give the lock back, if it is still this process's."""
    holder = _holder(path)
    if holder and holder["pid"] == os.getpid():
        path.unlink(missing_ok=True)


def port_problem(host: str, port: int) -> str | None:
    """One sentence when ``host:port`` can't be listened on (another program has it), naming a free port."""
    try:
        _bind(host, port)
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
            return f"can't listen on {host}:{port} ({exc.strerror}): check --host"
        taken = "is taken by another program" if exc.errno == errno.EADDRINUSE else "needs root privileges"
        free = next((p for p in range(port + 1, min(port + 200, 65536)) if _free(host, p)), None)
        hint = f"try --port {free} (free now)" if free else "try another --port"
        return f"port {port} on {host} {taken}: {hint}"
    return None


def _bind(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # as uvicorn binds: a port whose last connections linger in TIME_WAIT is free for it
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


def _free(host: str, port: int) -> bool:
    try:
        _bind(host, port)
    except OSError:
        return False
    return True


def _holder(path: Path) -> dict | None:
    try:
        holder = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) and isinstance(holder.get("pid"), int) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _address(host: str, port: object) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://{shown}:{port}/"


def parse_auth(value: str | None) -> tuple[str, str] | None:
    """ "user:password" → (user, password); None for no auth. Raises ValueError for a malformed value."""
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise ValueError("auth must look like user:password")
    return user, password


def parse_size(text: str) -> int:
    """ "1GB", "500 MB", "2g", "1000000" → bytes; raises ValueError with what is expected."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a size: expected e.g. 500MB, 1GB or a number of bytes")
    return int(float(match.group(1)) * 1000 ** " kmgt".index(match.group(2) or " "))
