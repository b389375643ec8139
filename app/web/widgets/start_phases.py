"""Where a run is in its start, phase by phase, each with its own elapsed time (issue 59): queued, the worker process
starting (importing its libraries), loading the model, the base's held-out evaluation, stepping.

Nothing new is recorded for this: each phase begins at a mark the launcher or the worker already leaves, read back by
storage.queries.start_lines: the launcher's "worker started (pid N)" line, the worker's "worker running" line when it
takes the run, its "trainer ready in ... s" line, its "held-out evaluation every ..." line (the evaluation runs at the
step training starts from, before the first update), and the first held-out metric point stored after the trainer was
ready (its wall time ends that evaluation). Before this the Monitor said "Queued: it starts within a few seconds" for
as long as the row said queued, which it does until the worker has imported torch and friends (78 s on a loaded
machine, while the worker had started 2 s after Launch). Plain functions of rows and times, tested without a browser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from app.actions.monitor_state import duration
from storage.queries import HELDOUT_EVERY, RESUME_REQUESTED, TRAINER_READY, WORKER_RUNNING, WORKER_STARTED

LABELS = {
    "queued": "queued",
    "starting": "worker starting (importing its libraries)",
    "loading": "loading the model",
    "heldout": "the base's held-out evaluation",
    "stepping": "stepping",
}


@dataclass(frozen=True)
class Phase:
    """One phase of a run's start: its name (a key of :data:`LABELS`), when it began and when it ended (epoch
    seconds; ``ended`` None while it is the phase the run is in)."""

    name: str
    began: float
    ended: float | None = None

    def seconds(self, now: float) -> float:
        """How long the phase took, or has taken so far."""
        return max(0.0, (self.ended if self.ended is not None else now) - self.began)


def epoch(at: datetime) -> float:
    """A database timestamp as epoch seconds (SQLite hands back naive datetimes, stored as UTC)."""
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def start_phases(run: Any, lines: Sequence[Any], heldout: np.ndarray | None = None) -> list[Phase]:
    """The phases of ``run``'s latest start, in order, the last one open unless the run has ended.

    ``run``: anything with ``status``, ``created_at`` and ``finished_at`` (a Run); ``lines``: what
    storage.queries.start_lines read (``message``, ``created_at``); ``heldout``: one held-out series as the Monitor's
    cache holds it ((n, 3) of step, value, wall time), or None.
    """
    resumed = [line for line in lines if line.message == RESUME_REQUESTED]
    queued = epoch(resumed[-1].created_at) if resumed else epoch(run.created_at)
    # the latest worker's start (a detached resume starts one with no "resume requested" before it)
    starts = [i for i, line in enumerate(lines) if line.message.startswith(WORKER_STARTED)]
    after = lines[starts[-1] :] if starts else lines

    def first(mark: str, since: float) -> float | None:
        times = (epoch(line.created_at) for line in after if line.message.startswith(mark))
        return next((at for at in times if at >= since), None)

    started = epoch(lines[starts[-1]].created_at) if starts else None
    if started is not None and not resumed and started < queued:  # (clocks a second apart) never a negative phase
        queued = started
    running = first(WORKER_RUNNING, started or queued)
    ready = first(TRAINER_READY, running) if running is not None else None
    evaluates = running is not None and first(HELDOUT_EVERY, running) is not None
    evaluated = None
    if ready is not None and evaluates and heldout is not None and len(heldout):
        done = heldout[heldout[:, 2] >= ready - 1.0, 2]  # a second of slack: the row's time and the log's clock
        evaluated = float(done.min()) if len(done) else None
    marks = [("queued", queued), ("starting", started), ("loading", running)]
    if ready is not None:
        marks += [("heldout", ready), ("stepping", evaluated)] if evaluates else [("stepping", ready)]
    reached = [(name, at) for name, at in marks if at is not None]
    ended = (
        epoch(run.finished_at) if str(run.status) in ("completed", "failed", "stopped") and run.finished_at else None
    )
    return [
        Phase(name, at, reached[i + 1][1] if i + 1 < len(reached) else ended) for i, (name, at) in enumerate(reached)
    ]


def phases_text(phases: Sequence[Phase], now: float | None = None) -> str:
    """The phases in a line, each with its own time, the current one in bold: "Start: queued 1s → worker starting
    (importing its libraries) 2s → **loading the model 41s** (now)"."""
    if not phases:
        return ""
    now = datetime.now(UTC).timestamp() if now is None else now
    parts = []
    for phase in phases:
        said = f"{LABELS[phase.name]} {duration(phase.seconds(now))}"
        parts.append(f"**{said}** (now)" if phase.ended is None else said)
    return "Start: " + " → ".join(parts)
