"""The ``grpo-studio`` commands on runs: launch, resume, stop, runs, log, presets, worker (each ``cmd_`` and its verb's
name; their options are the verbs' in app/actions/verbs.py). Each is a thin adapter over app.actions: it prints what the action
returned, or its refusal (:func:`refused`) with the action's exit code. A run trains in the foreground as
app.cli.output.foreground does."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.output import follow, foreground, refused, started_text
from trainer.safe_text import printable


def cmd_launch(args: argparse.Namespace) -> int:
    """Validate the config (exit 2 with every problem, starting nothing; exit 2 too when its model or data set can't
    be fetched here), create the run, train it."""
    from app import actions
    from app.actions.base import FetchError
    from trainer.presets import resolve_preset

    source = Path(resolve_preset(args.config))
    start = "detached" if args.detach else "here"
    try:
        launched = actions.launch(source, actions.OPERATOR, name=args.name, start=start, warn=True)
    except FetchError as exc:  # a valid config naming what can't be fetched here: its one sentence, as it is
        return refused(exc)
    except actions.ActionError as exc:
        return refused(actions.ActionError(f"{args.config}: invalid run config", exc.problems))
    for note in launched.notes:
        print(f"note: {note}", file=sys.stderr)
    if launched.started is None:
        print(f"run {launched.run_id}: {launched.name}")
        return foreground(launched.run_id, args.verbose)
    return _started(launched.run_id, launched.started, args.detach, "started")


def _started(run_id: int, started: int | str, detach: bool, verb: str) -> int:
    """What ``run`` and ``resume`` say after starting a worker elsewhere: a Slurm job refused (exit 1, with Slurm's
    words), a detached worker (exit 0), or a Slurm job followed in the foreground as ``run`` follows a local one."""
    if started == "":
        from app.actions.runs import refusal

        print(f"grpo-studio: run {run_id}: {refusal(run_id)}", file=sys.stderr)
        return 1
    if detach:
        print(f"run {run_id} {verb} in the background ({started_text(started)}); follow it with: grpo-studio runs")
        return 0
    print(f"run {run_id} {verb} as Slurm job {started}: following it here (Ctrl-C stops the job)", flush=True)
    return follow(run_id)


def cmd_worker(args: argparse.Namespace) -> int:
    """Train an existing run in this process: what ``python -m trainer.job.worker RUN_ID`` does."""
    from trainer.job.worker import main as worker_main

    return worker_main([str(args.run_id)])


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a stopped or failed run."""
    from app import actions

    started = actions.resume(args.run_id, start="detached" if args.detach else "here")
    if started is None:
        return foreground(args.run_id, args.verbose)
    return _started(args.run_id, started, args.detach, "resumed")


def cmd_stop(args: argparse.Namespace) -> int:
    """Send a stop request to a run's worker."""
    from app import actions

    sent = actions.stop(args.run_id)
    print(f"run {args.run_id}: " + ("stop requested" if sent else "stopped before a worker took it"))
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    """Print the presets: name (what ``run`` takes), title, model and data set."""
    from trainer.presets import load_preset, preset_files, preset_title

    for path in preset_files():
        config = load_preset(path)
        print(f"{path.stem:<20} {preset_title(path)}")
        print(f"{'':<20} model {config.model_name_or_path}, data {config.dataset_name}, {config.max_steps} steps")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    """Print the runs table (after reconciling runs whose worker died), as ``/runs`` lists them."""
    from app import actions

    summaries = actions.runs(reconciled=True)
    if not summaries:
        print("No runs yet. Start one with: grpo-studio run tiny-offline (or grpo-studio serve)")
        return 0
    places = actions.places(summaries)
    errors = actions.run_errors([s.id for s in summaries])
    print(f"{'id':>4}  {'name':<28} {'status':<10} {'step':>11}  {'last reward':<11}  where")
    for s in summaries:
        run = actions.run_json(s, places[s.id])
        step = f"{s.current_step}/{s.total_steps}"
        shown = "-" if s.last_reward is None else f"{s.last_reward:.3f}"
        name = printable(s.name, one_line=True)[:28]
        print(f"{s.id:>4}  {name:<28} {s.status!s:<10} {step:>11}  {shown:<11}  {run['where']}")
        if errors.get(s.id):
            print(f"{'':6}error: {printable(errors[s.id], one_line=True)[:200]}")
        if run["health"]:  # a frozen worker or a hanging step must not read as a healthy "running"
            print(f"{'':>6}{run['health']}")
    return 0


def cmd_log(args: argparse.Namespace, poll_seconds: float = 1.0) -> int:
    """Print a run's log lines, oldest first; with ``--follow``, new ones as they arrive until the run has ended."""
    import time
    from datetime import datetime

    from app import actions

    after = 0
    while True:
        read = actions.log(args.run_id, after)
        for line in read["lines"]:
            stamp = datetime.fromisoformat(line["time"])
            print(f"{stamp:%Y-%m-%d %H:%M:%S} {line['level']:<7} {line['message']}", flush=True)
        after = read["next_after"]
        if not args.follow or (read["ended"] and not read["lines"]):
            return 0
        time.sleep(poll_seconds)
