"""The clock both sides of bench/overhead.py train under: the same code times each side's training loop.

``install()`` (called first thing in each side's process) starts bench/gc_timer.py's count and hooks transformers'
callback handler, which every Trainer calls: at ``on_train_begin`` it waits at the barrier when ``BENCH_BARRIER`` names
a folder (both sides of a paired round start training together), then starts the clock; at ``on_train_end`` it prints
one line ``TRAIN {"seconds": ..}`` to stderr. The training loop proper: every step with every callback and log, not
the process start, model load or trainer construction, nor the wait at the barrier (which TRL's own
``train_runtime`` would include: Trainer starts that clock before ``on_train_begin``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import gc_timer

PARTIES = 2
BARRIER_TIMEOUT = 900.0


def install() -> None:
    """Count GC time and time the training loop of this process (see the module docstring)."""
    gc_timer.install()
    from transformers.trainer_callback import CallbackHandler

    begin, end = CallbackHandler.on_train_begin, CallbackHandler.on_train_end
    started = [0.0]

    def on_train_begin(self, args, state, control):
        control = begin(self, args, state, control)  # the callbacks' own begin work is setup, on both sides
        if os.environ.get("BENCH_BARRIER"):
            wait_at_barrier(Path(os.environ["BENCH_BARRIER"]))
        started[0] = time.perf_counter()
        return control

    def on_train_end(self, args, state, control):
        control = end(self, args, state, control)
        print("TRAIN " + json.dumps({"seconds": time.perf_counter() - started[0]}), file=sys.stderr, flush=True)
        return control

    CallbackHandler.on_train_begin, CallbackHandler.on_train_end = on_train_begin, on_train_end


def wait_at_barrier(folder: Path) -> None:
    """Mark this process as ready in ``folder`` and return once :data:`PARTIES` processes are."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(os.getpid())).touch()
    deadline = time.monotonic() + BARRIER_TIMEOUT
    while len(list(folder.iterdir())) < PARTIES:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other side never reached the barrier in {folder}")
        time.sleep(0.005)


def parse(stderr: str) -> float:
    """The training-loop seconds a process printed."""
    lines = [line for line in stderr.splitlines() if line.startswith("TRAIN {")]
    if not lines:
        raise RuntimeError("the process printed no TRAIN line:\n" + stderr[-3000:])
    return json.loads(lines[-1][6:])["seconds"]
