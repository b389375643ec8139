"""What the monitor keeps between polls: per run, the metric points read so far and the last step seen, so each
poll reads only what arrived since (storage/series.py). Plain code, tested without a browser."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
from sqlalchemy.orm import Session

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


def progress_text(run: Run, now: datetime | None = None) -> str:
    """ "step x of N", elapsed time and an ETA from the pace so far, e.g. "step 40 of 100 · 2m elapsed · ETA 3m"."""
    now = now or datetime.now(UTC)
    text = f"**{run.name}** (run {run.id}) — {run.status} — step {run.current_step} of {run.total_steps}"
    if run.started_at is None:
        return text
    started = run.started_at if run.started_at.tzinfo else run.started_at.replace(tzinfo=UTC)
    end = run.finished_at or now
    end = end if end.tzinfo else end.replace(tzinfo=UTC)
    elapsed = (end - started).total_seconds()
    text += f" · {_duration(elapsed)} elapsed"
    if run.status == RunStatus.RUNNING and run.current_step > 0 and run.total_steps > run.current_step:
        eta = elapsed / run.current_step * (run.total_steps - run.current_step)
        text += f" · ETA {_duration(eta)}"
    return text


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
