"""What the monitor keeps between polls: per run, the metric points read so far and the last step seen, so each
poll reads only what arrived since (storage/series.py). Plain code, tested without a browser."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
from sqlalchemy.orm import Session

from app.actions.liveness import liveness_problem
from app.markup import md
from storage import queries
from storage.models import Run, RunStatus
from storage.series import series_since


@dataclass
class RunCache:
    """Metric points of one run, as read so far: per key an (n, 3) float array of step, value, wall time.

    Arrays rather than lists of tuples: a 10,000-step run has 400,000 points, which as Python objects cost the
    figure builder ~40 ms of conversion per redraw and the garbage collector a long walk on every collection.
    """

    run_id: int
    last_step: int = -1
    series: dict[str, np.ndarray] = field(default_factory=dict)
    # what the charts that this browser holds were drawn from (see drawn_from): Gradio re-creates a plot at every
    # update, so a poll that finds nothing new sends no figures, rather than 11 redraws every 2 s of a finished run
    drawn: tuple | None = None
    # the reward-hacking watch's alerts as of ``watch_step`` (it reads the whole run: recomputed once per new step)
    watch: list = field(default_factory=list)
    watch_step: int | None = None

    def poll(self, session: Session) -> int:
        """Read the steps logged since the last poll and append them; returns how many points arrived.

        A resumed run re-logs the steps after its checkpoint: when the run's step counter goes backwards the cache
        starts over rather than keep points that no longer exist.
        """
        run = queries.get_run(session, self.run_id)
        if run is not None and run.current_step < self.last_step and run.status == RunStatus.RUNNING:
            self.last_step, self.series = -1, {}
        fresh = series_since(session, self.run_id, self.last_step)
        count = 0
        for key, new in fresh.items():
            old = self.series.get(key)
            self.series[key] = new if old is None else np.concatenate([old, new])
            self.last_step = max(self.last_step, int(new[-1, 0]))
            count += len(new)
        return count


def drawn_from(caches: dict[int, RunCache], run_ids: list[int], *view) -> tuple:
    """What a set of charts is drawn from: the runs shown, how many points each has, and the ``view`` settings
    (smoothing, x axis, fork mark...). Equal tuples draw equal figures."""
    return tuple(run_ids), tuple(sum(len(a) for a in caches[rid].series.values()) for rid in run_ids), view


def progress_text(run: Run, now: datetime | None = None, logged: np.ndarray | None = None) -> str:
    """ "step x of N", elapsed time and an ETA, e.g. "step 40 of 100 · 2m elapsed · ETA 3m" (see :func:`eta`;
    ``logged`` is one series the run logs every step, as the monitor's cache holds it)."""
    now = now or datetime.now(UTC)
    text = f"**{md(run.name)}** (run {run.id}) — {run.status} — step {run.current_step} of {run.total_steps}"
    if run.started_at is None:
        return text
    started = run.started_at if run.started_at.tzinfo else run.started_at.replace(tzinfo=UTC)
    end = run.finished_at or now
    end = end if end.tzinfo else end.replace(tzinfo=UTC)
    elapsed = (end - started).total_seconds()
    text += f" · {duration(elapsed)} elapsed"
    problem = liveness_problem(run, now)
    if problem is not None:  # no ETA for a run that is not moving
        return text + f" · **{problem[1]}**"
    if run.status == RunStatus.RUNNING and run.current_step > 0 and run.total_steps > run.current_step:
        left = eta(run.total_steps - run.current_step, elapsed, run.current_step, logged)
        text += f" · ETA {duration(left)}" if left is not None else " · ETA after the next step"
    return text


def eta(remaining: int, elapsed: float, done: int, logged: np.ndarray | None = None) -> float | None:
    """Seconds until ``remaining`` more steps are done: the median time between the latest logged steps (``logged``:
    a series logged once per step, (n, 3) of step, value, wall time) times the steps left; None until two steps are
    logged. Elapsed time over steps done counts model loading and the slow first step as training (it said 11m35s
    for a 4-minute run), so it is used only without a series."""
    if logged is None:
        return elapsed / max(done, 1) * remaining
    points = np.asarray(logged, dtype=float)
    if len(points) < 2:
        return None
    gaps = np.diff(points[:, 2]) / np.maximum(np.diff(points[:, 0]), 1)  # seconds per step between logged steps
    recent = gaps[np.isfinite(gaps)][-20:]
    return float(np.median(recent)) * remaining if len(recent) else None


def duration(seconds: float) -> str:
    """A span of time as people read it: 45s, 3m05s, 2h10m."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
