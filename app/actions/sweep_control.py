"""Stopping, resuming and deleting a whole sweep (issue 58.3): the verbs ``stop_sweep``, ``resume_sweep`` and
``delete_sweep`` of the CLI, the API and the Sweeps page.

Before them a TPE sweep could not be stopped: its members could, one by one, but the scheduler's pass saw a member
end and asked TPE for the next point at once (trainer/sweeps/tending.py ``ask_next``), and deleting members made room
for new ones. A stopped sweep is one the pass leaves alone (storage.sweeps.stop_sweep: no member asked, none pruned);
its live members are stopped as a run is (trainer.supervise.stop.stop_worker: a queued one at once, a training one
at its next step boundary with its adapter saved), each with "stopped with its sweep" as the sweep's reason. Resuming
it makes it active again and queues those members to continue from their checkpoints (members the sweep's rules
pruned or skipped stay as they are). Deleting it, like deleting a run, is refused while a member is live, and removes
every member with its rows and files.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.actions.base import ActionError
from app.actions.runs import delete, resume
from storage import queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from storage.models import SweepState
from trainer.supervise.slurm import SlurmError
from trainer.supervise.stop import stop_worker
from trainer.supervise.workers import LIVE

STOPPED_WITH_SWEEP = "stopped with its sweep"


@dataclass(frozen=True)
class SweepChanged:
    """What a sweep verb did: the sweep's state after it and the members it acted on (run ids)."""

    sweep_id: int
    state: str
    members: list[int]

    def to_json(self) -> dict:
        return {"sweep_id": self.sweep_id, "state": self.state, "members": self.members}


def _sweep(session, sweep_id: int):
    row = sweep_rows.get_sweep(session, int(sweep_id))
    if row is None:
        raise ActionError(f"no sweep with id {sweep_id}")
    return row


def stop_sweep(sweep_id: int) -> SweepChanged:
    """Stop a sweep: no member is asked or pruned from now on, and every live member is stopped (a queued one at
    once, a training one at its next step boundary). ActionError for a sweep that has ended."""
    try:
        with get_sessionmaker().begin() as session:
            sweep = _sweep(session, sweep_id)
            if sweep.state != SweepState.ACTIVE.value:
                raise ActionError(f"sweep {sweep.id} is {sweep.state}: nothing to stop")
            sweep_rows.stop_sweep(sweep)
            stopped = []
            for run in sweep_rows.member_runs(session, sweep.id):
                if run.status in LIVE:
                    queries.sweep_stopped(session, run, STOPPED_WITH_SWEEP)
                    stop_worker(session, run)
                    stopped.append(run.id)
            return SweepChanged(sweep.id, sweep.state, stopped)
    except SlurmError as exc:  # nothing was changed: the transaction rolled back
        raise ActionError(f"sweep {sweep_id}: could not reach Slurm ({exc}); try again when it answers", 1) from None


def resume_sweep(sweep_id: int) -> SweepChanged:
    """Resume a stopped sweep: active again (the scheduler tends it and asks its next members) and the members its
    stop had stopped queued to continue from their latest checkpoints. ActionError for a sweep that is not stopped."""
    with get_sessionmaker().begin() as session:
        sweep = _sweep(session, sweep_id)
        if sweep.state != SweepState.STOPPED.value:
            raise ActionError(f"sweep {sweep.id} is {sweep.state}: only a stopped sweep resumes")
        members = [
            r.id
            for r in sweep_rows.member_runs(session, sweep.id)
            if r.sweep_stop == STOPPED_WITH_SWEEP and r.status.resumable
        ]
    for run_id in members:  # each waits for a worker still saving, as resume does
        resume(run_id)
    with get_sessionmaker().begin() as session:
        sweep = _sweep(session, sweep_id)
        for run_id in members:
            queries.sweep_resumed(session, queries.get_run(session, run_id))
        sweep_rows.resume_sweep(sweep)
        return SweepChanged(sweep.id, sweep.state, members)


def delete_sweep(sweep_id: int) -> SweepChanged:
    """Delete a sweep whose members have all ended, with every member's rows and files (as delete does for a
    run). ActionError while a member is live: stop the sweep first."""
    with get_sessionmaker().begin() as session:
        sweep = _sweep(session, sweep_id)
        runs = list(sweep_rows.member_runs(session, sweep.id))
        if live := [r.id for r in runs if r.status in LIVE]:
            raise ActionError(
                f"sweep {sweep.id} has {len(live)} live member{'s' * (len(live) != 1)} (run "
                f"{', '.join(map(str, live))}): stop it first (grpo-studio stop_sweep {sweep.id})"
            )
        state, members = sweep.state, [r.id for r in runs]
    for run_id in members:
        delete(run_id, within_sweep=True)
    with get_sessionmaker().begin() as session:
        sweep_rows.delete_sweep(session, _sweep(session, sweep_id))
    return SweepChanged(int(sweep_id), state, members)
