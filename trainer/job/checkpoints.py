"""Resuming a run from its checkpoints.

A stopped or failed run continues from its latest complete checkpoint (:meth:`RunFiles.latest_checkpoint`). What the
interrupted attempt logged after that checkpoint is dropped from the database, because the resumed run logs those
steps again: every step appears once. The other half of that promise is in the callback: the rows of a step are
committed before its checkpoint is written, so nothing before a checkpoint is lost to a kill.

A checkpoint that is complete but damaged afterwards (a file truncated) is checked before it is used and set aside
(``checkpoint-N.damaged``); the newest intact one resumes the run, and with none the run fails saying so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from storage import queries
from storage.db import get_sessionmaker, retry_transient
from trainer.job.checkpoint_check import checkpoint_problem
from trainer.job.held_rows import read_items
from trainer.supervise.run_files import RunFiles, checkpoint_step

if TYPE_CHECKING:
    from trainer.job.db_writer import DbWriter

DAMAGED_SUFFIX = ".damaged"  # checkpoint-3.damaged: RunFiles lists only checkpoint-<digits>


class ResumeError(RuntimeError):
    """The run can't resume; the message is the one sentence the run's error holds."""


def prepare_resume(
    files: RunFiles,
    run_id: int,
    log_line: Callable[[str], None],
    deadline: float | None = None,
    writer: DbWriter | None = None,
) -> Path | None:
    """The checkpoint to resume ``run_id`` from (None: start at step 0), after removing checkpoints that a killed
    worker left half-written, setting aside damaged ones (:mod:`trainer.job.checkpoint_check`: the newest intact one
    is used, and the log says which and why), and dropping the rows logged after the one returned (all of them when
    starting over, so every step appears once), then handing ``writer`` what an earlier worker could not write up to
    that step (:func:`replay_previous`). Retried while the database does not answer, until
    ``time.monotonic()`` passes ``deadline``. Raises :class:`ResumeError` when checkpoints exist but none is intact."""
    for name in files.prune_partial_checkpoints():
        log_line(f"removed {name}: the previous worker died while saving it")
    checkpoint, damaged = None, []
    for candidate in reversed(files.complete_checkpoints()):
        problem = checkpoint_problem(candidate)
        if problem is None:
            checkpoint = candidate
            break
        damaged.append(f"{candidate.name} ({problem})")
        # out of the way of later resumes, forks and the adapter list, but kept for whoever wants to look
        candidate.rename(_aside_name(candidate))
    if damaged and checkpoint is None:
        raise ResumeError(
            f"no intact checkpoint to resume from: {'; '.join(damaged)} (set aside with a {DAMAGED_SUFFIX} suffix); "
            "start the run again as a new run"
        )
    if damaged:
        log_line(f"resuming from {checkpoint.name}, the newest intact checkpoint: damaged {'; '.join(damaged)}")
    step = checkpoint_step(checkpoint) if checkpoint is not None else 0

    def drop() -> None:
        with get_sessionmaker().begin() as session:
            queries.drop_steps_after(session, run_id, step)

    retry_transient(drop, deadline if deadline is not None else time.monotonic(), "the resumed steps")
    if writer is not None:
        replay_previous(files, writer, step, log_line)
    if checkpoint is not None:
        log_line(f"resuming from {checkpoint.name}: steps continue from {step}")
    return checkpoint


def _aside_name(checkpoint: Path) -> Path:
    """checkpoint-N.damaged, or .damaged.2, .damaged.3 when an earlier damaged copy of step N is already aside."""
    target, n = checkpoint.with_name(checkpoint.name + DAMAGED_SUFFIX), 1
    while target.exists():
        n += 1
        target = checkpoint.with_name(f"{checkpoint.name}{DAMAGED_SUFFIX}.{n}")
    return target


def replay_previous(files: RunFiles, writer: DbWriter, step: int, log_line: Callable[[str], None]) -> None:
    """Hand the writer the rows an earlier worker of this run held when it ended without writing them (its grace
    ran out, or it was killed during an outage): those of steps up to ``step``, where this attempt continues, and its
    log lines. Later steps are logged again by this attempt; its own progress replaces the old one."""
    items = read_items(files.previous_pending_writes)
    if not items:
        return
    kept = 0
    for kind, payload in items:
        if kind in ("metrics", "samples"):
            rows = [row for row in payload if row["step"] <= step]
            if rows:
                (writer.metrics if kind == "metrics" else writer.samples)(rows)
                kept += len(rows)
        elif kind == "log":
            writer.log(*payload)
    writer.flush()
    files.previous_pending_writes.unlink(missing_ok=True)
    log_line(f"wrote {kept} rows an earlier worker of this run could not (kept in {files.pending_writes.name})")


def follow_config_after_resume(args, state, optimizer, lr_scheduler) -> float | None:
    """After a checkpoint is loaded, make the learning rate and the logging/saving intervals the run's own again;
    returns the new peak learning rate when it changed, else None.

    The checkpoint's scheduler state carries the peak learning rate it was created with (``base_lrs``) and its
    trainer state the intervals, and transformers restores both over the run's arguments. For a resumed run they are
    the same; a fork (trainer/supervise/fork.py) may have changed them. Called at train begin, when both are loaded.
    """
    state.logging_steps, state.save_steps = args.logging_steps, args.save_steps
    scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate may wrap it
    lambdas = getattr(scheduler, "lr_lambdas", None)  # transformers' schedules are all LambdaLR
    if optimizer is None or not lambdas or list(scheduler.base_lrs) == [args.learning_rate] * len(lambdas):
        return None
    scheduler.base_lrs = [args.learning_rate] * len(lambdas)
    lrs = [base * fn(scheduler.last_epoch) for base, fn in zip(scheduler.base_lrs, lambdas)]
    for group, lr in zip(optimizer.param_groups, lrs):
        group["initial_lr"], group["lr"] = args.learning_rate, lr
    scheduler._last_lr = lrs
    return args.learning_rate
