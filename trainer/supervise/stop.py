"""Stopping a run's worker: SIGTERM to its process group, which ends it at its next step boundary (the worker's
trainer.job.stop hears it); a Slurm run's job is signalled through Slurm (trainer.supervise.slurm)."""

from __future__ import annotations

import os
import signal

from sqlalchemy.orm import Session

from storage import queries
from storage.models import Run, RunStatus
from trainer.supervise import slurm
from trainer.supervise.workers import LIVE, is_alive


def stop_worker(session: Session, run: Run) -> bool:
    """Ask the run's worker to stop at its next step boundary (SIGTERM). A live run without a live worker is marked
    stopped directly. Returns True if a signal was sent. A Slurm run's job is signalled through Slurm."""
    if run.slurm_job_id and run.status in LIVE:
        return slurm.stop(session, run)
    if is_alive(run):
        # A launched worker leads its own process group: signal the whole group, so every process of a
        # multi-process (accelerate) run gets it. A foreground CLI run shares its shell's group: only its pid.
        if os.getpgid(run.pid) == run.pid:
            os.killpg(run.pid, signal.SIGTERM)
        else:
            os.kill(run.pid, signal.SIGTERM)
        queries.add_log(session, run.id, queries.STOP_REQUESTED)
        return True
    if run.status in LIVE:
        queries.finish_run(session, run, RunStatus.STOPPED)
        queries.add_log(session, run.id, "stopped before a worker took it")
    return False


def stopped_early(run: Run) -> str:
    """What a run's row says when its worker ended on a stop before it could save and mark the run stopped itself."""
    if not run.current_step:
        return "stopped while its worker was starting, before the first step (nothing was trained)"
    return f"stopped at step {run.current_step}; its worker ended before it saved (resume continues from the last checkpoint)"
