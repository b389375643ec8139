"""The Slurm executor: a run's worker as a Slurm batch job, submitted, stopped and watched with Slurm's own commands.

grpo-studio schedules nothing here; Slurm does. The dashboard writes a job script into the run directory (readable,
so a user can submit the same job by hand), submits it with ``sbatch --parsable`` and records the job id on the run.
From then on the run is in Slurm's queue: it stays ``queued`` until the worker starts on a node and marks itself
running, and it ends as the worker says (completed, stopped, failed). What the worker cannot say, Slurm does:
:func:`reconcile` reads the job's state from ``squeue`` (which keeps ended jobs for MinJobAge seconds) or ``sacct``
(where there is an accounting database) and marks a run whose job ended without it (killed, cancelled, timed out, a
failed node, never started) as failed with Slurm's state and reason.

A stop sends SIGTERM to the job's processes (``scancel --signal=TERM --full``) rather than cancelling it: the worker
ends at the next step boundary and saves its adapter, and the job then ends by itself. A plain ``scancel`` would
SIGKILL it KillWait seconds later, however long the step. The job also asks for SIGTERM 5 minutes before its time
limit (``--signal=B:TERM@300``), so a run that would time out stops and saves instead; resume continues it.

Every node must reach the same database and the same data directory: the dashboard refuses this executor on SQLite
(trainer.config.cluster), and the job checks the data directory is shared: the dashboard writes a random token
into the run directory, the job's environment carries it, and the worker fails the run with a clear message when it
does not find it on its node (:func:`shared_dir_problem`), or confirms it with a marker the dashboard can see.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from storage import queries
from storage.db import data_dir, slug
from storage.models import Run, RunStatus
from trainer.config.cluster import extra_option, slurm_seconds, stop_margin, vllm_node_layout
from trainer.safe_text import printable
from trainer.supervise.commands import (
    MAIN_NODE,
    PACKAGE_ROOT,
    VLLM_GROUP_PORT_ENV,
    VLLM_SERVER_ENV,
    node_command,
    supervised,
    vllm_serve_command,
    worker_command,
)
from trainer.supervise.run_files import RunFiles

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from trainer.config import RunConfig

# Slurm's job states (squeue(1) "JOB STATE CODES") that mean the job will still run or is running.
PENDING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING"})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "SUSPENDED", "STOPPED"})
MARKER_ENV = "GRPO_STUDIO_SHARED_MARKER"
# The job's time limit in seconds (0: none) and when its script started, for the worker to tell a time-limit stop
LIMIT_ENV, STARTED_ENV = "GRPO_STUDIO_SLURM_LIMIT_S", "GRPO_STUDIO_JOB_STARTED"
TIMEOUT_S = 30  # a Slurm command that takes longer than this means the controller is unreachable


class SlurmError(RuntimeError):
    """A Slurm command failed or is missing; the message says which and what it printed."""


@dataclass(frozen=True)
class JobState:
    """A job as Slurm reports it: its state (RUNNING, FAILED...), the reason Slurm gives, its nodes and exit code."""

    state: str
    reason: str = ""
    nodes: str = ""
    exit_code: str = ""

    @property
    def live(self) -> bool:
        """Whether the job is still waiting or running."""
        return self.state in PENDING_STATES or self.state in RUNNING_STATES

    def describe(self, job_id: str) -> str:
        """One sentence for the run's error: what Slurm says happened to the job, its exit read as people read it
        (Slurm's ExitCode is "code:signal"; a batch script that ``exec``s the worker, killed by a signal, is reported
        with the reason JobLaunchFailure, which says nothing true about it)."""
        why = {"TIMEOUT": " (it reached its time limit)", "NODE_FAIL": " (a node it ran on failed)"}.get(self.state, "")
        text = f"Slurm job {job_id} ended {self.state}{why}"
        exited = exit_text(self.exit_code)
        misleading = self.reason == "JobLaunchFailure" and exited.startswith("killed")
        details = [f"reason: {self.reason}"] if self.reason and self.reason != "None" and not misleading else []
        details += [exited] if exited else []
        details += [f"nodes {self.nodes}"] if self.nodes else []
        return text + (f" ({', '.join(details)})" if details else "")


def exit_text(exit_code: str) -> str:
    """Slurm's "code:signal" (``0:9``, ``137:0``, ``1:0``) in words: "killed by signal 9 (SIGKILL)", "exit code 1"."""
    import signal as signals

    code, _, number = exit_code.partition(":")
    if not code.isdigit():
        return f"exit code {exit_code}" if exit_code else ""
    signal_number = int(number) if number.isdigit() else 0
    if not signal_number and int(code) > 128:  # the shell's way to say a child died of signal code - 128
        signal_number = int(code) - 128
    if signal_number:
        try:
            name = signals.Signals(signal_number).name
        except ValueError:
            name = "an unknown signal"
        return f"killed by signal {signal_number} ({name})"
    return f"exit code {code}" if int(code) else ""


def slurm(*args: str, timeout: float = TIMEOUT_S) -> str:
    """Run a Slurm command and return its output; raises :class:`SlurmError` when it is missing, fails or does not
    answer within ``timeout`` seconds (a tick's poll passes a shorter one)."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise SlurmError(
            f"{args[0]} not found: the slurm executor needs Slurm's client commands (sbatch, squeue, scancel) on the "
            "PATH of the machine that runs the dashboard"
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{args[0]} did not answer within {timeout:g} s: is slurmctld reachable?") from None
    if done.returncode != 0:
        raise SlurmError(f"{shlex.join(args)} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


# --- the job script --------------------------------------------------------------------------------------------------
def sbatch_options(config: RunConfig, run_id: int, files: RunFiles) -> list[str]:
    """The job's ``#SBATCH`` options, from the run's cluster settings, each value quoted for sbatch's own reading of
    these lines (:func:`sbatch_value`)."""
    options = [
        f"--job-name=grpo-{run_id}-{slug(config.name, 'run')[:40]}",
        f"--output={sbatch_value(str(files.log))}",
        "--open-mode=append",  # a resumed run's job adds to the same log
        f"--chdir={sbatch_value(str(files.root))}",
        f"--nodes={config.slurm_nodes}",
        "--ntasks-per-node=1",  # one launcher per node; accelerate starts the processes
        f"--signal=B:TERM@{stop_margin(slurm_seconds(config.slurm_time))}",
    ]
    settings = (
        ("partition", config.slurm_partition),
        ("gpus-per-node", config.slurm_gpus_per_node or ""),
        ("time", config.slurm_time.strip()),
        ("account", config.slurm_account),
        ("cpus-per-task", config.slurm_cpus_per_task or ""),
        ("mem", config.slurm_mem),
    )
    options += [f"--{name}={sbatch_value(str(value))}" for name, value in settings if value]
    options += [
        flag for flag, on in (("--exclusive", config.slurm_exclusive), ("--requeue", config.slurm_requeue)) if on
    ]
    for option in config.slurm_extra:  # validated: each is one option (trainer.config.cluster.extra_option)
        key, value = extra_option(option) or (option.strip(), None)
        if value is None:
            options.append(key)
        else:
            options.append(f"{key}={sbatch_value(value)}" if key.startswith("--") else f"{key} {sbatch_value(value)}")
    return options


def sbatch_value(value: str) -> str:
    """``value`` as sbatch reads it from an ``#SBATCH`` line: as it is when it holds only characters sbatch gives no
    meaning to, else in double quotes with ``"`` and ``\\`` escaped (sbatch, not a shell, reads these lines: it
    splits them at spaces, takes ``#`` as a comment and honours double quotes and backslashes; it expands no ``$``).
    Validation already refuses line breaks and control characters; this keeps a value that passes it one value."""
    if re.fullmatch(r"[\w@%+=:,./-]+", value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Where the vLLM node serves in the multi-node layout (its node is the job's own: no other job shares the ports).
VLLM_NODE = "$GRPO_STUDIO_VLLM_NODE"
VLLM_PORT, VLLM_GROUP_PORT = 8000, 51216  # trl vllm-serve's default port; TRL's default weight-sync group port


def launch_lines(config: RunConfig, run_id: int) -> list[str]:
    """The script's last lines: the worker on one node (``exec``, so Slurm's signals reach it directly), or
    ``srun`` running accelerate once per node with the first node as the rendezvous, or (server mode on several
    nodes) :func:`vllm_node_lines`."""
    if vllm_node_layout(config):
        return vllm_node_lines(config, run_id)
    if config.slurm_nodes > 1:
        inner = shlex.join(node_command(run_id, config.slurm_nodes, config.num_processes, config.deepspeed_stage))
        for name in ("$SLURM_NODEID", MAIN_NODE):  # expanded by each node's shell, not quoted away
            inner = inner.replace(shlex.quote(name), f'"{name}"')
        return [
            f'export {MAIN_NODE[1:]}=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c " + shlex.quote(inner),
        ]
    command = worker_command(run_id, config.num_processes, config.deepspeed_stage, cpu=config.slurm_gpus_per_node == 0)
    if config.vllm_mode == "server":
        command = supervised(run_id, command)
    return ["exec " + shlex.join(command)]


def vllm_node_lines(config: RunConfig, run_id: int) -> list[str]:
    """The layout TRL's docs and open-r1 use for multi-node GRPO: ``trl vllm-serve`` on the job's last node (all its
    GPUs, tensor parallel, listening on the job's network), accelerate on the other ``slurm_nodes - 1`` (Slurm
    numbers the nodes of an allocation 0.., the last is excluded, so ``$SLURM_NODEID`` is the machine rank), every
    trainer pointed at the server's host and port (trainer.job.trl_args). Neither step is ``exec``ed: the script
    forwards SIGTERM (a stop, the time limit's early signal) to the training step, waits for it, then stops the
    server, and exits with training's status."""
    from trainer.loading.backend import model_path

    nodes = config.slurm_nodes - 1
    serve = vllm_serve_command(
        model_path(config),
        config.slurm_gpus_per_node,
        VLLM_PORT,
        config.vllm_gpu_memory_utilization,
        config.max_seq_length,
        host="0.0.0.0",
    )
    inner = shlex.join(node_command(run_id, nodes, config.num_processes, config.deepspeed_stage))
    for name in ("$SLURM_NODEID", MAIN_NODE):  # expanded by each node's shell, not quoted away
        inner = inner.replace(shlex.quote(name), f'"{name}"')
    hosts = 'scontrol show hostnames "$SLURM_JOB_NODELIST"'
    return [
        f"export {MAIN_NODE[1:]}=$({hosts} | head -n 1) {VLLM_NODE[1:]}=$({hosts} | tail -n 1)",
        f'export {VLLM_SERVER_ENV}="{VLLM_NODE}:{VLLM_PORT}" {VLLM_GROUP_PORT_ENV}={VLLM_GROUP_PORT}',
        f'srun --nodes=1 --ntasks=1 --nodelist="{VLLM_NODE}" {shlex.join(serve)} > vllm-server.log 2>&1 &',
        "server=$!",
        f'srun --nodes={nodes} --ntasks-per-node=1 --exclude="{VLLM_NODE}" --kill-on-bad-exit=1 bash -c '
        + shlex.quote(inner)
        + " &",
        "training=$!",
        "trap 'kill -TERM \"$training\" 2>/dev/null' TERM",
        # set -e is on: every status is caught, so a stop's interrupted wait or the server's end can't cut the script
        'while kill -0 "$training" 2>/dev/null; do wait "$training" && status=0 || status=$?; done',
        'kill -TERM "$server" 2>/dev/null || true',
        'wait "$server" 2>/dev/null || true',
        'exit "${status:-1}"',
    ]


def job_script(config: RunConfig, run_id: int, files: RunFiles, marker: str) -> str:
    """The batch script of the run's job: its options, the environment a worker needs, and the launch line."""
    root = PACKAGE_ROOT
    lines = [
        "#!/bin/bash",
        f"# grpo-studio run {run_id} ({printable(config.name, one_line=True)}): written by the dashboard, submitted with",
        "#   sbatch --parsable --export=ALL <this file>",
        "# The job reads DATABASE_URL (PostgreSQL) from the environment it was submitted from: to submit it by hand,",
        "# export the dashboard's DATABASE_URL first.",
        *(f"#SBATCH {option}" for option in sbatch_options(config, run_id, files)),
        "set -euo pipefail",
        f"export PYTHONPATH={shlex.quote(str(root))}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"export GRPO_STUDIO_HOME={shlex.quote(str(data_dir()))}",
        f"export {MARKER_ENV}={marker}",
        f"export {LIMIT_ENV}={slurm_seconds(config.slurm_time) or 0} {STARTED_ENV}=$(date +%s)",
        'echo "slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"',
        *launch_lines(config, run_id),
    ]
    return "\n".join(lines) + "\n"


# --- submitting, stopping, watching ----------------------------------------------------------------------------------
def submit(session: Session, run: Run, config: RunConfig) -> str | None:
    """Write the run's job script and marker, submit it, and record the job id; returns it. A submission Slurm
    refuses (a bad partition, no sbatch) fails the run with Slurm's message rather than leaving it queued."""
    files, marker = job_files(run)
    files.slurm_script.write_text(job_script(config, run.id, files, marker))
    try:
        job_id = sbatch(files.slurm_script)
    except SlurmError as exc:
        submission_refused(session, run, exc)
        return None
    queries.slurm_submitted(session, run, job_id, str(files.root))
    queries.add_log(session, run.id, f"submitted to Slurm as job {job_id} ({files.slurm_script})")
    return job_id


def job_files(run: Run) -> tuple[RunFiles, str]:
    """The run's directory, ready for a job: its shared-dir token written (the worker checks the node sees it) and
    an earlier job's node marker gone. Returns the files and the token."""
    files = RunFiles.of(run.output_dir, run.id).create()
    marker = secrets.token_hex(16)
    files.shared_marker.write_text(marker)
    files.node_marker.unlink(missing_ok=True)
    return files, marker


def sbatch(script: Path) -> str:
    """Submit ``script`` with the submitting environment (DATABASE_URL among it); returns the job id (SlurmError
    when Slurm refuses)."""
    return slurm("sbatch", "--parsable", "--export=ALL", str(script)).strip().split(";")[0]


def submission_refused(session: Session, run: Run, exc: SlurmError) -> None:
    """A submission Slurm refused (a bad partition, no sbatch) fails the run with Slurm's message rather than leaving
    it queued."""
    queries.finish_run(session, run, RunStatus.FAILED, f"could not submit to Slurm: {exc}")
    queries.add_log(session, run.id, f"could not submit to Slurm: {exc}", "ERROR")


# A tick's one squeue for every job may take this long: with slurmctld down each call would otherwise wait the full
# TIMEOUT_S, and the dashboard's scheduler would stall (50 live runs took minutes a pass, one call each).
POLL_TIMEOUT_S = 5
_not_answering: list[str] = []  # the outage already reported (logged once until Slurm answers again)


def job_states(job_ids: list[str], timeout: float | None = None) -> dict[str, JobState | None] | None:
    """Every job's state with one ``squeue`` for all of them (and one ``sacct`` for those squeue no longer keeps);
    a job neither knows maps to None. Returns None when Slurm does not answer, saying so once in the log until it
    answers again. Call it outside any database transaction: it may take ``timeout`` seconds."""
    if not job_ids:
        return {}
    timeout = POLL_TIMEOUT_S if timeout is None else timeout
    try:
        out = slurm(
            "squeue",
            "--noheader",
            "--array",  # one line per array task (a sweep's members, trainer.supervise.slurm_array), pending too
            "--states=all",
            f"--jobs={','.join(job_ids)}",
            "--format=%i|%T|%r|%N",
            timeout=timeout,
        )
    except SlurmError as exc:
        if "Invalid job id" not in str(exc):
            return _silent(exc)
        out = ""
    states: dict[str, JobState | None] = {job_id: None for job_id in job_ids}
    for line in out.strip().splitlines():
        job_id, *fields = line.split("|")
        state = JobState(*fields)
        if not state.live and not state.exit_code:  # squeue has no exit code; scontrol keeps it as long as squeue
            state = JobState(state.state, state.reason, state.nodes, _scontrol_exit_code(job_id, timeout))
        states[job_id if job_id in states else job_id.split("_")[0]] = state  # an array task is asked as JOBID_TASK
    missing = [job_id for job_id, state in states.items() if state is None]
    if missing:
        try:
            out = slurm(
                "sacct",
                "--noheader",
                "--parsable2",
                "-X",
                f"--jobs={','.join(missing)}",
                "--format=JobID,State,Reason,NodeList,ExitCode",
                timeout=timeout,
            )
        except SlurmError:  # no accounting database
            out = ""
        for line in out.strip().splitlines():
            job_id, state, reason, nodes, exit_code = line.split("|")
            states[job_id] = JobState(state.split()[0], reason, nodes, exit_code)
    if _not_answering:
        log.info("Slurm is answering again")
        _not_answering.clear()
    return states


def _scontrol_exit_code(job_id: str, timeout: float) -> str:
    """An ended job's ExitCode ("code:signal") from ``scontrol show job``, or "" when it can't be read."""
    try:
        out = slurm("scontrol", "show", "job", "-o", job_id, timeout=timeout)
    except SlurmError:
        return ""
    found = re.search(r"\bExitCode=(\d+:\d+)", out)
    return found.group(1) if found else ""


def _silent(exc: SlurmError) -> None:
    if not _not_answering:
        log.warning("Slurm is not answering (%s): runs on Slurm are kept as they were until it does", exc)
        _not_answering.append(str(exc))
    return None


def slurm_not_answering() -> str | None:
    """What the last poll found when Slurm did not answer, or None."""
    return _not_answering[0] if _not_answering else None


def job_state(job_id: str) -> JobState | None:
    """One job's state (:func:`job_states`, with the longer time limit of a single call); None when Slurm no longer
    knows the job; raises :class:`SlurmError` when Slurm does not answer."""
    states = job_states([job_id], timeout=TIMEOUT_S)
    if states is None:
        raise SlurmError(slurm_not_answering() or "Slurm did not answer")
    return states.get(job_id)


def job_alive(job_id: str) -> bool:
    """Whether the job is still waiting or running (an unreachable Slurm counts as alive: never fail a run on it)."""
    try:
        state = job_state(job_id)
    except SlurmError:
        return True
    return state is not None and state.live


def stop(session: Session, run: Run) -> bool:
    """Ask the run's job to stop: SIGTERM to its processes when it runs (the worker saves and ends the run as
    stopped), cancel it when it is still waiting (the run is marked stopped here). Returns True if a signal was sent."""
    state = job_state(run.slurm_job_id)
    if state is not None and state.state in RUNNING_STATES:
        slurm("scancel", "--signal=TERM", "--full", run.slurm_job_id)
        queries.add_log(session, run.id, f"stop requested (SIGTERM to Slurm job {run.slurm_job_id})")
        return True
    if state is not None and state.live:
        slurm("scancel", run.slurm_job_id)
    queries.finish_run(session, run, RunStatus.STOPPED)
    queries.add_log(session, run.id, f"stopped before Slurm started job {run.slurm_job_id}")
    return False


def reconcile(session: Session, run: Run, state: JobState | None) -> bool:
    """Bring the run in line with its job's ``state`` (from :func:`job_states`): a job Slurm requeued (preemption,
    ``scontrol requeue``, a failed node) makes a running run queued again, "requeued by Slurm" (the worker resumes
    from its latest checkpoint when the job starts again); a job that ended without the worker ending the run marks
    it failed with Slurm's account. Returns True if it failed the run."""
    if state is not None and state.state in PENDING_STATES:
        if run.status is RunStatus.RUNNING:
            queries.requeued(session, run)
            queries.add_log(
                session,
                run.id,
                f"requeued by Slurm (job {run.slurm_job_id} {state.state}, "
                f"{state.reason}): it resumes from its latest checkpoint when the job starts again",
            )
        return False
    if state is not None and state.live:
        return False
    session.refresh(run)  # the worker may have ended the run since it was read
    if run.status.terminal:
        return False
    files = RunFiles(Path(run.output_dir)) if run.output_dir else None
    error = state.describe(run.slurm_job_id) if state else f"Slurm no longer knows job {run.slurm_job_id}"
    if files is not None and not files.node_marker.exists():
        error += (
            f"; the job never confirmed it sees the run directory {files.root}: the data dir ($GRPO_STUDIO_HOME) "
            "must be on a filesystem every node shares"
        )
    tail = files.log_tail() if files else ""
    queries.finish_run(session, run, RunStatus.FAILED, error + (f"\n{tail}" if tail else ""))
    queries.add_log(session, run.id, error, "ERROR")
    return True


# Pending reasons (squeue(1) "JOB REASON CODES") that mean the job can never start as it is: waiting won't help.
NEVER_STARTS = {
    "PartitionNodeLimit": "it asks for more nodes than the partition has",
    "PartitionTimeLimit": "its time limit is over the partition's",
    "BadConstraints": "no node has what it asks for",
    "InvalidAccount": "the account is not valid",
    "InvalidQOS": "the QOS is not valid",
    "QOSMaxWallDurationPerJobLimit": "its time limit is over its QOS's",
    "AssocMaxWallDurationPerJobLimit": "its time limit is over its account's",
    "QOSMaxNodePerJobLimit": "it asks for more nodes than its QOS allows",
    "AssocMaxNodesPerJobLimit": "it asks for more nodes than its account allows",
    "QOSMaxGRESPerJob": "it asks for more GPUs than its QOS allows",
}


@dataclass(frozen=True)
class Waiting:
    """A pending job's place in its partition's queue (1: next) and Slurm's reason for the wait."""

    position: int
    reason: str = ""

    def describe(self) -> str:
        """ "queue #2 (Resources)", or the reason it never starts."""
        if self.reason in NEVER_STARTS:
            return f"queue #{self.position}, can never start: {self.reason} ({NEVER_STARTS[self.reason]})"
        shown = f" ({self.reason})" if self.reason and self.reason != "None" else ""
        return f"queue #{self.position}{shown}"


def queue_positions() -> dict[str, Waiting]:
    """Each pending job's place in its partition's queue, in Slurm's priority order, with its pending reason (one
    squeue; {} when Slurm does not answer)."""
    try:
        out = slurm(
            "squeue",
            "--noheader",
            "--array",
            "--states=PENDING",
            "--sort=-p,i",
            "--format=%i|%P|%r",
            timeout=POLL_TIMEOUT_S,
        )
    except SlurmError as exc:
        _silent(exc)
        return {}
    positions, seen = {}, {}
    for line in out.split():
        job_id, partition, reason = (line.split("|") + [""])[:3]
        seen[partition] = seen.get(partition, 0) + 1
        positions[job_id] = Waiting(seen[partition], reason)
    return positions


# --- on the node -----------------------------------------------------------------------------------------------------
def shared_dir_problem(root: Path) -> str | None:
    """Run by the worker in a Slurm job: None when the run directory holds the token the dashboard wrote (the data
    dir is shared; a marker saying so is left for the dashboard), else the message the run fails with."""
    token = os.environ.get(MARKER_ENV)
    if not token:
        return None  # not a job the dashboard submitted
    files = RunFiles(root)
    try:
        found = files.shared_marker.read_text().strip()
    except OSError:
        found = None
    if found != token:
        return (
            f"the run directory {root} is not shared with node {socket.gethostname()}: the file the dashboard wrote "
            f"there ({files.shared_marker.name}) is {'missing' if found is None else 'different'} on this node. Put "
            "the data dir ($GRPO_STUDIO_HOME) on a filesystem the dashboard and every node share (NFS, Lustre...)"
        )
    files.node_marker.write_text(f"{socket.gethostname()} {os.environ.get('SLURM_JOB_ID', '')}\n")
    return None


def stop_reason(log: Path, step: int) -> tuple[RunStatus, str | None]:
    """Run by the worker after a stop request: what the stop was, as (status, the run's note or error).

    - not in a Slurm job, or the user's stop (``scancel --signal=TERM``: the job still RUNNING): stopped;
      the signal ahead of the time limit says so ("Slurm time limit 04:00 reached at step N; resume to continue");
    - Slurm requeued the job (``scontrol requeue``, preemption in requeue mode: slurmstepd writes "... DUE TO JOB
      REQUEUE" or "DUE TO PREEMPTION" into the job's log, and the job is COMPLETING, not RUNNING): queued again,
      "requeued by Slurm"; the job starts the worker again, which resumes from the latest checkpoint;
    - Slurm ended the job otherwise (``scancel``, a node failure): failed, with slurmstepd's account.
    """
    job_id = slurm_job_id()
    try:
        state = job_state(job_id) if job_id else None
    except SlurmError:
        return RunStatus.STOPPED, None
    if state is None or state.state == "RUNNING":
        return RunStatus.STOPPED, time_limit_stop(step) if job_id else None
    # slurmstepd's own account, e.g. "*** JOB 6 ON node1 CANCELLED AT 2026-11-30T13:10:51 ***", if it is in the log
    tail = RunFiles(log.parent).log_tail(50) if log.is_file() else ""
    notices = [line[line.index("***") :] for line in tail.splitlines() if "*** JOB" in line]
    said = notices[-1] if notices else f"state {state.state}, reason {state.reason}"
    if state.state in PENDING_STATES or any(why in said for why in ("DUE TO JOB REQUEUE", "DUE TO PREEMPTION")):
        return RunStatus.QUEUED, (
            f"requeued by Slurm at step {step} ({said}): the job starts again by itself and resumes from the latest "
            "checkpoint"
        )
    return RunStatus.FAILED, (
        f"Slurm ended job {job_id} while it trained ({said}); the worker stopped at a step boundary and saved its adapter"
    )


def slurm_job_id() -> str | None:
    """Run on the node: this job's id as the dashboard recorded it, ``JOBID_TASK`` for a task of a job array (squeue
    reports an array's task under that id, not under the task's own ``SLURM_JOB_ID``), else ``SLURM_JOB_ID``."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")


def time_limit_stop(step: int, now: float | None = None) -> str | None:
    """Run by the worker after a stop request, in a Slurm job: the sentence for a stop that was Slurm's signal ahead
    of the job's time limit (the stop came within the margin, plus a minute, of the limit), else None."""
    import time

    limit, started = int(os.environ.get(LIMIT_ENV) or 0), float(os.environ.get(STARTED_ENV) or 0)
    if not limit or not started:
        return None
    elapsed = (now or time.time()) - started
    if elapsed < limit - stop_margin(limit) - 60:
        return None
    hours, minutes = divmod(limit // 60, 60)
    return f"Slurm time limit {hours:02d}:{minutes:02d} reached at step {step}; resume to continue"


def where(host: str | None, job_id: str | None, status: str, positions: dict[str, Waiting | int]) -> str:
    """The runs list's "where" text: the host, or the Slurm job with its nodes or its place in the queue and why it
    waits; "Slurm is not answering" while it doesn't."""
    if not job_id:
        return host or ""
    if status in ("queued", "running") and slurm_not_answering():
        return f"slurm {job_id} (Slurm is not answering)"
    if status == "queued" and job_id in positions:
        waiting = positions[job_id]
        return f"slurm {job_id}, " + (waiting.describe() if isinstance(waiting, Waiting) else f"queue #{waiting}")
    return f"slurm {job_id}" + (f" on {host}" if host else "")
