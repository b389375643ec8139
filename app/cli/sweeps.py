"""The ``grpo-studio`` commands on sweeps: ``sweep`` (create one, then run its queue here until every member has
ended, unless ``--detach``), ``sweeps`` (the list, or one sweep's table), ``stop_sweep`` and ``resume_sweep``. Thin
adapters over app.actions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainer.safe_text import printable


def cmd_sweep(args: argparse.Namespace) -> int:
    """Check the sweep and every member (exit 2 with every problem, creating nothing), create it, print its members;
    then train them one after another here (the dashboard's scheduler pass, pruning included) unless ``--detach``."""
    from app import actions
    from app.actions.sweeps import point_text
    from trainer.presets import resolve_preset

    source = Path(resolve_preset(args.config, sweeps=True))
    try:
        swept = actions.sweep(source, actions.OPERATOR, args.grid or None, name=args.name)
    except actions.ActionError as exc:
        if exc.exit_code != 2:
            raise
        return _refused(args.config, exc)
    for note in swept.notes:
        print(f"note: {note}", file=sys.stderr)
    print(
        f"sweep {swept.sweep_id}: {printable(swept.name, one_line=True)} ({swept.method}, {len(swept.members)} members, "
        f"objective {swept.direction} {swept.objective})"
    )
    for member in swept.members:
        state = f"skipped: {member.skipped}" if member.skipped else "queued"
        print(f"  run {member.run_id}  {point_text(member.point):<40} {state}")
    if args.detach:
        print(
            f"the dashboard's queue trains them (grpo-studio serve); follow with: grpo-studio sweeps --id {swept.sweep_id}"
        )
        return 0
    from trainer.sweeps.tending import follow

    def ended(run_id: int, status: str, reason: str | None) -> None:
        print(f"run {run_id} {status}" + (f": {reason}" if reason else ""), flush=True)

    follow(swept.sweep_id, on_end=ended)
    return _table(swept.sweep_id)


def _refused(config: str, exc) -> int:
    from app.cli.runs import refused

    return refused(type(exc)(f"{config}: invalid sweep", exc.problems))


def cmd_sweeps(args: argparse.Namespace) -> int:
    """Print the sweeps, or one sweep's table."""
    from app import actions

    if args.sweep_id is not None:
        return _table(args.sweep_id)
    found = actions.sweeps()
    if not found:
        print('No sweeps yet. Start one with: grpo-studio sweep tiny-offline --grid "beta=0,0.04"')
        return 0
    print(f"{'id':>4}  {'name':<24} {'state':<9} {'method':<7} {'members':>8}  {'objective':<24} best")
    for s in found:
        best = "-" if s.best_run_id is None else f"run {s.best_run_id}: {s.best_value:.3g}"
        name = printable(s.name, one_line=True)[:24]
        print(
            f"{s.id:>4}  {name:<24} {s.state:<9} {s.method:<7} {s.ended:>3}/{s.members:<4}  "
            f"{s.direction + ' ' + s.objective:<24} {best}"
        )
    return 0


def _table(sweep_id: int) -> int:
    from app import actions
    from app.actions.sweeps import point_text

    table = actions.sweep_detail(sweep_id)
    s = table.summary
    print(
        f"sweep {s.id}: {printable(s.name, one_line=True)} ({s.state}; {s.method}; objective {s.direction} {s.objective})"
    )
    print(
        f"  {'run':>5}  {'point':<36} {'status':<10} {'step':>9}  {'now':>6} {'best':>6} {'reward':>7} {'kl':>7}  stopped"
    )
    for r in table.rows:
        mark = "*" if r.best else " "
        print(
            f"{mark} {r.run_id:>5}  {point_text(r.point):<36} {r.status:<10} {f'{r.step}/{r.total_steps}':>9}  "
            f"{_num(r.objective_now):>6} {_num(r.objective_best):>6} {_num(r.reward):>7} {_num(r.kl):>7}  "
            f"{printable(r.stop_reason or '', one_line=True)}"
        )
    if s.best_run_id is not None:
        print(f"best: run {s.best_run_id} ({s.objective} {s.best_value:.3g}, marked *)")
    if table.leaning:
        print(table.leaning)
    return 0


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def cmd_stop_sweep(args: argparse.Namespace) -> int:
    """Stop a sweep and its live members."""
    from app import actions

    changed = actions.stop_sweep(args.sweep_id)
    runs = ", ".join(map(str, changed.members)) or "none was live"
    print(f"sweep {changed.sweep_id} stopped: no member is asked or pruned; members stopped: {runs}")
    return 0


def cmd_resume_sweep(args: argparse.Namespace) -> int:
    """Resume a stopped sweep (its queue is the dashboard's: grpo-studio serve trains the members)."""
    from app import actions

    changed = actions.resume_sweep(args.sweep_id)
    runs = ", ".join(map(str, changed.members)) or "none"
    print(f"sweep {changed.sweep_id} is active again; members queued to continue: {runs}")
    return 0
