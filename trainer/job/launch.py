"""Starting, stopping and watching worker processes.

A run on the slurm executor is a Slurm job instead (trainer.job.slurm): the verbs here hand such a run to that
module, so the dashboard and the CLI start, stop and watch both kinds alike.

A worker runs in its own session (``start_new_session``), with its output going to the run's log file, so it
survives the dashboard or shell that launched it. Whether it is alive is decided from the pid on the run row *and*
the process's command line, because pids get reused. :func:`reconcile` marks runs whose process is gone as failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from storage import queries
from storage.db import data_dir, get_sessionmaker
from storage.models import Run, RunStatus
from trainer.job import slurm
from trainer.job.commands import supervised, with_package_path, worker_command
from trainer.job.processes import process_exists
from trainer.job.run_files import RunFiles
from trainer.loading.backend import cache_env

if TYPE_CHECKING:
    from trainer.config import RunConfig

LIVE = (RunStatus.QUEUED, RunStatus.RUNNING)


def start_worker(session: Session, run: Run) -> int | str | None:
    """Start a detached worker process for ``run``; records its pid and output dir on the row, returns the pid. A run
    on the slurm executor is submitted as a Slurm job instead (trainer.job.slurm): returns the job id, or None when
    Slurm refused it (the run is then failed with Slurm's message)."""
    if run.pid and is_alive(run):
        raise RuntimeError(f"run {run.id} already has a live worker (pid {run.pid})")
    config = _absolute_paths(session, run)
    if config is not None and config.executor == "slurm":
        return slurm.submit(session, run, config)
    files = RunFiles.of(run.output_dir, run.id).create()
    settings = run.config or {}
    command = worker_command(
        run.id, int(settings.get("num_processes", 1)), int(settings.get("deepspeed_stage", 0)), cpu=not gpu_visible()
    )
    if config is not None and config.vllm_mode == "server":
        command = supervised(run.id, command)
    process = spawn_detached(command, files.log, files.root)
    queries.worker_launched(session, run, process.pid, process_start_time(process.pid), str(files.root))
    queries.add_log(session, run.id, f"{queries.WORKER_STARTED} (pid {process.pid})")
    return process.pid


def spawn_detached(command: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    """Start ``command`` as a detached process of its own session (it outlives the dashboard), its output appended to
    ``log``, in ``cwd``: a run's worker, or an evaluation job."""
    # Compile caches under the data dir unless the caller chose otherwise (trainer.loading.backend.CACHE_VARIABLES
    # says why).
    env = with_package_path(cache_env(data_dir()) | dict(os.environ))
    with open(log, "ab") as log_file:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            # A writable directory of its own: what a library writes to its working directory stays there (in the
            # container the package root is root-owned site-packages).
            cwd=str(cwd),
        )


def _absolute_paths(session: Session, run: Run) -> RunConfig | None:
    """Make the run's relative local paths absolute against this (the launching) process's working directory, where
    they were validated: the worker runs in the run directory. Returns the config (None if it can't be read)."""
    from trainer.config import ConfigError, RunConfig

    try:
        config, _ = RunConfig.from_dict(run.config or {})
    except ConfigError:
        return None  # the worker reports a config it cannot read
    absolute = config.with_absolute_paths(Path.cwd())
    if absolute != config:
        queries.set_config(session, run, {**(run.config or {}), **absolute.to_dict()})
    return absolute


def process_start_time(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (from /proc); None where /proc is not available."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def gpu_visible() -> bool:
    """Whether an NVIDIA GPU is visible, judged without importing torch (the dashboard must start light)."""
    import glob
    import shutil

    return bool(glob.glob("/dev/nvidia[0-9]*")) or shutil.which("nvidia-smi") is not None


def gpu_busy(session: Session) -> str | None:
    """Why this machine's GPU can't take another model now, in one sentence, or None: a training run this data dir
    knows of holds it, or another process holds its lease (trainer.job.gpu_lease: a CLI worker, an evaluation job, a
    probe, another dashboard). Always None without a visible GPU, so CPU machines are never told to wait."""
    from trainer.job.gpu_lease import busy_message, holder, physical_gpu

    if not gpu_visible():
        return None
    busy = active_runs(session)
    if busy:
        return (
            f"Run {busy[0].id} ({busy[0].name}) is training on the GPU right now; sampling here could run it "
            "out of memory. Try again when it has finished, or stop it."
        )
    gpu = physical_gpu(0)
    other = holder(gpu)
    return busy_message(other, gpu) if other else None


def pid_alive(pid: int, started: str | None = None) -> bool:
    """True if ``pid`` is a live (not zombie) process and, given ``started``, the same process that was recorded."""
    if not process_exists(pid):
        return False
    _reap(pid)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): trust kill(0)
        return True
    return fields[0] != "Z" and (started is None or fields[19] == started)


def is_alive(run: Run) -> bool:
    """Whether the run's recorded worker process is still running (for a Slurm run: whether its job is)."""
    if run.slurm_job_id:
        return slurm.job_alive(run.slurm_job_id)
    return bool(run.pid) and pid_alive(run.pid, run.pid_started)


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


def log_tail(run: Run, lines: int = 20) -> str:
    """The last lines of the run's worker log file ("" when there is none)."""
    return RunFiles(Path(run.output_dir)).log_tail(lines) if run.output_dir else ""


def slurm_jobs(session: Session) -> list[str]:
    """The Slurm job ids of the live runs."""
    return [r.slurm_job_id for r in queries.list_runs(session, LIVE) if r.slurm_job_id]


def poll_slurm() -> dict[str, slurm.JobState | None] | None:
    """What Slurm says of every live run's job: one short read of the ids, then one ``squeue`` outside any
    transaction (slurm.job_states); None when Slurm does not answer. The scheduler calls it before its transaction."""
    with get_sessionmaker().begin() as session:
        jobs = slurm_jobs(session)
    return slurm.job_states(jobs) if jobs else {}


def reconcile(session: Session, slurm_states: dict | None = None) -> list[int]:
    """Mark live runs whose worker process is gone as failed, with the log's last lines. Returns their ids. A worker
    gone after a stop was asked of it (:func:`stop_worker`) leaves its run stopped instead, saying so.

    Queued runs that never got a worker (no pid) are left alone: they are waiting for their turn. Runs on Slurm follow
    their job's state: ``slurm_states`` from :func:`poll_slurm` (read here, one squeue, when not given); while Slurm
    does not answer they are kept as they were.
    """
    failed = []
    live = queries.list_runs(session, LIVE)
    if slurm_states is None and any(r.slurm_job_id for r in live):
        slurm_states = slurm.job_states([r.slurm_job_id for r in live if r.slurm_job_id])
    for run in live:
        if run.slurm_job_id:  # Slurm says what became of the job
            if slurm_states is not None and slurm.reconcile(session, run, slurm_states.get(run.slurm_job_id)):
                failed.append(run.id)
            continue
        if run.pid is None or is_alive(run):
            continue
        if queries.stop_asked(session, run.id):
            # asked to stop before its handler was in place (Python still starting), or killed by whatever the stop
            # interrupted: either way the user's stop ended it, not a fault (issue 36)
            queries.finish_run(session, run, RunStatus.STOPPED, stopped_early(run))
            queries.add_log(session, run.id, f"run stopped: {stopped_early(run)}")
            continue
        tail = log_tail(run)
        queries.finish_run(session, run, RunStatus.FAILED, "worker exited unexpectedly" + (f"\n{tail}" if tail else ""))
        queries.add_log(session, run.id, "worker exited unexpectedly", "ERROR")
        failed.append(run.id)
    return failed


def stopped_early(run: Run) -> str:
    """What a run's row says when its worker ended on a stop before it could save and mark the run stopped itself."""
    if not run.current_step:
        return "stopped while its worker was starting, before the first step (nothing was trained)"
    return f"stopped at step {run.current_step}; its worker ended before it saved (resume continues from the last checkpoint)"


def _reap(pid: int) -> None:
    """Collect the exit status of a worker this process started, so it doesn't linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def active_runs(session: Session) -> list[Run]:
    """Runs that hold a training slot: running, or queued with a live worker that has not marked itself yet."""
    return [r for r in queries.list_runs(session, LIVE) if r.pid and not r.slurm_job_id and is_alive(r)]


def schedule(
    session: Session,
    max_concurrent: int = 1,
    before_start: Callable[[Run], None] | None = None,
    slurm_states: dict | None = None,
) -> list[int]:
    """Reconcile, then start the oldest waiting runs while fewer than ``max_concurrent`` train. Returns started ids.
    ``before_start(run)`` is called before each worker starts (the dashboard frees its GPU model there).

    The queue lives in the database (queued runs without a worker, oldest first), so it survives a dashboard
    restart: whoever calls this next picks up where the last caller left off; callers in other processes take turns
    (:func:`storage.queries.lock_scheduling`), so ``max_concurrent`` holds across dashboards. Runs on the slurm executor take no local
    slot: each is submitted at once, and Slurm's queue holds it. ``slurm_states``: see :func:`reconcile`.
    """
    queries.lock_scheduling(session)  # one limit across processes: the count and the starts in one transaction
    reconcile(session, slurm_states)
    free = max_concurrent - len(active_runs(session))
    queued = [r for r in queries.list_runs(session, [RunStatus.QUEUED]) if not r.pid and not r.slurm_job_id]
    waiting = sorted(queued, key=lambda r: r.id)
    on_slurm = [r for r in waiting if (r.config or {}).get("executor") == "slurm"]
    local = [r for r in waiting if r not in on_slurm]
    started = []
    for run in on_slurm + local[: max(free, 0)]:
        if before_start is not None and run not in on_slurm:  # a Slurm job needs nothing of this machine's GPU
            before_start(run)
        start_worker(session, run)
        started.append(run.id)
    return started
