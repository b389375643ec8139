"""Batched database writes for the worker: a background thread that writes what the training loop hands it, several
items per transaction, and keeps every row until it is committed.

A training step only appends to a deque, so a slow disk or a dashboard holding a read never stalls it; the thread
wakes once a second (``flush_interval``) and writes what has piled up, or at once when someone waits for a flush
(before a checkpoint: see the callback's ``on_log``). Appending does not wake the thread: with a queue, each of the
three items a step hands over woke it, a context switch and a GIL hand-over in the middle of TRL's step; now it runs
once a second, about 3.5 ms of CPU per training step of the demo (bench/overhead.py, issue 17).

When the database does not answer (SQLite locked by another process, a PostgreSQL server restarting: see
:func:`storage.db.is_transient`) nothing is dropped (issue 23): the items stay held (:mod:`trainer.job.held_rows`),
in memory up to ``memory_rows`` and then in a file in the run directory, and the thread tries again with backoff for
as long as the run trains and up to ``grace_seconds`` after :meth:`DbWriter.close`. When a write goes through, all
of it goes in one transaction, in the order it was handed over, and the run's log says how long the database was
away and how many rows were held. A flush during an outage returns once the rows are in the file, so a checkpoint
does not wait for the database. An attempt on SQLite waits at most ``ATTEMPT_BUSY_MS`` for the lock (instead of the
engine's 30 s), so a flush or close is answered within about a second.

Any other failed write (a full disk, a constraint) is not retried: it is kept and raised from close(), so the run
fails visibly instead of silently losing data.

The thread is also the worker's heartbeat: every ``heartbeat_seconds`` it stamps the run row, whatever the training
loop is doing, so a reader tells a frozen worker (no heartbeat, no step) from a slow step (app/actions/liveness.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from storage import learning, queries, series
from storage.db import BUSY_TIMEOUT_S, file_identity, get_engine, get_sessionmaker, is_transient
from storage.models import CHUNK_STEPS
from trainer.job.held_rows import HeldRows, Item

log = logging.getLogger(__name__)

RECENT_SAMPLE_STEPS = 100  # the latest steps always keep every sample (what the Monitor's table mostly shows)
HEARTBEAT_SECONDS = 5.0  # readers call a run stalled after several missed beats (app/actions/liveness.py)
MEMORY_ROWS = 20_000  # rows held in memory during an outage before they go to the file: ~10 MB of GSM8K samples
GRACE_SECONDS = 600.0  # how long close() keeps trying after training ended
ATTEMPT_BUSY_MS = 1000  # one SQLite attempt's wait for a lock; the backoff between attempts does the rest
MAX_BACKOFF_SECONDS = 5.0
# tables the writer also fills, by name (rows handed over as JSON values: they may wait in the spill file)
TABLES = {
    "sample_tokens": learning.add_token_rows,
    "heldout_results": learning.add_heldout_rows,
    "curriculum_steps": learning.add_curriculum_rows,
}


class DatabaseMoved(RuntimeError):
    """The worker's SQLite file was moved, deleted or replaced while it trained; the message is the run's error."""


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


@dataclass
class _Batch:
    metrics: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)
    tables: dict[str, list[dict]] = field(default_factory=dict)  # table name → rows (TABLES)
    progress: tuple | None = None  # (step, total or None, ended at (epoch seconds), median step seconds or None)

    def add(self, item: Item) -> None:
        kind, payload = item
        if kind == "metrics":
            self.metrics.extend(payload)
        elif kind == "samples":
            self.samples.extend(payload)
        elif kind == "log":
            self.logs.append(tuple(payload))
        elif kind == "rows":
            table, rows = payload
            self.tables.setdefault(table, []).extend(rows)
        else:
            step, total, when, pace = payload
            old_total = self.progress[1] if self.progress else None
            self.progress = (step, total if total is not None else old_total, when, pace)


@dataclass
class _Outage:
    """Since when writes fail, why, and the most rows held at once."""

    since: float
    reason: str
    most_rows: int = 0
    spilled: int = 0


class DbWriter:
    """A background thread that writes what the training loop hands it, several items per transaction, and holds
    them through an outage (see the module docstring). ``spill_path``: the file for rows past ``memory_rows``."""

    def __init__(
        self,
        run_id: int,
        flush_interval: float = 1.0,
        keep_samples_every: int = 1,
        spill_path: Path | None = None,
        memory_rows: int | None = None,
        grace_seconds: float | None = None,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.run_id = run_id
        self.flush_interval = flush_interval
        self.keep_samples_every = keep_samples_every  # retention: see RunConfig.keep_samples_every
        # GRPO_STUDIO_WRITER_MEMORY_ROWS / _GRACE_S: for tests that make an outage spill or give up quickly
        rows = memory_rows if memory_rows is not None else _env_float("GRPO_STUDIO_WRITER_MEMORY_ROWS", MEMORY_ROWS)
        self.grace_seconds = (
            grace_seconds if grace_seconds is not None else _env_float("GRPO_STUDIO_WRITER_GRACE_S", GRACE_SECONDS)
        )
        self.heartbeat_seconds = heartbeat_seconds
        self._held = HeldRows(spill_path, int(rows))
        self._outage: _Outage | None = None
        self._backoff = 0.25
        self._pruned_up_to = 0
        self._packed_block = -1  # the newest block of steps whose earlier blocks are packed (storage/series.py)
        self._step_ends: deque[tuple[int, float]] = deque(maxlen=11)  # (step, when it ended): the pace of steps
        self._last_beat = -float("inf")
        self._pending: deque[Item | None] = deque()  # append and popleft are atomic: no lock needed
        self._wake = threading.Event()  # set by flush() and close() only
        self._deadline: float | None = None  # set by close(): when to stop retrying
        self._error: BaseException | None = None
        self.cpu_seconds = 0.0  # the thread's own CPU time (time.thread_time); bench/overhead.py reports it per step
        engine = get_engine()
        self._database = Path(engine.url.database) if engine.dialect.name == "sqlite" and engine.url.database else None
        self._identity = file_identity(self._database)
        self.moved: str | None = None  # set when the database file is no longer the one opened (see _check_file)
        self._thread = threading.Thread(target=self._loop, name=f"db-writer-{run_id}", daemon=True)
        self._thread.start()

    def metrics(self, rows: list[dict]) -> None:
        """Queue metric rows (see :func:`storage.queries.metric_rows`)."""
        self._pending.append(("metrics", rows))

    def samples(self, rows: list[dict]) -> None:
        """Queue completion sample rows."""
        self._pending.append(("samples", rows))

    def rows(self, table: str, rows: list[dict]) -> None:
        """Queue rows of one of the tables of :data:`TABLES` (the learning views' per-problem and per-token rows)."""
        if table not in TABLES:
            raise ValueError(f"no table {table!r} for the writer; expected one of {', '.join(TABLES)}")
        if rows:
            self._pending.append(("rows", [table, rows]))

    def progress(self, step: int, total: int | None = None) -> None:
        """Queue a progress update of the run row (now is when ``step`` ended)."""
        self._pending.append(("progress", (step, total, time.time())))

    def log(self, message: str, level: str = "INFO") -> None:
        """Queue a line for the run's log."""
        self._pending.append(("log", (message, level)))

    def flush(self, timeout: float = 60.0) -> None:
        """Block until everything queued so far is committed, or kept in the run directory's file while the database
        does not answer (before a checkpoint: see the callback's on_log)."""
        done = threading.Event()
        self._pending.append(("flush", done))
        self._wake.set()
        done.wait(timeout)

    @property
    def deadline(self) -> float | None:
        """``time.monotonic()`` after which close() stopped retrying (None before close)."""
        return self._deadline

    def close(self) -> None:
        """Write everything still queued (retrying a database that does not answer for up to ``grace_seconds``),
        stop the thread, and raise the first write error if there was one."""
        self._deadline = time.monotonic() + self.grace_seconds
        self._pending.append(None)
        self._wake.set()
        self._thread.join()
        log.info("database writer: %.3f s of CPU time", self.cpu_seconds)
        if self._error is not None:
            raise RuntimeError(f"writing to the database failed: {self._error}") from self._error

    # --- the thread -------------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        started = time.thread_time()
        closing = False
        while True:
            self._wake.wait(self._backoff if self._outage else self.flush_interval)
            self._wake.clear()  # before draining: an item appended before a later set() is drained now or next time
            flushed = []
            while self._pending:
                item = self._pending.popleft()
                if item is None:
                    closing = True
                elif item[0] == "flush":
                    flushed.append(item[1])
                else:
                    self._hold(item)
            self._attempt()
            if self._outage and (flushed or self._held.over_bound()):
                self._spill()
            for event in flushed:  # committed, or in the file (or, without one, as durable as it can get)
                event.set()
            self.cpu_seconds = time.thread_time() - started
            if closing and (not self._held or time.monotonic() >= self._deadline):
                break
        if self._held:
            self._give_up()

    def _hold(self, item: Item) -> None:
        if item[0] == "progress":  # add how long recent steps took, from when each ended
            step, total, when = item[1]
            if not self._step_ends or step > self._step_ends[-1][0]:
                self._step_ends.append((step, when))
            ends = list(self._step_ends)
            paces = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(ends, ends[1:])]
            item = ("progress", (step, total, when, statistics.median(paces) if paces else None))
        self._held.add(item)

    def _attempt(self) -> None:
        """Write everything held in one transaction (with a heartbeat when one is due)."""
        beat = time.monotonic() - self._last_beat >= self.heartbeat_seconds
        if not (self._held or beat):
            return
        rows = self._held.rows
        try:
            self._write(self._held.items(), beat)
        except Exception as exc:  # noqa: BLE001 - transient: hold and retry; else report from close()
            if is_transient(exc):
                self._waiting(exc, rows)
                return
            log.exception("database write failed")
            self._error = self._error or exc
            self._held.clear()
            return
        self._held.clear()
        if beat:
            self._last_beat = time.monotonic()
            self._check_file()
        if self._outage is not None:
            self._recovered(rows)

    def _check_file(self) -> None:
        """Note when the SQLite file is no longer the one this worker opened (moved away, deleted or replaced, with
        its -wal and -shm): SQLite writes on into the old file without an error, and the run trained for 116 steps
        into a database no dashboard read. The training loop ends the run on it (trainer.job.callback)."""
        if self._identity is None or self.moved is not None:
            return
        now = file_identity(self._database)
        if now != self._identity:
            what = "is gone" if now is None else "was replaced by another file"
            self.moved = (
                f"the database file {self._database} {what} while the run trained (moved or deleted): the run stopped, "
                "its last rows are in the file it had opened; put that file back to see them"
            )
            log.error(self.moved)

    def _waiting(self, exc: BaseException, rows: int) -> None:
        if self._outage is None:
            self._outage = _Outage(time.monotonic(), str(getattr(exc, "orig", None) or exc).splitlines()[0])
            log.warning("database unavailable (%s): holding %d rows and retrying", self._outage.reason, rows)
        self._outage.most_rows = max(self._outage.most_rows, rows)
        self._backoff = min(self._backoff * 2, MAX_BACKOFF_SECONDS)

    def _spill(self) -> None:
        count = self._held.memory_count
        if self._held.spill() and count:
            self._outage.spilled += count

    def _recovered(self, rows: int) -> None:
        outage, self._outage, self._backoff = self._outage, None, 0.25
        waited = time.monotonic() - outage.since
        kept = f", {outage.spilled} of them in {self._held.path.name}" if outage.spilled else ""
        message = (
            f"the database did not take writes for {waited:.0f} s ({outage.reason}); held up to "
            f"{max(outage.most_rows, rows)} rows{kept}, all written now"
        )
        log.warning(message)
        self._held.add(("log", (message, "WARNING")))  # the run's log gets it with the next write

    def _give_up(self) -> None:
        """close()'s grace is over and the database still does not answer: leave the rows in the file, say where."""
        self._spill()
        where = f"kept in {self._held.path}" if self._held.file_count else "lost"
        reason = self._outage.reason if self._outage else "no answer"
        self._error = self._error or RuntimeError(
            f"the database did not answer for {self.grace_seconds:.0f} s after training ended ({reason}); "
            f"{self._held.rows} rows not written, {where}"
        )

    # --- one transaction --------------------------------------------------------------------------------------------
    def _write(self, items: list[Item], beat: bool) -> None:
        batch = _Batch()
        for item in items:
            batch.add(item)
        packed, pruned = self._packed_block, self._pruned_up_to
        with get_sessionmaker().begin() as session, _short_lock_wait(session):
            queries.add_metric_rows(session, batch.metrics)
            if batch.metrics:
                newest = max(row["step"] for row in batch.metrics)
                if newest // CHUNK_STEPS > packed:
                    series.write_chunks(session, self.run_id, newest)
                    packed = newest // CHUNK_STEPS
            queries.add_sample_rows(session, batch.samples)
            if batch.samples and self.keep_samples_every > 1:
                pruned = self._prune(session, max(row["step"] for row in batch.samples), pruned)
            for table, rows in batch.tables.items():
                TABLES[table](session, rows)
            for message, level in batch.logs:
                queries.add_log(session, self.run_id, message, level)
            if batch.progress:
                step, total, when, pace = batch.progress
                stepped_at = datetime.fromtimestamp(when, UTC)
                queries.set_progress(session, self.run_id, step, total, stepped_at=stepped_at, step_seconds=pace)
            if beat:
                queries.heartbeat(session, self.run_id)
        # only once committed: a rolled-back attempt must pack and prune again on the next one
        self._packed_block, self._pruned_up_to = packed, pruned

    def _prune(self, session, newest_step: int, pruned_up_to: int) -> int:
        """Thin out samples older than the latest RECENT_SAMPLE_STEPS, once per RECENT_SAMPLE_STEPS steps."""
        before = newest_step - RECENT_SAMPLE_STEPS
        if before >= pruned_up_to + RECENT_SAMPLE_STEPS:
            queries.prune_samples(session, self.run_id, before, self.keep_samples_every)
            return before
        return pruned_up_to


@contextlib.contextmanager
def _short_lock_wait(session):
    """On SQLite, wait at most ATTEMPT_BUSY_MS for another process's lock during this attempt (the connection goes
    back to the pool with the engine's own timeout)."""
    if session.get_bind().dialect.name != "sqlite":
        yield
        return
    raw = session.connection().connection.driver_connection
    raw.execute(f"PRAGMA busy_timeout = {ATTEMPT_BUSY_MS}")
    try:
        yield
    finally:
        raw.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
