"""Resuming a run from its checkpoints.

A stopped or failed run continues from its latest complete checkpoint (:meth:`RunFiles.latest_checkpoint`). What the
interrupted attempt logged after that checkpoint is dropped from the database, because the resumed run logs those
steps again: every step appears once. The other half of that promise is in the callback: the rows of a step are
committed before its checkpoint is written, so nothing before a checkpoint is lost to a kill.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from storage import queries
from storage.db import get_sessionmaker, retry_transient
from trainer.job.run_files import RunFiles, checkpoint_step


def prepare_resume(
    files: RunFiles, run_id: int, log_line: Callable[[str], None], deadline: float | None = None
) -> Path | None:
    """The checkpoint to resume ``run_id`` from (None: start at step 0), after removing checkpoints that a killed
    worker left half-written and dropping the rows logged after the one returned (retried while the database does
    not answer, until ``time.monotonic()`` passes ``deadline``)."""
    for name in files.prune_partial_checkpoints():
        log_line(f"removed {name}: the previous worker died while saving it")
    checkpoint = files.latest_checkpoint()
    if checkpoint is not None:
        step = checkpoint_step(checkpoint)

        def drop() -> None:
            with get_sessionmaker().begin() as session:
                queries.drop_steps_after(session, run_id, step)

        retry_transient(drop, deadline if deadline is not None else time.monotonic(), "the resumed steps")
        log_line(f"resuming from {checkpoint.name}: steps continue from {step}")
    return checkpoint


def follow_config_after_resume(args, state, optimizer, lr_scheduler) -> float | None:
    """After a checkpoint is loaded, make the learning rate and the logging/saving intervals the run's own again;
    returns the new peak learning rate when it changed, else None.

    The checkpoint's scheduler state carries the peak learning rate it was created with (``base_lrs``) and its
    trainer state the intervals, and transformers restores both over the run's arguments. For a resumed run they are
    the same; a fork (trainer/job/fork.py) may have changed them. Called at train begin, when both are loaded.
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
