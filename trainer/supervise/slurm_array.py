"""A sweep's members on the Slurm executor as one job array (issue 41): ``sbatch --array=0-K``, one task a member.

A sweep of 16 points submitted as 16 jobs is 16 entries in everyone's ``squeue``, 16 priorities to age, and 16
things to cancel; an array is one job to see and to cancel (``scancel JOBID``), and Slurm starts its tasks as
nodes free up. Each task is the member's normal job (trainer.supervise.slurm): the array's script maps
``$SLURM_ARRAY_TASK_ID`` to its member's run id, its run directory and shared-dir token, and then runs the same
launch lines a single run's script does. Each member's row records ``JOBID_TASK`` (``4242_1``), the id Slurm's own
commands take for one task, so stopping (``scancel --signal=TERM --full 4242_1``), requeueing, the scheduler's state
reading and the runs list all work per member as they do for a single job.

Slurm gives an array one ``--output`` pattern; ``%a`` in it is the task's index. The array's directory holds
``task-<i>.log``, a link to member i's own ``worker.log``, so each task's output (and slurmstepd's ``*** JOB ...
CANCELLED`` notices, which trainer.supervise.slurm.stop_reason reads) lands in its member's log, as for a single job.

Only members whose job options are the same (the cluster settings, which a sweep does not vary) share an array; a
member alone in its group, a member resumed later, or a TPE point asked after the others, is submitted as a single
job. A submission Slurm refuses fails every member of the array with Slurm's message.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from storage import queries
from storage.db import data_dir, slug
from storage.models import Run
from trainer.config.cluster import slurm_seconds
from trainer.supervise.commands import PACKAGE_ROOT
from trainer.supervise.run_files import RunFiles
from trainer.supervise.slurm import (
    LIMIT_ENV,
    MARKER_ENV,
    STARTED_ENV,
    SlurmError,
    job_files,
    launch_lines,
    sbatch,
    sbatch_options,
    sbatch_value,
    submission_refused,
)

if TYPE_CHECKING:
    from trainer.config import RunConfig

# The options that name one run (its job name, its log, its directory): an array's script sets them per task.
PER_RUN_OPTIONS = ("--job-name=", "--output=", "--chdir=")


@dataclass(frozen=True)
class ArrayFiles:
    """Where one job array's script and its tasks' log links live: ``sweeps/<sweep id>/array-<first run id>/``."""

    root: Path

    @classmethod
    def of(cls, sweep_id: int, first_run_id: int) -> ArrayFiles:
        """The directory of the array whose first task is run ``first_run_id`` of sweep ``sweep_id``."""
        return cls(data_dir() / "sweeps" / str(sweep_id) / f"array-{first_run_id}")

    @property
    def script(self) -> Path:
        """The batch script (readable: the same array can be submitted by hand)."""
        return self.root / "slurm-array.sh"

    def task_log(self, index: int | str) -> Path:
        """Task ``index``'s output: a link to its member's log (``"%a"``: the pattern sbatch expands)."""
        return self.root / f"task-{index}.log"


@dataclass(frozen=True)
class Member:
    """One task of an array: the member's run id, its config, its run directory and its shared-dir token."""

    run_id: int
    config: RunConfig
    files: RunFiles
    marker: str


def shared_options(config: RunConfig, run_id: int, files: RunFiles) -> tuple[str, ...]:
    """The job options of a member that are not its own (:data:`PER_RUN_OPTIONS` left out): members with the same
    ones can share an array."""
    return tuple(o for o in sbatch_options(config, run_id, files) if not o.startswith(PER_RUN_OPTIONS))


def groups(members: list[tuple[Run, RunConfig]]) -> list[list[tuple[Run, RunConfig]]]:
    """Queued runs on the slurm executor, grouped into what is submitted together: the members of one sweep whose
    job options are the same, in run id order; every other run alone. Groups are ordered by their first run's id."""
    found: dict[tuple, list[tuple[Run, RunConfig]]] = {}
    for run, config in sorted(members, key=lambda m: m[0].id):
        files = RunFiles.of(run.output_dir, run.id)
        key = (run.sweep_id, shared_options(config, run.id, files)) if run.sweep_id else ("run", run.id)
        found.setdefault(key, []).append((run, config))
    return sorted(found.values(), key=lambda group: group[0][0].id)


def array_script(sweep_id: int, members: list[Member], files: ArrayFiles) -> str:
    """The array's batch script: the members' shared options with ``--array=0-K`` and the task log pattern, then a
    ``case`` on ``$SLURM_ARRAY_TASK_ID`` that goes to the member's directory, exports its token and runs its launch
    lines (trainer.supervise.slurm.launch_lines: ``exec`` of the worker, as in a single run's script)."""
    first = members[0]
    ids = " ".join(str(m.run_id) for m in members)
    options = [
        f"--job-name=grpo-sweep-{sweep_id}-{slug(first.config.name, 'run')[:40]}",
        f"--array=0-{len(members) - 1}",
        f"--output={sbatch_value(str(files.task_log('%a')))}",
        *shared_options(first.config, first.run_id, first.files),
    ]
    lines = [
        "#!/bin/bash",
        f"# grpo-studio sweep {sweep_id}: runs {ids} as one Slurm job array (task i is the i-th run), written by the",
        "#   dashboard, submitted with sbatch --parsable --export=ALL <this file>",
        "# The job reads DATABASE_URL (PostgreSQL) from the environment it was submitted from: to submit it by hand,",
        "# export the dashboard's DATABASE_URL first.",
        *(f"#SBATCH {option}" for option in options),
        "set -euo pipefail",
        f"export PYTHONPATH={shlex.quote(str(PACKAGE_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"export GRPO_STUDIO_HOME={shlex.quote(str(data_dir()))}",
        f"export {LIMIT_ENV}={slurm_seconds(first.config.slurm_time) or 0} {STARTED_ENV}=$(date +%s)",
        'echo "slurm job ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} on $SLURM_JOB_NODELIST"',
        'case "$SLURM_ARRAY_TASK_ID" in',
    ]
    for index, member in enumerate(members):
        lines += [
            f"  {index})",
            f"    cd {shlex.quote(str(member.files.root))}",
            f"    export {MARKER_ENV}={member.marker}",
            *(f"    {line}" for line in launch_lines(member.config, member.run_id)),
            "    ;;",
        ]
    lines += ['  *) echo "array task $SLURM_ARRAY_TASK_ID is no member of this sweep" >&2; exit 1 ;;', "esac"]
    return "\n".join(lines) + "\n"


def submit_array(session: Session, members: list[tuple[Run, RunConfig]]) -> str | None:
    """Write each member's run directory and token, the array's script and its task log links, submit it as one
    job, and record ``JOBID_TASK`` on each member; returns the array's job id. A submission Slurm refuses fails every
    member with Slurm's message."""
    runs = [run for run, _ in members]
    tasks = []
    for run, config in members:
        tasks.append(Member(run.id, config, *job_files(run)))
    array = ArrayFiles.of(runs[0].sweep_id, runs[0].id)
    array.root.mkdir(parents=True, exist_ok=True)
    for index, task in enumerate(tasks):
        link = array.task_log(index)
        link.unlink(missing_ok=True)
        link.symlink_to(task.files.log)
    array.script.write_text(array_script(runs[0].sweep_id, tasks, array))
    try:
        job_id = sbatch(array.script)
    except SlurmError as exc:
        for run in runs:
            submission_refused(session, run, exc)
        return None
    for index, (run, task) in enumerate(zip(runs, tasks, strict=True)):
        task_id = f"{job_id}_{index}"
        queries.slurm_submitted(session, run, task_id, str(task.files.root))
        queries.add_log(
            session, run.id, f"submitted to Slurm as task {index} of job array {job_id}: job {task_id} ({array.script})"
        )
    return job_id
