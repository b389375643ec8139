"""A process, by pid: whether it exists, whether it is still the one that was recorded, and when it started.

Standard library only: the GPU lease's holder check and the worker's own start-up use these, as the launcher does.
Whether a process is alive is decided from its pid *and* its start time (from /proc), because pids get reused.
"""

from __future__ import annotations

import os
from pathlib import Path


def process_exists(pid: int) -> bool:
    """Whether ``pid`` names a process (signal 0 probes without sending; a process of another user exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start_time(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (from /proc); None where /proc is not available."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def pid_alive(pid: int, started: str | None = None) -> bool:
    """True if ``pid`` is a live (not zombie) process and, given ``started``, the same process that was recorded."""
    if not process_exists(pid):
        return False
    _reap(pid)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): trust kill(0)
        return True
    return fields[0] != "Z" and (started is None or fields[19] == started)


def _reap(pid: int) -> None:
    """Collect the exit status of a worker this process started, so it doesn't linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
