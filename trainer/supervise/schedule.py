"""The queue: reconciling live runs with their processes, starting waiting runs as slots free up, and the
dashboard's scheduler thread that does both every few seconds.

:func:`reconcile` marks runs whose process is gone as failed (or stopped, when a stop was asked of them). The queue
lives in the database (queued runs without a worker, oldest first), so it survives a dashboard restart.

One limit holds runs and evaluation jobs together (issue 58.6): each loads a model, and five ``/evaluate`` calls at
once used to load five beside a training run. A running evaluation takes a slot here, and an evaluation job waits for
one (trainer.evaluation.eval_job), both under :func:`storage.queries.lock_scheduling`. The dashboard's
``--max-concurrent-runs`` reaches the jobs it starts as :data:`SLOTS_VARIABLE`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from sqlalchemy.orm import Session

from storage import queries
from storage.db import get_sessionmaker
from storage.models import Run, RunStatus
from trainer.config import RunConfig
from trainer.supervise import slurm, workers
from trainer.supervise.start import start_slurm_runs, start_worker
from trainer.supervise.stop import stopped_early

log = logging.getLogger(__name__)

SCHEDULE_SECONDS = 2.0
SLOTS_VARIABLE = "GRPO_STUDIO_MAX_CONCURRENT_RUNS"  # the dashboard's --max-concurrent-runs, for the jobs it starts


def slots() -> int:
    """How many runs and evaluation jobs may load a model at once: :data:`SLOTS_VARIABLE` (at least 1), else 1."""
    value = os.environ.get(SLOTS_VARIABLE, "")
    return max(1, int(value)) if value.strip().isdigit() else 1


def share_slots(max_concurrent: int) -> None:
    """Make ``max_concurrent`` the limit of the evaluation jobs this process starts (they read :func:`slots`)."""
    os.environ[SLOTS_VARIABLE] = str(max(1, int(max_concurrent)))


def slurm_jobs(session: Session) -> list[str]:
    """The Slurm job ids of the live runs."""
    return [r.slurm_job_id for r in queries.list_runs(session, workers.LIVE) if r.slurm_job_id]


def poll_slurm() -> dict[str, slurm.JobState | None] | None:
    """What Slurm says of every live run's job: one short read of the ids, then one ``squeue`` outside any
    transaction (slurm.job_states); None when Slurm does not answer. The scheduler calls it before its transaction."""
    with get_sessionmaker().begin() as session:
        jobs = slurm_jobs(session)
    return slurm.job_states(jobs) if jobs else {}


def reconcile(session: Session, slurm_states: dict | None = None) -> list[int]:
    """Mark live runs whose worker process is gone as failed, with the log's last lines. Returns their ids. A worker
    gone after a stop was asked of it (trainer.supervise.stop.stop_worker) leaves its run stopped instead, saying so.

    Queued runs that never got a worker (no pid) are left alone: they are waiting for their turn. Runs on Slurm follow
    their job's state: ``slurm_states`` from :func:`poll_slurm` (read here, one squeue, when not given); while Slurm
    does not answer they are kept as they were.
    """
    failed = []
    live = queries.list_runs(session, workers.LIVE)
    if slurm_states is None and any(r.slurm_job_id for r in live):
        slurm_states = slurm.job_states([r.slurm_job_id for r in live if r.slurm_job_id])
    for run in live:
        if run.slurm_job_id:  # Slurm says what became of the job
            if slurm_states is not None and slurm.reconcile(session, run, slurm_states.get(run.slurm_job_id)):
                failed.append(run.id)
            continue
        if run.pid is None or workers.is_alive(run):
            continue
        if queries.stop_asked(session, run.id):
            # asked to stop before its handler was in place (Python still starting), or killed by whatever the stop
            # interrupted: either way the user's stop ended it, not a fault (issue 36)
            queries.finish_run(session, run, RunStatus.STOPPED, stopped_early(run))
            queries.add_log(session, run.id, f"run stopped: {stopped_early(run)}")
            continue
        tail = workers.log_tail(run)
        queries.finish_run(session, run, RunStatus.FAILED, "worker exited unexpectedly" + (f"\n{tail}" if tail else ""))
        queries.add_log(session, run.id, "worker exited unexpectedly", "ERROR")
        failed.append(run.id)
    return failed


def schedule(
    session: Session,
    max_concurrent: int = 1,
    before_start: Callable[[Run], None] | None = None,
    slurm_states: dict | None = None,
) -> list[int]:
    """Reconcile, then start the oldest waiting runs while fewer than ``max_concurrent`` train or evaluate. Returns
    started ids.
    ``before_start(run)`` is called before each worker starts (the dashboard frees its GPU model there).

    The queue lives in the database (queued runs without a worker, oldest first), so it survives a dashboard
    restart: whoever calls this next picks up where the last caller left off; callers in other processes take turns
    (:func:`storage.queries.lock_scheduling`), so ``max_concurrent`` holds across dashboards. Runs on the slurm executor take no local
    slot: each is submitted at once, and Slurm's queue holds it (a sweep's members as one job array). ``slurm_states``: see :func:`reconcile`.
    """
    queries.lock_scheduling(session)  # one limit across processes: the count and the starts in one transaction
    reconcile(session, slurm_states)
    free = max_concurrent - len(workers.active_runs(session)) - len(workers.running_evaluations(session))
    queued = [r for r in queries.list_runs(session, [RunStatus.QUEUED]) if not r.pid and not r.slurm_job_id]
    waiting = sorted(queued, key=lambda r: r.id)
    on_slurm = [r for r in waiting if RunConfig.from_stored(r.config).executor == "slurm"]
    local = [r for r in waiting if r not in on_slurm]
    started = start_slurm_runs(session, on_slurm) if on_slurm else []  # a sweep's members as one job array
    for run in local[: max(free, 0)]:
        if before_start is not None:  # a Slurm job needs nothing of this machine's GPU
            before_start(run)
        start_worker(session, run)
        started.append(run.id)
    return started


class Scheduler(threading.Thread):
    """Starts queued runs in order while fewer than ``max_concurrent`` train (one per GPU by default), every
    ``interval`` seconds; ``before_start`` as for :func:`schedule` (the dashboard frees its Compare model there)."""

    def __init__(
        self,
        max_concurrent: int = 1,
        interval: float = SCHEDULE_SECONDS,
        before_start: Callable[[Run], None] | None = None,
    ) -> None:
        super().__init__(name="grpo-studio-scheduler", daemon=True)
        self.max_concurrent = max_concurrent
        self.interval = interval
        self.before_start = before_start
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                states = poll_slurm()  # one squeue for every live job, outside the transaction below
                with get_sessionmaker().begin() as session:
                    started = schedule(session, self.max_concurrent, self.before_start, slurm_states=states)
                    for run_id in started:
                        log.info("started run %d", run_id)
                self.each_pass()
            except Exception:  # a locked database or a failed start must not kill the scheduler
                log.exception("scheduling failed")
            self.stopped.wait(self.interval)

    def each_pass(self) -> None:
        """What else the scheduler does after each pass, in a transaction of its own (the scheduling lock is
        released by then): nothing here; trainer.sweeps.tending.Scheduler tends the sweeps' running members."""
