"""Time spent in the garbage collector by a whole process, for bench/overhead.py to print beside each side's step time.

``install()`` hooks ``gc.callbacks`` and, at exit, prints one line ``GC {"seconds": .., "full": ..}`` to stderr
(``full``: generation-2 collections, the ones that walk every object, so a process holding more objects pays more).
"""

from __future__ import annotations

import atexit
import gc
import json
import sys
import time

_totals = {"seconds": 0.0, "full": 0}
_started = [0.0]


def _callback(phase: str, info: dict) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    _totals["seconds"] += time.perf_counter() - _started[0]
    _totals["full"] += info["generation"] == 2


def install() -> None:
    """Start counting; the totals are printed when the process exits."""
    gc.callbacks.append(_callback)
    atexit.register(lambda: print("GC " + json.dumps(_totals), file=sys.stderr, flush=True))


def parse(stderr: str) -> dict:
    """The totals a process printed (zeros when it printed none)."""
    lines = [line for line in stderr.splitlines() if line.startswith("GC {")]
    return json.loads(lines[-1][3:]) if lines else {"seconds": 0.0, "full": 0}
