"""Starting a run's worker, or any job of grpo-studio's, as a detached process.

A worker runs in its own session (``start_new_session``), with its output going to the run's log file, so it
survives the dashboard or shell that launched it. It is started by module name (trainer.supervise.commands), so the
supervisor never imports the training process's code. A run on the slurm executor is submitted as a Slurm job
instead (trainer.supervise.slurm), so the dashboard and the CLI start both kinds alike.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sqlalchemy.orm import Session

from storage import queries
from storage.db import data_dir
from storage.models import Run
from trainer.config import ConfigError, RunConfig
from trainer.loading.backend import cache_env
from trainer.supervise import slurm, slurm_array, warm_start
from trainer.supervise.commands import supervised, with_package_path, worker_command
from trainer.supervise.gpu_lease import gpu_visible
from trainer.supervise.processes import process_start_time
from trainer.supervise.run_files import RunFiles
from trainer.supervise.workers import is_alive


def start_worker(session: Session, run: Run) -> int | str | None:
    """Start a detached worker process for ``run``; records its pid and output dir on the row, returns the pid. A run
    on the slurm executor is submitted as a Slurm job instead (trainer.supervise.slurm): returns the job id, or None
    when Slurm refused it (the run is then failed with Slurm's message)."""
    if run.pid and is_alive(run):
        raise RuntimeError(f"run {run.id} already has a live worker (pid {run.pid})")
    config = _absolute_paths(session, run)
    if config is not None and config.executor == "slurm":
        return slurm.submit(session, run, config)
    files = RunFiles.of(run.output_dir, run.id).create()
    settings = RunConfig.from_stored(run.config)
    command = worker_command(run.id, settings.num_processes, settings.deepspeed_stage, cpu=not gpu_visible())
    if config is not None and config.vllm_mode == "server":
        command = supervised(run.id, command)
    # Forked by this process's warm parent where one is ready (trainer.supervise.warm_start): no imports to wait for.
    pid = warm_start.start(command, files.log, files.root, detached_env())
    queries.worker_launched(session, run, pid, process_start_time(pid), str(files.root))
    queries.add_log(session, run.id, f"{queries.WORKER_STARTED} (pid {pid})")
    return pid


def start_slurm_runs(session: Session, runs: list[Run]) -> list[int]:
    """Submit queued runs on the slurm executor: the members of one sweep together as one job array
    (trainer.supervise.slurm_array), every other run as its own job (:func:`start_worker`). Returns the ids
    submitted (a run whose config cannot be read is started alone: its worker reports it)."""
    readable, started = [], []
    for run in runs:
        config = _absolute_paths(session, run)
        if config is None:
            start_worker(session, run)
            started.append(run.id)
        else:
            readable.append((run, config))
    for group in slurm_array.groups(readable):
        if len(group) == 1:
            slurm.submit(session, *group[0])
        else:
            slurm_array.submit_array(session, group)
        started += [run.id for run, _ in group]
    return sorted(started)


def spawn_detached(command: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    """Start ``command`` as a detached process of its own session (it outlives the dashboard), its output appended to
    ``log``, in ``cwd``: an evaluation job, say."""
    return warm_start.spawn(command, log, cwd, detached_env())


def detached_env() -> dict[str, str]:
    """The environment of a detached job: this process's, the package importable, and the compile caches under the
    data dir unless the caller chose otherwise (trainer.loading.backend.CACHE_VARIABLES says why)."""
    return with_package_path(cache_env(data_dir()) | dict(os.environ))


def _absolute_paths(session: Session, run: Run) -> RunConfig | None:
    """Make the run's relative local paths absolute against this (the launching) process's working directory, where
    they were validated: the worker runs in the run directory. Returns the config (None if it can't be read)."""
    try:
        config, _ = RunConfig.from_dict(run.config or {})
    except ConfigError:
        return None  # the worker reports a config it cannot read
    absolute = config.with_absolute_paths(Path.cwd())
    if absolute != config:
        queries.set_config(session, run, {**(run.config or {}), **absolute.to_dict()})
    return absolute
