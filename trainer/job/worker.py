"""The training worker: ``python -m trainer.job.worker RUN_ID`` (how the launcher starts it; ``grpo-studio worker RUN_ID``
does the same from the CLI).

Reads the run's config from the database and marks the run running, then goes the way open-r1's grpo.py does:
seed → data → tokenizer/model → rewards → trainer → train → save. Whatever happens in between, the run ends in a
terminal status: completed, stopped, or failed with the traceback as its error.

The other jobs of a training process live in their own modules: :mod:`trainer.job.db_writer` (batched writes, so a slow
disk or a dashboard read never stalls a step), :mod:`trainer.job.callback` (TRL's logs and completions table into the
database; stop requests), :mod:`trainer.job.checkpoints` (resuming) and :mod:`trainer.supervise.run_files` (where things are).

SIGTERM (and Ctrl-C in the foreground CLI) asks for a stop: training ends at the next step boundary, a checkpoint
and the adapter are saved, and the run ends as ``stopped``. Resuming a stopped or failed run continues from its latest
checkpoint.
"""

from __future__ import annotations

from trainer.job.stop import StopRequest

# The worker process hears a stop from its first moment: a SIGTERM during the imports below (a second or more of
# them) would otherwise end it by the default action, and the run would read as failed (issue 36). Hence code
# before imports here (E402 is off for this file).
EARLY_STOP = StopRequest()
if __name__ == "__main__":
    EARLY_STOP.install()

import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storage import queries
from storage.db import get_sessionmaker, retry_transient
from storage.models import RunStatus
from trainer import review
from trainer.config import RunConfig
from trainer.evaluation.periodic_eval import make_heldout_callback
from trainer.job.callback import is_main_process, make_callback, with_reference_answers
from trainer.job.checkpoints import ResumeError, prepare_resume
from trainer.job.db_writer import DatabaseMoved, DbWriter
from trainer.job.diskspace import (
    DiskFullError,
    DiskReserve,
    RunDirectoryGone,
    full_message,
    gone_message,
    is_disk_full,
    make_disk_guard,
)
from trainer.job.held_rows import set_aside
from trainer.job.trackers import place_trackers
from trainer.loading.backend import Backend, UnsupportedByUnsloth, base_source, local_rank
from trainer.loading.hub import HubUnreachable, ModelAccessError
from trainer.supervise.commands import with_package_path
from trainer.supervise.gpu_lease import lease_for
from trainer.supervise.processes import process_start_time
from trainer.supervise.run_files import RunFiles
from trainer.supervise.slurm import shared_dir_problem, slurm_job_id, stop_reason
from trainer.supervise.workers import is_alive

# Set in the environment of a worker that restarted itself because Unsloth refused the model (the refusal's text).
UNSLOTH_REFUSED = "GRPO_STUDIO_UNSLOTH_REFUSED"

log = logging.getLogger(__name__)


def start_backend(config: RunConfig) -> Backend:
    """Point the compile caches under the data dir, choose the model path, and on the Unsloth path import unsloth
    before anything imports trl, transformers or peft: it patches them on import, and warns that training may be
    slower or use more memory when they came first (unsloth 2026.10.9 _gpu_init.py:20-21, 134-143)."""
    from storage.db import data_dir
    from trainer.loading.backend import cache_env, select_backend

    for name, value in cache_env(data_dir()).items():
        os.environ.setdefault(name, value)
    refusal = os.environ.get(UNSLOTH_REFUSED)
    backend = select_backend(dataclasses.replace(config, backend="trl") if refusal else config)
    if refusal:
        backend = dataclasses.replace(backend, reason=f"Unsloth could not load the model ({refusal}); {backend.reason}")
    if backend.use_vllm:
        from trainer.loading.vllm_env import engine_defaults, prepare_vllm

        prepare_vllm()  # before TRL's colocate engine or Unsloth's starts: no FlashInfer JIT without nvcc (issue 26)
        if config.vllm_enforce_eager:
            engine_defaults(enforce_eager=True)  # TRL passes none: vLLM would compile the model as it starts
    if backend.use_vllm and backend.device == "cpu":
        from trainer.loading.backend import model_path
        from trainer.loading.vllm_cpu import prepare_cpu_vllm

        prepare_cpu_vllm(config, model_path(config))  # the CPU engine's KV cache, threads and reloadable weights
    if backend.name == "unsloth":
        import unsloth  # noqa: F401
    if backend.use_vllm:
        from trainer.job.measures import count_engine_reservation

        count_engine_reservation()  # after Unsloth's import: vllm imports transformers
    return backend


def build_trainer(
    config: RunConfig,
    output_dir: Path,
    callbacks: list,
    log_line: Callable[[str], None],
    backend: Backend | None = None,
    stop: threading.Event | None = None,
    **overrides,
) -> Any:
    """Seed → data → tokenizer/model → rewards → GRPOTrainer, in that order. Returns the trainer (not yet trained).

    ``output_dir`` is the run's directory; ``backend`` the path :func:`start_backend` chose (chosen here when not
    given); ``stop`` the run's stop request, which ends a tool call that is waiting at once."""
    from trainer.loading.backend import load_model
    from trainer.loading.data import build_dataset
    from trainer.scoring.rewards import get_rewards

    started = time.perf_counter()
    backend = backend or start_backend(config)
    log_line(f"model path: {backend.describe()}")
    if source := base_source(config):
        log_line(source)

    # Seed before anything draws random numbers: the LoRA weights are initialised by Unsloth's loader or when
    # GRPOTrainer wraps the model with the PEFT config, both before Trainer.__init__ seeds from its arguments.
    from transformers import set_seed

    set_seed(config.seed)

    dataset = build_dataset(config)
    log_line(f"data: {config.dataset_name} ({len(dataset)} prompts, {config.prompts_per_step()} per step)")
    data_ready = time.perf_counter()

    model, tokenizer = load_model(config, backend)  # Unsloth (when chosen) must load before trl is imported
    model_ready = time.perf_counter()

    # The run's rewards, named by their config names; the first also hands TRL's completions table the reference
    # answers, so the stored samples carry them.
    rewards = get_rewards(config)
    rewards[0] = with_reference_answers(rewards[0])

    import peft
    import transformers
    import trl
    from trl import GRPOTrainer

    from trainer.job.measures import install_measures
    from trainer.job.step_times import WRITES, time_method
    from trainer.job.token_capture import TokenCapture
    from trainer.job.trl_args import to_trl, truncate_prompts
    from trainer.tools.loading import offered_tools, trainer_arguments

    log_line(f"TRL {trl.__version__}, transformers {transformers.__version__}, PEFT {peft.__version__}")
    args = to_trl(
        config,
        str(RunFiles(output_dir).checkpoints),
        use_vllm=backend.use_vllm,
        bf16=backend.bf16,
        cpu=backend.device == "cpu",
        **overrides,
    )
    for note in args.notes:
        log_line(note)
    # tools and an environment only when set (trl 1.16.0 trainer/grpo_trainer.py:320-322), each call run in the
    # run's tool process, killed at its limit or when the run is asked to stop (trainer.tools.process)
    tooling = trainer_arguments(list(config.tools), config.environment, config.tool_timeout_s, stop)
    if tooling:
        names = [*config.tools, *([config.environment] if config.environment else [])]
        log_line(f"tools: {', '.join(names)} (each call limited to {config.tool_timeout_s:g} s)")
    if args.prompt_truncation_needed:
        dataset, cut = truncate_prompts(dataset, tokenizer, config.max_prompt_length, offered_tools(tooling))
        if cut:
            log_line(f"{cut} prompts were longer than {config.max_prompt_length} tokens and were cut from the left")
    prepared = time.perf_counter()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=rewards,
        args=args.grpo,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=None if backend.name == "unsloth" else args.lora,  # Unsloth's loader applied the adapter
        callbacks=callbacks,
        **tooling,
    )
    if backend.use_vllm:
        from trainer.job.engine_report import report_engine

        report_engine(trainer, log_line)  # the engine's settings as vLLM holds them, and its first sampling's
    # measured KL at beta 0 (TRL logs its own KL otherwise), where each step's time goes, tokens/s, peak GPU memory
    measures = install_measures(trainer, config.measured_kl_steps if config.beta == 0 else 0, note=log_line)
    trainer.grpo_studio_measures = measures
    # the token view's values, on every process (their forward passes may be collective); the writing one stores them
    trainer.grpo_studio_tokens = TokenCapture.install(trainer, config.token_samples_per_step, note=log_line)
    time_method(trainer.grpo_studio_tokens, "_score", WRITES, measures.times)  # its passes are the token view's
    # read by bench/first_step.py, which splits the time to the first step with it
    log_line(
        f"{queries.TRAINER_READY}{time.perf_counter() - started:.2f} s: data set {data_ready - started:.2f} s, model "
        f"{model_ready - data_ready:.2f} s, TRL import and prompt check {prepared - model_ready:.2f} s, trainer "
        f"construction {time.perf_counter() - prepared:.2f} s"
    )
    return trainer


def run_worker(run_id: int, *, show_progress: bool = False, stop: StopRequest | None = None) -> RunStatus:
    """Train run ``run_id`` to a terminal status and return it. Never raises for a training failure: the traceback
    goes to the run row as its error."""
    if not is_main_process():
        return _train_secondary(run_id, stop or StopRequest())
    stop = stop or StopRequest()
    # before the claim: a stop that arrives while the run is being marked running is heard, not fatal
    previous = stop.install() if threading.current_thread() is threading.main_thread() else {}
    files, raw_config = _claim(run_id)
    # an earlier worker's unwritten rows, replayed once the resume step is known (checkpoints.replay_previous)
    set_aside(files.pending_writes, files.previous_pending_writes)
    writer = DbWriter(run_id, spill_path=files.pending_writes)
    reserve = DiskReserve(files.root)  # given back before the final status, so a full disk can't keep it "running"
    status, error = RunStatus.FAILED, None
    try:
        config, notes = RunConfig.from_dict(raw_config)
        for note in notes:
            writer.log(note, "WARNING")
        problems = review.problems(config)
        if problems:
            raise ValueError("invalid run config: " + "; ".join(problems))
        writer.keep_samples_every = config.keep_samples_every
        # a stop heard while the process started (EARLY_STOP) ends the run here, before a model is loaded for nothing
        status = RunStatus.STOPPED if stop.requested else _train(run_id, config, files, writer, stop, show_progress)
        if status is RunStatus.STOPPED:  # the user's stop, or Slurm's: a time limit, a requeue, a cancel
            with get_sessionmaker().begin() as session:
                step = queries.get_run(session, run_id).current_step
            status, error = stop_reason(files.log, step)
    except BaseException as exc:  # noqa: BLE001 - every way out must leave a terminal status
        if isinstance(exc, UnsupportedByUnsloth):
            restart_without_unsloth(run_id, raw_config, exc, writer, reserve)  # returns only when it can't
        # The run's error is the sentence a user needs first; the traceback goes to the run's log and worker.log
        error = failure_sentence(exc, files, run_id)
        trace = "".join(traceback.format_exception(exc))
        log.error("run %d failed: %s\n%s", run_id, error, trace)
        writer.log(f"failed: {error}\n{trace}", "ERROR")
        status = RunStatus.FAILED
        if not isinstance(exc, Exception):
            raise
    finally:
        reserve.release()
        try:
            writer.close()
        except Exception as exc:  # noqa: BLE001 - the final status below must still be written
            status = RunStatus.FAILED
            error = error or (full_message(files.root) if is_disk_full(exc) else str(exc))
        # Retried like any row (issue 23): a database that is late must not turn a finished run into a failed one.
        deadline = max(writer.deadline or 0.0, time.monotonic() + 60)
        retry_transient(lambda: _finish(run_id, status, error), deadline, "the run's final status")
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def failure_sentence(exc: BaseException, files: RunFiles, run_id: int) -> str:
    """The one sentence a failed run's error holds (issue 23, item 6): what happened and what to do, for the failures
    we know; else the exception's first line and where the traceback is."""
    if not files.root.is_dir():
        return gone_message(files.root)
    if isinstance(exc, (DiskFullError, ResumeError, RunDirectoryGone, DatabaseMoved, HubUnreachable, ModelAccessError)):
        return str(exc)
    if is_disk_full(exc):
        return full_message(files.root)
    if isinstance(exc, ValueError) and str(exc).startswith("invalid run config"):
        return str(exc)
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first} (the traceback is in the run's log: grpo-studio logs {run_id})"


def _finish(run_id: int, status: RunStatus, error: str | None) -> None:
    with get_sessionmaker().begin() as session:
        if status is RunStatus.QUEUED:  # requeued by Slurm: not an end; the job runs this worker again
            queries.requeued(session, queries.get_run(session, run_id))
            queries.add_log(session, run_id, error or "requeued by Slurm")
            return
        queries.finish_run(session, queries.get_run(session, run_id), status, error)
        note = f": {error}" if status is RunStatus.STOPPED and error else ""  # a time-limit stop says so
        queries.add_log(session, run_id, f"run {status.value}{note}", "ERROR" if status is RunStatus.FAILED else "INFO")


def restart_without_unsloth(
    run_id: int, raw_config: dict, exc: UnsupportedByUnsloth, writer: DbWriter, reserve: DiskReserve
) -> None:
    """Replace this process by a fresh worker for the same run that skips Unsloth (issue 11, item 13): Unsloth
    refused the model, and TRL's own path (with vLLM when installed) can train it. Only once, and only for a
    single-process run that was not pinned to Unsloth in its config (then the run fails with Unsloth's reason)."""
    settings = RunConfig.from_stored(raw_config)
    if os.environ.get(UNSLOTH_REFUSED) or settings.backend == "unsloth":
        return
    if settings.num_processes > 1:
        writer.log(f"Unsloth cannot load this model ({exc}); set backend: trl to train it on TRL's own path", "ERROR")
        return
    writer.log(f"Unsloth cannot load this model ({exc}); restarting the worker on TRL's own path", "WARNING")
    writer.close()
    reserve.release()
    env = with_package_path({**os.environ, UNSLOTH_REFUSED: str(exc)[:300]})
    sys.stdout.flush()
    sys.stderr.flush()
    # The same pid, so the run row's pid and start time still name this worker.
    os.execve(sys.executable, [sys.executable, "-m", "trainer.job.worker", str(run_id)], env)


def _claim(run_id: int) -> tuple[RunFiles, dict]:
    """Mark the run running in this process; returns its directory (created) and its stored config. In a Slurm job
    the run directory must be the one the dashboard wrote (a shared data dir), or the run fails saying so."""
    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, run_id)
        if run is None:
            raise SystemExit(f"no run with id {run_id}")
        own_job = run.slurm_job_id is not None and slurm_job_id() == run.slurm_job_id
        if run.status is RunStatus.RUNNING and run.pid not in (None, os.getpid()) and not own_job and is_alive(run):
            raise SystemExit(f"run {run_id} is already being trained by process {run.pid}")
        problem = shared_dir_problem(Path(run.output_dir)) if run.output_dir else None
        if problem:
            queries.finish_run(session, run, RunStatus.FAILED, problem)
            queries.add_log(session, run_id, problem, "ERROR")
        else:
            files = RunFiles.of(run.output_dir, run_id).create()
            # Under `accelerate launch` the launcher (our process-group leader) is the pid the launcher recorded: keep
            # it, so a stop signals the whole group and liveness follows the launcher.
            if run.pid is not None and run.pid != os.getpid() and os.getpgid(0) == run.pid:
                pid, started = run.pid, run.pid_started
            else:
                pid, started = os.getpid(), process_start_time(os.getpid())
            host = os.environ.get("SLURM_JOB_NODELIST") or socket.gethostname()
            queries.mark_running(session, run, pid, str(files.root), started, host)
            queries.add_log(session, run_id, f"{queries.WORKER_RUNNING} (pid {os.getpid()}): loading the model")
            config = dict(run.config)
    if problem:
        raise SystemExit(f"grpo-studio worker: {problem}")
    return files, config


def _train(
    run_id: int, config: RunConfig, files: RunFiles, writer: DbWriter, stop: StopRequest, show_progress: bool
) -> RunStatus:
    def log_line(message: str) -> None:
        log.info(message)
        writer.log(message)

    placed = place_trackers(list(config.report_to), files.root, os.environ)  # before any tracker is imported
    if placed:
        log_line("trackers write under the run's directory: " + ", ".join(placed))
    backend = start_backend(config)  # before make_callback, which imports transformers
    # This GPU's lease (trainer.supervise.gpu_lease) for the whole training: a busy GPU makes the run wait, bounded, then
    # fail naming the holder. None is taken on a CPU.
    with lease_for(backend.device, f"run {run_id}'s worker", log_line, local_rank()):
        return _train_on(run_id, config, files, writer, stop, show_progress, backend, log_line)


def _train_on(
    run_id: int,
    config: RunConfig,
    files: RunFiles,
    writer: DbWriter,
    stop: StopRequest,
    show_progress: bool,
    backend: Backend,
    log_line: Callable[[str], None],
) -> RunStatus:
    callback = make_callback(run_id, writer, stop, config)
    guard = make_disk_guard(files.root, files.latest_checkpoint)

    def store_heldout(step: int, values: dict[str, float]) -> None:
        writer.metrics(queries.metric_rows(run_id, step, values, time.time()))
        if callback.alerts is not None:  # the held-out signs of the watch, for the tracker
            callback.alerts.observe(step, values)

    heldout = make_heldout_callback(
        config,
        store_heldout,
        log_line,
        lambda step, rows: writer.rows("heldout_results", [{"run_id": run_id, **row} for row in rows]),
    )
    callbacks = [callback, guard] + ([heldout] if heldout else [])
    # run_name: how the trackers of report_to name the run (trackio's run, W&B's, MLflow's)
    trainer = build_trainer(
        config,
        files.root,
        callbacks,
        log_line,
        backend,
        stop.event,
        disable_tqdm=not show_progress,
        run_name=f"{config.name} (run {run_id})",
    )
    callback.trainer = trainer
    from trainer.job import curriculum
    from trainer.job.step_times import EVAL, WRITES, time_method

    callback.curriculum = curriculum.install(trainer, config)  # None unless config.curriculum
    if config.curriculum and callback.curriculum is None:
        log_line(curriculum.unavailable(trainer, config))
    if heldout:
        heldout.trainer = trainer
    # where each step's time goes (trainer.job.step_times): the held-out evaluation, and the step's rows handed to the
    # database writer (a flush before a checkpoint included)
    times = trainer.grpo_studio_measures.times
    time_method(heldout, "evaluate", EVAL, times)
    time_method(callback, "on_log", WRITES, times)
    if not show_progress:
        from transformers.trainer_callback import PrinterCallback

        # Without a progress bar the trainer prints every log dict to stdout: the worker log would repeat, in a
        # less readable form, what the database already holds.
        trainer.remove_callback(PrinterCallback)

    def record_backend() -> None:
        with get_sessionmaker().begin() as session:
            queries.set_backend(session, run_id, backend.describe())

    retry_transient(record_backend, time.monotonic() + writer.grace_seconds, "the model path")
    checkpoint = prepare_resume(files, run_id, log_line, time.monotonic() + writer.grace_seconds, writer)
    if stop.requested:
        return RunStatus.STOPPED
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    if guard.gone:
        raise RunDirectoryGone(guard.problem)
    if guard.problem:  # stopped before a checkpoint that would not have fitted; the last complete one resumes
        raise DiskFullError(guard.problem)

    trainer.save_model(str(files.adapter))
    log_line(f"adapter saved to {files.adapter} at step {trainer.state.global_step}")
    # a stop is a stop, whatever it interrupted: one asked during the last step's evaluation or the final save ends
    # the run stopped too (its adapter is saved either way)
    return RunStatus.STOPPED if stop.requested else RunStatus.COMPLETED


def _train_secondary(run_id: int, stop: StopRequest) -> RunStatus:
    """A non-main process of a multi-process run: trains its share, writes nothing to the database (rank 0 does)."""
    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, run_id)
        config, _ = RunConfig.from_dict(dict(run.config))
        files = RunFiles(Path(run.output_dir))  # set by the launcher before any process started
    stop.install()
    backend = start_backend(config)
    with lease_for(
        backend.device, f"run {run_id}'s worker (rank {os.environ.get('RANK', '?')})", log.info, local_rank()
    ):
        trainer = build_trainer(
            config, files.root, [make_callback(run_id, None, stop, config)], log.info, backend, stop.event
        )
        checkpoint = files.latest_checkpoint()
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        trainer.save_model(str(files.adapter))  # collective under DeepSpeed/FSDP; rank 0 writes the files
    return RunStatus.STOPPED if stop.requested else RunStatus.COMPLETED


def main(argv: list[str] | None = None, stop: StopRequest | None = None) -> int:
    """``python -m trainer.job.worker RUN_ID``: train the run; exit 0 when it completed or stopped, 1 when it failed, 2
    when the database can't be used (said in one sentence, as the CLI does). ``stop``: the request this process's
    signals were routed to before its imports (trainer.supervise.warm_start), else this module's own."""
    from sqlalchemy.exc import SQLAlchemyError

    from storage.db import StorageError, describe_error

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m trainer.job.worker RUN_ID", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        status = run_worker(int(argv[0]), stop=stop or EARLY_STOP)
    except (StorageError, SQLAlchemyError) as exc:  # a damaged or unreachable database: one sentence, no traceback
        reason = describe_error(exc) if isinstance(exc, SQLAlchemyError) else str(exc)
        print(f"grpo-studio worker: {reason}", file=sys.stderr)
        return 2
    return 0 if status in (RunStatus.COMPLETED, RunStatus.STOPPED, RunStatus.QUEUED) else 1


if __name__ == "__main__":
    sys.exit(main())
