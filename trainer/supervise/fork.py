"""Forking a run: a new run that starts from a saved checkpoint of another one, with some settings changed ("the
same run from step 40, with beta 0.01").

A fork is a resume in a new run. Its directory gets a copy of the parent's ``checkpoint-N`` (a copy, not a link, so
nothing the fork's worker writes can touch the parent), its row records the parent and N, and its worker resumes from
that checkpoint as any stopped run would (trainer/job/checkpoints.py): the adapter, optimizer, scheduler, RNG and
data position all continue, so the fork's first logged step is N + 1 on the parent's axis. Settings that TRL reads
from its arguments every step (beta, temperature, reward weights, max_steps...) take effect from there; the learning
rate, which the checkpoint's scheduler would otherwise restore, is set back to the fork's by
:func:`trainer.job.checkpoints.follow_config_after_resume`.

Settings that change what the saved adapter *is* are refused, each with its reason (trainer.config.fork).
Torch-free: the dashboard and the CLI call this directly.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path
from typing import Any

from storage import queries
from storage.db import data_dir, get_sessionmaker
from trainer import review
from trainer.config import ConfigError, RunConfig
from trainer.config import fork as fork_rules
from trainer.supervise.run_files import RunFiles, checkpoint_step


class ForkError(ValueError):
    """A fork that can't be made as asked (no such run or checkpoint, a refused or invalid setting)."""


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """``["beta=0.01", "reward_weights=1,2"]`` as a mapping; values stay text, read as their field's type by
    :meth:`RunConfig.from_dict` (a list as comma-separated items)."""
    changes = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ForkError(f"{pair!r}: expected key=value, e.g. beta=0.01")
        changes[key.strip()] = value.strip()
    return changes


def checkpoint_steps(run_id: int) -> list[int]:
    """The steps of a run's complete checkpoints (what it can be forked at), ascending; [] for a missing run."""
    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, int(run_id))
        output_dir = run.output_dir if run else None
    return [checkpoint_step(p) for p in RunFiles(Path(output_dir)).complete_checkpoints()] if output_dir else []


def forked_config(parent: dict[str, Any], changes: dict[str, Any], step: int, check_rewards: bool = True) -> RunConfig:
    """The parent's config with ``changes`` applied, validated (custom rewards imported only with
    ``check_rewards``: the dashboard passes its operator's choice); raises :class:`ForkError` naming every refused,
    unknown or invalid setting."""
    if refused := fork_rules.change_problems(changes):
        raise ForkError("; ".join(refused))
    try:
        config, _ = RunConfig.from_dict({**parent, **changes})
    except ConfigError as exc:
        raise ForkError("; ".join(exc.problems)) from None
    problems = review.problems(config, check_rewards=check_rewards) + fork_rules.steps_problems(config, step)
    if problems:
        raise ForkError("; ".join(problems))
    return config


def fork_run(
    run_id: int, step: int, changes: dict[str, Any], name: str | None = None, check_rewards: bool = True
) -> int:
    """Queue a fork of run ``run_id`` from its checkpoint of ``step`` with ``changes`` (setting name → value);
    returns the new run's id. The parent's row and files are only read.

    The checkpoint is copied into a staging directory first and renamed into the fork's directory in the transaction
    that creates the row: a copy of gigabytes must not hold the database's write lock, and the scheduler must never
    see the queued fork before its checkpoint is complete (it would train from step 0).
    """
    with get_sessionmaker().begin() as session:
        parent = queries.get_run(session, int(run_id))
        if parent is None:
            raise ForkError(f"no run with id {run_id}")
        saved = RunFiles(Path(parent.output_dir)).complete_checkpoints() if parent.output_dir else []
        parent_name, parent_config = parent.name, dict(parent.config)
    checkpoints = {checkpoint_step(p): p for p in saved}
    if step not in checkpoints:
        listed = ", ".join(str(s) for s in checkpoints) or "none yet"
        raise ForkError(f"run {run_id} has no saved checkpoint at step {step} (saved at steps: {listed})")
    changes = {**changes, "name": name} if name else changes  # validated with the rest of the config
    config = forked_config(parent_config, changes, step, check_rewards)
    if not changes.get("name"):
        config.name = f"{parent_name}-fork{step}"
    staging = RunFiles(data_dir() / "runs" / f".fork-{secrets.token_hex(4)}")
    try:
        shutil.copytree(checkpoints[step], staging.checkpoints / checkpoints[step].name)
        with get_sessionmaker().begin() as session:
            parent = queries.lock_run(session, int(run_id))  # no delete can come between this and the fork's row
            if parent is None:
                raise ForkError(f"run {run_id} was deleted while its checkpoint was being copied: nothing was created")
            run = queries.create_fork(session, parent, step, config.name, config.to_dict())
            files = RunFiles.new(run.id)
            staging.root.rename(files.root)
            queries.set_output_dir(session, run, str(files.root))
            changed = {k: (parent_config.get(k), v) for k, v in config.to_dict().items() if parent_config.get(k) != v}
            changed.pop("name", None)
            described = ", ".join(f"{k} {old!r} → {new!r}" for k, (old, new) in changed.items()) or "no settings"
            queries.add_log(session, run.id, f"forked from run {run_id} at step {step}; changed: {described}")
            return run.id
    finally:
        staging.remove()  # gone already unless something failed
