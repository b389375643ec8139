"""Batched database writes for the worker: a background thread that writes what the training loop hands it, several
items per transaction.

A training step only appends to a deque, so a slow disk or a dashboard holding a read never stalls it; the thread
wakes once a second (``flush_interval``) and writes what has piled up, or at once when someone waits for a flush
(before a checkpoint: see the callback's ``on_log``). Appending does not wake the thread: with a queue, each of the
three items a step hands over woke it, a context switch and a GIL hand-over in the middle of TRL's step; now it runs
once a second, about 3.5 ms of CPU per training step of the demo (bench/overhead.py, issue 17). A failed write is kept and raised from :meth:`DbWriter.close`, so the run fails
visibly instead of silently losing data.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from storage import queries, series
from storage.db import get_sessionmaker
from storage.models import CHUNK_STEPS

log = logging.getLogger(__name__)

RECENT_SAMPLE_STEPS = 100  # the latest steps always keep every sample (what the Monitor's table mostly shows)


@dataclass
class _Batch:
    metrics: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)
    progress: tuple[int, int | None] | None = None
    flushed: list[threading.Event] = field(default_factory=list)


class DbWriter:
    """A background thread that writes what the training loop hands it, several items per transaction (see the module
    docstring)."""

    def __init__(self, run_id: int, flush_interval: float = 1.0, keep_samples_every: int = 1) -> None:
        self.run_id = run_id
        self.flush_interval = flush_interval
        self.keep_samples_every = keep_samples_every  # retention: see RunConfig.keep_samples_every
        self._pruned_up_to = 0
        self._packed_block = -1  # the newest block of steps whose earlier blocks are packed (storage/series.py)
        self._pending: deque[tuple[str, Any] | None] = deque()  # append and popleft are atomic: no lock needed
        self._wake = threading.Event()  # set by flush() and close() only
        self._error: BaseException | None = None
        self.cpu_seconds = 0.0  # the thread's own CPU time (time.thread_time); bench/overhead.py reports it per step
        self._thread = threading.Thread(target=self._loop, name=f"db-writer-{run_id}", daemon=True)
        self._thread.start()

    def metrics(self, rows: list[dict]) -> None:
        """Queue metric rows (see :func:`storage.queries.metric_rows`)."""
        self._pending.append(("metrics", rows))

    def samples(self, rows: list[dict]) -> None:
        """Queue completion sample rows."""
        self._pending.append(("samples", rows))

    def progress(self, step: int, total: int | None = None) -> None:
        """Queue a progress update of the run row."""
        self._pending.append(("progress", (step, total)))

    def log(self, message: str, level: str = "INFO") -> None:
        """Queue a line for the run's log."""
        self._pending.append(("log", (message, level)))

    def flush(self, timeout: float = 60.0) -> None:
        """Block until everything queued so far is committed (before a checkpoint: see the callback's on_log)."""
        done = threading.Event()
        self._pending.append(("flush", done))
        self._wake.set()
        done.wait(timeout)

    def close(self) -> None:
        """Write everything still queued, stop the thread, and raise the first write error if there was one."""
        self._pending.append(None)
        self._wake.set()
        self._thread.join()
        log.info("database writer: %.3f s of CPU time", self.cpu_seconds)
        if self._error is not None:
            raise RuntimeError(f"writing to the database failed: {self._error}") from self._error

    def _loop(self) -> None:
        started = time.thread_time()
        done = False
        while not done:
            self._wake.wait(self.flush_interval)
            self._wake.clear()  # before draining: an item appended before a later set() is drained now or next time
            batch = _Batch()
            while self._pending:
                item = self._pending.popleft()
                if item is None:
                    done = True
                    break
                self._add(batch, item)
            try:
                self._write(batch)
            except Exception as exc:  # keep draining so close() returns; report the error there
                log.exception("database write failed")
                self._error = self._error or exc
            self.cpu_seconds = time.thread_time() - started
            for event in batch.flushed:
                event.set()

    def _prune(self, session, newest_step: int) -> None:
        """Thin out samples older than the latest RECENT_SAMPLE_STEPS, once per RECENT_SAMPLE_STEPS steps."""
        before = newest_step - RECENT_SAMPLE_STEPS
        if before >= self._pruned_up_to + RECENT_SAMPLE_STEPS:
            queries.prune_samples(session, self.run_id, before, self.keep_samples_every)
            self._pruned_up_to = before

    @staticmethod
    def _add(batch: _Batch, item: tuple[str, Any]) -> None:
        kind, payload = item
        if kind == "metrics":
            batch.metrics.extend(payload)
        elif kind == "samples":
            batch.samples.extend(payload)
        elif kind == "log":
            batch.logs.append(payload)
        elif kind == "flush":
            batch.flushed.append(payload)
        else:
            step, total = payload
            old_total = batch.progress[1] if batch.progress else None
            batch.progress = (step, total if total is not None else old_total)

    def _write(self, batch: _Batch) -> None:
        if not (batch.metrics or batch.samples or batch.logs or batch.progress):
            return
        with get_sessionmaker().begin() as session:
            queries.add_metric_rows(session, batch.metrics)
            if batch.metrics:
                newest = max(row["step"] for row in batch.metrics)
                if newest // CHUNK_STEPS > self._packed_block:
                    series.write_chunks(session, self.run_id, newest)
                    self._packed_block = newest // CHUNK_STEPS
            queries.add_sample_rows(session, batch.samples)
            if batch.samples and self.keep_samples_every > 1:
                self._prune(session, max(row["step"] for row in batch.samples))
            for message, level in batch.logs:
                queries.add_log(session, self.run_id, message, level)
            if batch.progress:
                queries.set_progress(session, self.run_id, *batch.progress)
