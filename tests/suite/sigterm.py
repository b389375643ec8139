"""SIGTERM ends the test run at once and takes the processes its tests started with it.

Without this, a SIGTERM to pytest (CI's time limit, a developer's ``kill``) could leave it running: a test that trains
in its own process installs the worker's stop handler, which turns SIGTERM into "stop at the next step", and the
workers, servers and browsers the tests start are detached (their own sessions) and outlive pytest by design. The
handler below is put back after every test, and on SIGTERM it kills every descendant of this process, each in its
process group, then exits with 143 (128 + SIGTERM), as an unhandled SIGTERM would.

Handlers that tests install for SIGTERM are recorded instead of installed (:func:`_keep_ours`): no test sends SIGTERM
to its own pytest process (tests that stop a worker signal the worker's process).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``, from /proc (children before their own children)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def _end_everything(signum, frame) -> None:
    for pid in descendants(os.getpid()):
        for kill, target in ((os.killpg, _group(pid)), (os.kill, pid)):
            if target is not None and target != os.getpgrp():
                try:
                    kill(target, signal.SIGKILL)
                except OSError:
                    pass
    os._exit(128 + signal.SIGTERM)


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


_install = signal.signal


def _keep_ours(signum, handler):
    """``signal.signal`` in the test process: a SIGTERM handler a test installs (a foreground run's "stop at the next
    step") is taken note of but ours stays: no test signals its own pytest process, so a SIGTERM here always comes
    from outside and means "end the run"."""
    if signum == signal.SIGTERM and handler is not _end_everything:
        previous, _installed[0] = _installed[0], handler
        return previous
    return _install(signum, handler)


_installed: list = [signal.SIG_DFL]


def pytest_sessionstart(session) -> None:
    _install(signal.SIGTERM, _end_everything)
    signal.signal = _keep_ours
