"""The training worker: ``grpo-studio worker RUN_ID``.

Reads the run's config from the database, marks the run running, builds data → tokenizer/model → rewards → trainer,
trains, saves the adapter, and always leaves the run in a terminal status (completed, stopped, or failed with the
traceback), whatever happens in between.

Everything TRL logs is stored, whatever the key (TRL's set of keys changes between versions and with the rewards),
together with the per-completion table (prompt, completion, each reward's score, advantage). Writes go through a
background thread that batches them into short transactions, so a slow disk or a dashboard read never stalls a
training step.

SIGTERM (and Ctrl-C in the foreground CLI) asks for a stop: training ends at the next step boundary, a checkpoint
and the adapter are saved, and the run ends as ``stopped``. Resuming a stopped or failed run continues from its latest
checkpoint; metrics logged after that checkpoint by the interrupted attempt are dropped, so every step appears once.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage import queries
from storage.db import get_sessionmaker
from storage.models import Metric, Run, RunStatus, Sample
from trainer.backend import Backend
from trainer.config import RunConfig
from trainer.diskspace import DiskFullError, DiskReserve, full_message, is_disk_full, make_disk_guard
from trainer.launch import is_alive, process_start_time, run_dir

log = logging.getLogger(__name__)

CHECKPOINT_DIR = "checkpoints"
ADAPTER_DIR = "adapter"


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete ``checkpoint-N`` directory under the run's checkpoints, or None.

    A worker killed while saving leaves a checkpoint without ``trainer_state.json`` (the trainer writes it last);
    such a directory can't be resumed from, so it is skipped (and removed by :func:`prune_partial_checkpoints`).
    """
    complete = [p for p in _checkpoints(output_dir) if (p / "trainer_state.json").is_file()]
    return complete[-1] if complete else None


def prune_partial_checkpoints(output_dir: Path) -> list[str]:
    """Delete checkpoint directories that a killed worker left half-written; returns their names."""
    import shutil

    removed = []
    for p in _checkpoints(output_dir):
        if not (p / "trainer_state.json").is_file():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
    return removed


def _checkpoints(output_dir: Path) -> list[Path]:
    root = output_dir / CHECKPOINT_DIR
    found = [p for p in root.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()] if root.is_dir() else []
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


# --- stop requests --------------------------------------------------------------------------------------------------
class StopRequest:
    """Set by SIGTERM/SIGINT; the training callback ends the run at the next step boundary when it is set."""

    def __init__(self) -> None:
        self.event = threading.Event()

    @property
    def requested(self) -> bool:
        """True once a stop was asked for."""
        return self.event.is_set()

    def install(self) -> dict:
        """Route SIGTERM and SIGINT here; returns the previous handlers. A second SIGINT raises KeyboardInterrupt
        (stop now, not at the step end)."""

        def handler(signum, _frame):
            if signum == signal.SIGINT and self.requested:
                raise KeyboardInterrupt
            log.warning("received %s: stopping at the next step boundary", signal.Signals(signum).name)
            self.event.set()

        return {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}


# --- batched database writes ----------------------------------------------------------------------------------------
@dataclass
class _Batch:
    metrics: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)
    progress: tuple[int, int | None] | None = None
    flushed: list[threading.Event] = field(default_factory=list)


class DbWriter:
    """A background thread that writes what the training loop hands it, several items per transaction.

    The training thread only appends to a queue. If a write fails, the error is kept and raised from :meth:`close`,
    so the run fails visibly instead of silently losing data.
    """

    def __init__(self, run_id: int, flush_interval: float = 1.0) -> None:
        self.run_id = run_id
        self.flush_interval = flush_interval
        self._queue: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=f"db-writer-{run_id}", daemon=True)
        self._thread.start()

    def metrics(self, rows: list[dict]) -> None:
        """Queue metric rows (see :func:`storage.queries.metric_rows`)."""
        self._queue.put(("metrics", rows))

    def samples(self, rows: list[dict]) -> None:
        """Queue completion sample rows."""
        self._queue.put(("samples", rows))

    def progress(self, step: int, total: int | None = None) -> None:
        """Queue a progress update of the run row."""
        self._queue.put(("progress", (step, total)))

    def log(self, message: str, level: str = "INFO") -> None:
        """Queue a line for the run's log."""
        self._queue.put(("log", (message, level)))

    def flush(self, timeout: float = 60.0) -> None:
        """Block until everything queued so far is committed (before a checkpoint: see the callback's on_log)."""
        done = threading.Event()
        self._queue.put(("flush", done))
        done.wait(timeout)

    def close(self) -> None:
        """Write everything still queued, stop the thread, and raise the first write error if there was one."""
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(f"writing to the database failed: {self._error}") from self._error

    def _loop(self) -> None:
        done = False
        while not done:
            batch = _Batch()
            item = self._queue.get()
            deadline = time.monotonic() + self.flush_interval
            while True:
                if item is None:
                    done = True
                    break
                self._add(batch, item)
                if batch.flushed:  # someone is waiting: write now rather than at the deadline
                    break
                try:
                    item = self._queue.get(timeout=max(deadline - time.monotonic(), 0))
                except queue.Empty:
                    break
            try:
                self._write(batch)
            except Exception as exc:  # keep draining so close() returns; report the error there
                log.exception("database write failed")
                self._error = self._error or exc
            for event in batch.flushed:
                event.set()

    @staticmethod
    def _add(batch: _Batch, item: tuple[str, Any]) -> None:
        kind, payload = item
        if kind == "metrics":
            batch.metrics.extend(payload)
        elif kind == "samples":
            batch.samples.extend(payload)
        elif kind == "log":
            batch.logs.append(payload)
        elif kind == "flush":
            batch.flushed.append(payload)
        else:
            step, total = payload
            old_total = batch.progress[1] if batch.progress else None
            batch.progress = (step, total if total is not None else old_total)

    def _write(self, batch: _Batch) -> None:
        if not (batch.metrics or batch.samples or batch.logs or batch.progress):
            return
        with get_sessionmaker().begin() as session:
            queries.add_metric_rows(session, batch.metrics)
            queries.add_sample_rows(session, batch.samples)
            for message, level in batch.logs:
                queries.add_log(session, self.run_id, message, level)
            if batch.progress:
                queries.set_progress(session, self.run_id, *batch.progress)


# --- the TRL callback -----------------------------------------------------------------------------------------------
def _stop_everywhere(requested: bool) -> bool:
    """Whether any process of a multi-process run was asked to stop (all must stop at the same step, or the others
    wait forever in their next collective operation). Single-process: just ``requested``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return requested
    import torch

    flag = torch.tensor([1.0 if requested else 0.0])
    if dist.get_backend() == "nccl":
        flag = flag.cuda()
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def is_main_process() -> bool:
    """True in a single-process run and in rank 0 of an ``accelerate launch``: the only one that writes to the DB."""
    return int(os.environ.get("RANK", "0")) == 0


def make_callback(run_id: int, writer: DbWriter | None, stop: StopRequest, config: RunConfig):
    """A TrainerCallback that stores every logged metric and the completions table, keeps progress on the run row,
    and ends training at the step boundary after a stop request. With ``writer`` None (the non-main processes of a
    multi-process run) it only takes part in the stop decision."""
    from transformers import TrainerCallback

    weights = config.weights()
    group_size = config.num_generations

    class StudioCallback(TrainerCallback):
        trainer: Any = None  # set once the trainer exists; the completions table lives on it
        last_sample_step = -1

        def on_train_begin(self, args, state, control, **kwargs):
            if writer:
                writer.progress(state.global_step, state.max_steps)

        def on_step_end(self, args, state, control, **kwargs):
            if writer:
                writer.progress(state.global_step)
            if _stop_everywhere(stop.requested):
                stop.event.set()
                control.should_training_stop = True
                control.should_save = True  # a checkpoint at the stop step, so a resume loses nothing
            return control

        def on_log(self, args, state, control, logs=None, **kwargs):
            if writer is None or not state.is_world_process_zero or not logs:
                return
            writer.metrics(queries.metric_rows(run_id, state.global_step, logs, time.time()))
            if state.global_step != self.last_sample_step:
                rows = sample_rows(self.trainer, run_id, state.global_step, weights, group_size)
                if rows:
                    writer.samples(rows)
                    self.last_sample_step = state.global_step
            if control.should_save:
                # The trainer logs, then saves a checkpoint. Commit this step's rows first: a kill right after the
                # checkpoint must not lose them, because a resume starts after the checkpoint and never re-logs them.
                writer.flush()

    return StudioCallback()


def sample_rows(trainer: Any, run_id: int, step: int, weights: list[float], group_size: int) -> list[dict]:
    """The completions table of the latest generation batch, from GRPOTrainer's ``_logs`` buffer."""
    buffer = getattr(trainer, "_logs", None)
    if not buffer or not buffer.get("prompt"):
        return []
    prompts, completions = list(buffer["prompt"]), list(buffer["completion"])
    rewards = {name: list(values) for name, values in buffer["rewards"].items()}
    advantages = list(buffer["advantages"])
    answers = list(buffer.get("extra", {}).get("answer", []))
    rows = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions)):
        scores = {name: _finite_or_none(values[i]) for name, values in rewards.items() if i < len(values)}
        applied = [(w, s) for w, s in zip(weights, scores.values()) if s is not None]
        rows.append(
            {
                "run_id": run_id,
                "step": step,
                "group_index": i // group_size,
                "prompt": _text(prompt, last_user=True),
                "completion": _text(completion),
                "rewards": scores,
                "total_reward": sum(w * s for w, s in applied) if applied else None,
                "advantage": _finite_or_none(advantages[i]) if i < len(advantages) else None,
                "reference_answer": str(answers[i]) if i < len(answers) and answers[i] is not None else None,
            }
        )
    return rows


def _finite_or_none(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None


def _text(item: Any, last_user: bool = False) -> str:
    if isinstance(item, str):
        return item
    messages = [m for m in item if isinstance(m, dict)]
    if last_user:
        users = [m for m in messages if m.get("role") == "user"]
        messages = users[-1:] or messages
    return "\n".join(str(m.get("content", "")) for m in messages)


# --- rewards --------------------------------------------------------------------------------------------------------
def named_rewards(names: list[str]) -> list[Callable]:
    """The configured reward functions, each renamed to its config name (TRL logs ``rewards/<__name__>/mean``).

    The first one also hands the reference answers to TRL's completions table (``log_extra``), so the stored samples
    carry them.
    """
    from trainer.rewards import resolve_reward

    wrapped = []
    for index, name in enumerate(names):
        func = resolve_reward(name)

        def reward(prompts, completions, _func=func, _first=index == 0, **kwargs):
            if _first and "log_extra" in kwargs and "answer" in kwargs:
                kwargs["log_extra"]("answer", list(kwargs["answer"]))
            return _func(prompts=prompts, completions=completions, **kwargs)

        reward.__name__ = name.rsplit(":", 1)[-1]
        wrapped.append(reward)
    return wrapped


# --- the job --------------------------------------------------------------------------------------------------------
def start_backend(config: RunConfig) -> Backend:
    """Point the compile caches under the data dir, choose the model path, and on the Unsloth path import unsloth
    before anything imports trl, transformers or peft: it patches them on import, and warns that training may be
    slower or use more memory when they came first (unsloth 2026.10.9 _gpu_init.py:20-21, 134-143)."""
    from storage.db import data_dir
    from trainer.backend import cache_env, select_backend

    for name, value in cache_env(data_dir()).items():
        os.environ.setdefault(name, value)
    backend = select_backend(config)
    if backend.name == "unsloth":
        import unsloth  # noqa: F401

    return backend


def build_trainer(
    config: RunConfig,
    output_dir: Path,
    callbacks: list,
    log_line: Callable[[str], None],
    backend: Backend | None = None,
    **overrides,
):
    """Data → tokenizer/model → rewards → GRPOTrainer, in that order. Returns the trainer (not yet trained).

    ``backend`` is the path :func:`start_backend` chose (chosen here when not given)."""
    from trainer.backend import load_model
    from trainer.data import build_dataset

    backend = backend or start_backend(config)
    log_line(f"model path: {backend.describe()}")
    dataset = build_dataset(config)
    log_line(f"data: {config.dataset_name} ({len(dataset)} prompts, {config.prompts_per_step()} per step)")
    model, tokenizer = load_model(config, backend)  # Unsloth (when chosen) must load before trl is imported

    import peft
    import transformers
    import trl
    from trl import GRPOTrainer

    from trainer.trl_args import to_trl, truncate_prompts

    log_line(f"TRL {trl.__version__}, transformers {transformers.__version__}, PEFT {peft.__version__}")

    args = to_trl(
        config,
        str(output_dir / CHECKPOINT_DIR),
        use_vllm=backend.use_vllm,
        bf16=backend.bf16,
        cpu=backend.device == "cpu",
        **overrides,
    )
    for note in args.notes:
        log_line(note)
    if args.prompt_truncation_needed:
        dataset, cut = truncate_prompts(dataset, tokenizer, config.max_prompt_length)
        if cut:
            log_line(f"{cut} prompts were longer than {config.max_prompt_length} tokens and were cut from the left")
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=named_rewards(config.reward_funcs),
        args=args.grpo,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=None if backend.name == "unsloth" else args.lora,  # Unsloth's loader applied the adapter
        callbacks=callbacks,
    )
    trainer.grpo_studio_backend = backend
    return trainer


def run_worker(run_id: int, *, show_progress: bool = False, stop: StopRequest | None = None) -> RunStatus:
    """Train run ``run_id`` to a terminal status and return it. Never raises for a training failure: the traceback
    goes to the run row as its error."""
    if not is_main_process():
        return _train_secondary(run_id, stop or StopRequest())
    Session = get_sessionmaker()
    with Session.begin() as session:
        run = queries.get_run(session, run_id)
        if run is None:
            raise SystemExit(f"no run with id {run_id}")
        if run.status == RunStatus.RUNNING.value and run.pid not in (None, os.getpid()) and is_alive(run):
            raise SystemExit(f"run {run_id} is already being trained by process {run.pid}")
        output_dir = Path(run.output_dir) if run.output_dir else run_dir(run_id)
        output_dir.mkdir(parents=True, exist_ok=True)
        run.output_dir = str(output_dir)
        # Under `accelerate launch` the launcher (our process-group leader) is the pid the launcher recorded: keep
        # it, so a stop signals the whole group and liveness follows the launcher.
        if run.pid is not None and run.pid != os.getpid() and os.getpgid(0) == run.pid:
            pid, started = run.pid, run.pid_started
        else:
            pid, started = os.getpid(), process_start_time(os.getpid())
        queries.mark_running(session, run, pid, str(output_dir), started)
        raw_config = dict(run.config)

    stop = stop or StopRequest()
    previous = stop.install() if threading.current_thread() is threading.main_thread() else {}
    writer = DbWriter(run_id)
    reserve = DiskReserve(output_dir)  # given back before the final status, so a full disk can't keep it "running"
    status, error = RunStatus.FAILED, None
    try:
        config, notes = RunConfig.from_dict(raw_config)
        for note in notes:
            writer.log(note, "WARNING")
        problems = config.validate()
        if problems:
            raise ValueError("invalid run config: " + "; ".join(problems))
        status = _train(run_id, config, output_dir, writer, stop, show_progress)
    except BaseException as exc:  # noqa: BLE001 - every way out must leave a terminal status
        error = "".join(traceback.format_exception(exc))
        if is_disk_full(exc):  # the last line is what the dashboard shows
            error += str(exc) if isinstance(exc, DiskFullError) else full_message(output_dir)
        log.error("run %d failed:\n%s", run_id, error)
        writer.log(f"failed: {type(exc).__name__}: {exc}", "ERROR")
        status = RunStatus.FAILED
        if not isinstance(exc, Exception):
            raise
    finally:
        reserve.release()
        try:
            writer.close()
        except Exception as exc:  # noqa: BLE001 - the final status below must still be written
            status, error = RunStatus.FAILED, (error or "") + str(exc)
            if is_disk_full(exc):
                error += "\n" + full_message(output_dir)
        with Session.begin() as session:
            run = queries.get_run(session, run_id)
            queries.finish_run(session, run, status, error)
            queries.add_log(session, run_id, f"run {status.value}", "ERROR" if status is RunStatus.FAILED else "INFO")
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def _train(
    run_id: int, config: RunConfig, output_dir: Path, writer: DbWriter, stop: StopRequest, show_progress: bool
) -> RunStatus:
    def log_line(message: str) -> None:
        log.info(message)
        writer.log(message)

    backend = start_backend(config)  # before make_callback, which imports transformers
    callback = make_callback(run_id, writer, stop, config)
    guard = make_disk_guard(output_dir, lambda: latest_checkpoint(output_dir))
    trainer = build_trainer(config, output_dir, [callback, guard], log_line, backend, disable_tqdm=not show_progress)
    callback.trainer = trainer
    if not show_progress:
        from transformers.trainer_callback import PrinterCallback

        # Without a progress bar the trainer prints every log dict to stdout: the worker log would repeat, in a
        # less readable form, what the database already holds.
        trainer.remove_callback(PrinterCallback)
    with get_sessionmaker().begin() as session:
        session.get(Run, run_id).backend = trainer.grpo_studio_backend.describe()

    for name in prune_partial_checkpoints(output_dir):
        log_line(f"removed {name}: the previous worker died while saving it")
    checkpoint = latest_checkpoint(output_dir)
    if checkpoint is not None:
        step = int(checkpoint.name.split("-")[-1])
        _drop_after(run_id, step)
        log_line(f"resuming from {checkpoint.name}: steps continue from {step}")
    if stop.requested:
        return RunStatus.STOPPED
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    if guard.problem:  # stopped before a checkpoint that would not have fitted; the last complete one resumes
        raise DiskFullError(guard.problem)
    trainer.save_model(str(output_dir / ADAPTER_DIR))
    log_line(f"adapter saved to {output_dir / ADAPTER_DIR} at step {trainer.state.global_step}")
    if stop.requested and trainer.state.global_step < trainer.state.max_steps:
        return RunStatus.STOPPED
    return RunStatus.COMPLETED


def _train_secondary(run_id: int, stop: StopRequest) -> RunStatus:
    """A non-main process of a multi-process run: trains its share, writes nothing to the database (rank 0 does)."""
    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, run_id)
        config, _ = RunConfig.from_dict(dict(run.config))
        output_dir = Path(run.output_dir)  # set by the launcher before any process started
    stop.install()
    backend = start_backend(config)
    trainer = build_trainer(config, output_dir, [make_callback(run_id, None, stop, config)], log.info, backend)
    checkpoint = latest_checkpoint(output_dir)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    trainer.save_model(str(output_dir / ADAPTER_DIR))  # collective under DeepSpeed/FSDP; rank 0 writes the files
    return RunStatus.STOPPED if stop.requested else RunStatus.COMPLETED


def _drop_after(run_id: int, step: int) -> None:
    """Delete what an interrupted attempt logged after ``step``: the resumed run logs those steps again."""
    from sqlalchemy import delete

    with get_sessionmaker().begin() as session:
        for model in (Metric, Sample):
            session.execute(delete(model).where(model.run_id == run_id, model.step > step))
        queries.set_progress(session, run_id, step)
