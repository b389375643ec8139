"""Metric series for the charts, read whole in a few milliseconds however long the run.

A 10,000-step run logging 40 keys has 400,000 metric rows; reading them one row at a time took the monitor's first
chart read 0.85 s, most of it in building 400,000 Python rows. So the database writer also keeps a packed copy of
each key's points, one row per key and block of ``CHUNK_STEPS`` steps (:class:`~storage.models.MetricChunk`),
written once the run has moved past the block. A read takes the packed blocks after the step it already has, then
the metric rows after the last block: at most one block's worth of single rows.

The metric rows stay the source of truth: every other query reads them, a block is made from them (so a resumed
run's blocks hold what the earlier attempt logged too), and a run from before the blocks existed reads from them
alone. Points come back as an ``(n, 3)`` float array per key of step, value (NaN/inf where logged so) and wall time.
"""

from __future__ import annotations

from itertools import groupby

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from storage import queries
from storage.models import CHUNK_STEPS, Metric, MetricChunk

_POINT = np.dtype("<f8")  # step, value, wall time: float64 holds every step exactly, NaN and inf as they are


def write_chunks(session: Session, run_id: int, newest_step: int) -> int:
    """Pack every block of steps before ``newest_step``'s block that is not packed yet (the writer calls this after
    inserting metric rows); returns how many packed rows were written."""
    last = session.scalar(select(func.max(MetricChunk.first_step)).where(MetricChunk.run_id == run_id))
    start = 0 if last is None else last + CHUNK_STEPS
    end = newest_step // CHUNK_STEPS * CHUNK_STEPS  # the block still being logged stays in single rows
    if start >= end:
        return 0
    stmt = (
        select(Metric.key, Metric.step, Metric.value, Metric.raw, Metric.wall_time)
        .where(Metric.run_id == run_id, Metric.step >= start, Metric.step < end)
        .order_by(Metric.key, Metric.step)
    )

    def block(row) -> tuple[str, int]:
        return row[0], row[1] // CHUNK_STEPS * CHUNK_STEPS

    chunks = []
    for (key, first_step), points in groupby(session.execute(stmt), block):
        table = [(step, queries.read_value(value, raw), wall) for _key, step, value, raw, wall in points]
        data = np.asarray(table, dtype=_POINT).tobytes()
        chunks.append({"run_id": run_id, "first_step": first_step, "key": key, "points": data})
    if chunks:
        session.execute(MetricChunk.__table__.insert(), chunks)
    return len(chunks)


def series_since(session: Session, run_id: int, after_step: int = -1) -> dict[str, np.ndarray]:
    """Every key's points with step > ``after_step``, in step order, as ``(n, 3)`` arrays (see the module docstring):
    what one monitor poll needs, the first one included. A key without new points is absent, never an empty array
    (the monitor's cache reads each array's last step)."""
    stmt = (
        select(MetricChunk.key, MetricChunk.first_step, MetricChunk.points)
        .where(MetricChunk.run_id == run_id, MetricChunk.first_step + CHUNK_STEPS - 1 > after_step)
        .order_by(MetricChunk.first_step)
    )
    parts: dict[str, list[np.ndarray]] = {}
    covered = after_step
    for key, first_step, data in session.execute(stmt).tuples():
        points = np.frombuffer(data, dtype=_POINT).reshape(-1, 3)
        if first_step <= after_step:
            points = points[points[:, 0] > after_step]
        if len(points):  # a key logged now and then (held-out every N steps) may have nothing left in this block
            parts.setdefault(key, []).append(points)
        covered = max(covered, first_step + CHUNK_STEPS - 1)
    for key, points in queries.metrics_since(session, run_id, covered).items():
        parts.setdefault(key, []).append(np.asarray(points, dtype=float))
    return {key: arrays[0] if len(arrays) == 1 else np.concatenate(arrays) for key, arrays in parts.items()}
