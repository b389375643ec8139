"""A run's worker as the supervisor sees it: whether it is alive, which runs and evaluation jobs hold a slot, its log's
tail.

A run on the slurm executor is a Slurm job instead (trainer.supervise.slurm): whether it is alive is Slurm's answer.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session

from storage import queries
from storage.models import Evaluation, Run, RunStatus
from trainer.supervise import slurm
from trainer.supervise.processes import pid_alive
from trainer.supervise.run_files import RunFiles

LIVE = (RunStatus.QUEUED, RunStatus.RUNNING)


def is_alive(run: Run) -> bool:
    """Whether the run's recorded worker process is still running (for a Slurm run: whether its job is)."""
    if run.slurm_job_id:
        return slurm.job_alive(run.slurm_job_id)
    return bool(run.pid) and pid_alive(run.pid, run.pid_started)


def active_runs(session: Session) -> list[Run]:
    """Runs that hold a training slot: running, or queued with a live worker that has not marked itself yet."""
    return [r for r in queries.list_runs(session, LIVE) if r.pid and not r.slurm_job_id and is_alive(r)]


def running_evaluations(session: Session) -> list[Evaluation]:
    """Evaluation jobs that hold a slot: running, with their process alive (issue 58.6: an evaluation loads a model
    as a run does, so it counts against the same limit; trainer.evaluation.eval_job)."""
    return [
        e
        for e in queries.live_evaluations(session)
        if e.status == RunStatus.RUNNING and e.pid and pid_alive(e.pid, e.pid_started)
    ]


def log_tail(run: Run, lines: int = 20) -> str:
    """The last lines of the run's worker log file ("" when there is none)."""
    return RunFiles(Path(run.output_dir)).log_tail(lines) if run.output_dir else ""
