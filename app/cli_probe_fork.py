"""The ``grpo-studio probe`` and ``fork`` commands (their options are in app/cli.py), and training a run in the
foreground, which ``run``, ``resume`` and ``fork`` share. Heavy packages are imported inside the commands."""

from __future__ import annotations

import argparse
import sys


def probe_options(p: argparse.ArgumentParser) -> None:
    """The probe's arguments: the config file and how many prompts to sample a group for."""
    p.add_argument("config", help="a YAML or JSON file with RunConfig fields")
    p.add_argument("--prompts", type=int, default=8, help="prompts to sample a group for (default 8)")


def fork_options(p: argparse.ArgumentParser) -> None:
    """The fork's arguments after the run id: the checkpoint's step, changed settings, the new run's name."""
    p.add_argument("--step", type=int, required=True, help="the checkpoint's step")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a changed setting, e.g. beta=0.01 (repeatable)"
    )
    p.add_argument("--name", help="the new run's name (default: <parent>-fork<step>)")


def cmd_probe(args: argparse.Namespace) -> int:
    """Print the probe's report of a config: exit 0, 3 when it says the run would learn nothing, 2 for a bad config
    (what ``python -m trainer.probe`` does, the dashboard's probe job)."""
    from trainer.probe.__main__ import main as probe_main

    return probe_main([args.config, "--prompts", str(args.prompts)])


def cmd_fork(args: argparse.Namespace) -> int:
    """Create a fork of a run at a checkpoint and train it (foreground unless --detach)."""
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.job.fork import ForkError, fork_run, parse_settings

    try:
        run_id = fork_run(args.run_id, args.step, parse_settings(args.set), args.name)
    except ForkError as exc:
        print(f"grpo-studio: {exc}", file=sys.stderr)
        return 2
    print(f"run {run_id}: fork of run {args.run_id} at step {args.step}; steps continue from {args.step + 1}")
    if args.detach:
        from trainer.job.launch import start_worker

        with get_sessionmaker().begin() as session:
            pid = start_worker(session, queries.get_run(session, run_id))
        print(f"run {run_id} started in the background (pid {pid}); follow it with: grpo-studio runs")
        return 0
    return foreground(run_id)


def foreground(run_id: int) -> int:
    """Train ``run_id`` in this process; the exit code says how it ended (0 completed, 130 stopped, 1 failed)."""
    from storage.models import RunStatus
    from trainer.job.worker import run_worker

    status = run_worker(run_id, show_progress=True)
    print(f"run {run_id} {status}")
    return {RunStatus.COMPLETED: 0, RunStatus.STOPPED: 130}.get(status, 1)
