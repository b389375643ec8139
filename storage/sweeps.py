"""The sweeps table and its members (issue 41): creating a sweep, reading it with one row per member, and marking it
finished. A member is a normal run (storage/queries.py creates it, with its sweep and point, and records why a sweep
stopped it); this module only reads runs.

A member's row holds what the sweep's table shows: its point, status, the objective at its latest evaluation and its
best so far (read from the metric the sweep names), its latest reward and KL, and why the sweep stopped it.

Only trained steps count towards a member's objective (:func:`trained`): the held-out evaluation at step 0 scores the
base model before any update, the same for every member, so counting it marked a member at step 1 of 12 best and, in
a ``min`` sweep, gave every member the base's value as its best (issue 57.5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage import queries
from storage.models import Run, RunStatus, Sweep, SweepState, utcnow

FIRST_TRAINED_STEP = 1  # step 0's evaluation is the base model's (trainer/evaluation/periodic_eval.py)


def trained(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """The finite (step, value) points of a member's objective at trained steps: the base model's step-0 score is
    no member's result."""
    return [(s, v) for s, v in points if s >= FIRST_TRAINED_STEP and math.isfinite(v)]


def objective_points(session: Session, run_id: int, key: str) -> list[tuple[int, float]]:
    """A member's objective ``key`` at each trained step, oldest first (:func:`trained`)."""
    return trained([(p.step, p.value) for p in queries.metric_series(session, run_id, key)])


@dataclass(frozen=True)
class Member:
    """One member of a sweep as its table shows it. ``objective``: (step, value) at each trained step, oldest
    first."""

    run_id: int
    name: str
    status: RunStatus
    point: dict[str, Any]
    current_step: int
    total_steps: int
    objective: list[tuple[int, float]]
    reward: float | None
    kl: float | None
    stop_reason: str | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def objective_now(self) -> float | None:
        """The objective at the member's latest logged step (its last evaluation for a held-out objective)."""
        return self.objective[-1][1] if self.objective else None

    def objective_best(self, direction: str) -> float | None:
        """The best value the objective reached, in the sweep's ``direction`` ("max" or "min")."""
        values = [v for _, v in self.objective]
        if not values:
            return None
        return max(values) if direction == "max" else min(values)


def create_sweep(
    session: Session, name: str, definition: dict[str, Any], base_config: dict[str, Any], objective: str, direction: str
) -> Sweep:
    """A new active sweep, its id assigned (its members are created with storage.queries.create_run)."""
    sweep = Sweep(
        name=name,
        definition=definition,
        base_config=base_config,
        objective=objective,
        direction=direction,
        state=SweepState.ACTIVE.value,
    )
    session.add(sweep)
    session.flush()
    return sweep


def get_sweep(session: Session, sweep_id: int) -> Sweep | None:
    """The sweep with this id, or None."""
    return session.get(Sweep, sweep_id)


def list_sweeps(session: Session, state: SweepState | None = None) -> Sequence[Sweep]:
    """Sweeps, newest first (only those in ``state`` when given)."""
    stmt = select(Sweep).order_by(Sweep.id.desc())
    if state is not None:
        stmt = stmt.where(Sweep.state == state.value)
    return session.scalars(stmt).all()


def member_runs(session: Session, sweep_id: int) -> Sequence[Run]:
    """The runs of a sweep, in the order they were created (the order of its points)."""
    return session.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)).all()


def members(session: Session, sweep: Sweep) -> list[Member]:
    """Each member of ``sweep`` as its table shows it."""
    found = []
    for run in member_runs(session, sweep.id):
        series = objective_points(session, run.id, sweep.objective)
        kl = queries.last_metric(session, run.id, "kl")
        found.append(
            Member(
                run.id,
                run.name,
                run.status,
                dict(run.sweep_point or {}),
                run.current_step,
                run.total_steps,
                series,
                queries.last_metric(session, run.id, "reward"),
                kl if kl is not None else queries.last_metric(session, run.id, "kl_measured"),
                run.sweep_stop,
                run.error,
                run.started_at,
                run.finished_at,
            )
        )
    return found


def finish_if_done(session: Session, sweep: Sweep) -> bool:
    """Mark an active sweep finished once every member has ended; True when it was marked now."""
    if sweep.state != SweepState.ACTIVE.value:
        return False
    if any(not run.status.terminal for run in member_runs(session, sweep.id)):
        return False
    sweep.state = SweepState.FINISHED.value
    sweep.finished_at = utcnow()
    return True


def stop_sweep(sweep: Sweep) -> None:
    """Mark a sweep stopped by its user: the scheduler's pass neither asks it a new member nor prunes it."""
    sweep.state = SweepState.STOPPED.value
    sweep.finished_at = utcnow()


def resume_sweep(sweep: Sweep) -> None:
    """Mark a stopped sweep active again: the scheduler's pass tends it and asks its next members."""
    sweep.state = SweepState.ACTIVE.value
    sweep.finished_at = None


def delete_sweep(session: Session, sweep: Sweep) -> None:
    """Delete a sweep's row (the caller has deleted its members)."""
    session.delete(sweep)
