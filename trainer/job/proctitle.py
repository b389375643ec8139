"""A process's title: its command line as ``ps``, ``pgrep -f`` and ``/proc/PID/cmdline`` show it, rewritten in place.

A worker forked by a warm parent (trainer.job.warm_start) starts with the command line of the process it was forked
from, ``python -m trainer.job.warm_start --pipes R,W 12``: ``ps`` showed run 12's id on every later run's worker, and
on the warm parent (issue 58). Linux reads a command line afresh from the process's argument area each time (the
addresses ``arg_start`` and ``arg_end``, fields 48 and 49 of ``/proc/PID/stat``), so writing a new one there is what
``ps`` shows next. The setproctitle package does that from C; it is no dependency of grpo-studio (and is not installed
where this was written), so the area is written through ``/proc/self/mem``, which a process may write of its own.

The new title must fit in the old area (it is not moved into the environment's, as setproctitle may): a worker's
``python -m trainer.job.worker RUN_ID`` is shorter than the ``python -m trainer.job.warm_start --pipes R,W RUN_ID`` of
the process it was forked from whatever the two run ids, as the ids only grow. A title that does not fit, or a
kernel that refuses the write, leaves the old one and says so (False): the title is for people, nothing reads it.
"""

from __future__ import annotations

import os


def _argument_area() -> tuple[int, int]:
    """``arg_start`` and ``arg_end`` of this process (fields 48 and 49 of /proc/self/stat; the command name, field 2,
    is in parentheses and may hold spaces, so fields are counted after its closing one)."""
    with open("/proc/self/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return int(fields[48 - 3]), int(fields[49 - 3])


def set_title(argv: list[str]) -> bool:
    """Make this process's command line ``argv``; whether it was (see the module docstring)."""
    title = b"\0".join(os.fsencode(arg) for arg in argv) + b"\0"
    try:
        start, end = _argument_area()
        if len(title) > end - start:
            return False
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            memory.write(title.ljust(end - start, b"\0"))  # what is left of the old one: empty arguments
    except (OSError, ValueError, IndexError):
        return False
    return True
