"""The ``grpo-studio probe`` and ``fork`` commands (their options are in app/cli.py); a fork trains in the foreground
as ``run`` does (app.cli_output.foreground). Heavy packages are imported inside the commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli_output import foreground, started_text


def probe_options(p: argparse.ArgumentParser) -> None:
    """The probe's arguments: the config file and how many prompts to sample a group for."""
    p.add_argument("config", help="a YAML or JSON file with RunConfig fields, or a preset's name (grpo-studio presets)")
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
    (the probe runs in this process, its progress on stderr; the dashboard runs the same probe as a child job)."""
    from app import actions
    from trainer.presets import resolve_preset
    from trainer.probe.job import WASTED_EXIT

    source = Path(resolve_preset(args.config))
    probed = actions.probe(
        source, actions.OPERATOR, args.prompts, here=True, log=lambda line: print(line, file=sys.stderr)
    )
    print(probed.report.to_text())
    return WASTED_EXIT if probed.report.verdict == "wasted" else 0


def cmd_fork(args: argparse.Namespace) -> int:
    """Create a fork of a run at a checkpoint and train it (foreground unless --detach)."""
    from app import actions

    run_id = actions.fork(args.run_id, args.step, args.set, actions.OPERATOR, args.name)
    print(f"run {run_id}: fork of run {args.run_id} at step {args.step}; steps continue from {args.step + 1}")
    if args.detach:
        from storage import queries
        from storage.db import get_sessionmaker
        from trainer.job.launch import start_worker

        with get_sessionmaker().begin() as session:
            started = start_worker(session, queries.get_run(session, run_id))
        print(f"run {run_id} started in the background ({started_text(started)}); follow it with: grpo-studio runs")
        return 0

    return foreground(run_id)
