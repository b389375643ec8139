"""``grpo-studio prompts RUN_ID``: the learning map and the reward-hacking watch of a run as text, what the Monitor's
learning panel shows (both read app.actions.learning)."""

from __future__ import annotations

import argparse

from trainer.insight.learning_map import CLASSES, HELDOUT, TRAIN, LearningMap, PromptLine
from trainer.insight.report import LearningReport

BARS = " ▁▂▃▄▅▆▇█"  # a pass rate of 0 to 1 as one character
SHOWN = 10  # prompts listed per class without --all
VISITS = 24  # latest visits drawn per prompt


def rates_bar(line: PromptLine) -> str:
    """A prompt's latest pass rates, one character each (blank: 0, full block: solved G/G)."""
    return "".join(BARS[round(v.rate * (len(BARS) - 1))] for v in line.visits[-VISITS:])


def map_text(report: LearningReport, every: bool = False) -> str:
    """The report as the command prints it: signal, each class with its prompts, the frontier, the watch's alerts."""
    lm: LearningMap = report.map
    if not lm.lines:
        return f"run {report.run_id} ({report.name}): no sampled completions yet"
    upto = lm.upto if lm.upto is not None else lm.steps[-1]
    out = [f"run {report.run_id} ({report.name}): the learning map as of step {upto}"]
    if lm.signal:
        shares = list(lm.signal.values())
        last_step, last = list(lm.signal.items())[-1]
        out.append(
            f"groups that carried a learning signal: {last:.0%} at step {last_step}, {sum(shares) / len(shares):.0%} "
            f"over {len(shares)} steps"
        )
    for source in (TRAIN, HELDOUT):
        counts = lm.counts(source)
        if not sum(counts.values()):
            continue
        out.append("")
        out.append(f"{source} prompts: " + ", ".join(f"{counts[c]} {c}" for c in CLASSES))
        for cls in CLASSES:
            lines = [ln for ln in lm.lines if ln.source == source and ln.cls == cls]
            for ln in lines if every else lines[:SHOWN]:
                out.append(f"  {cls:<13} |{rates_bar(ln)}| {ln.visits[-1].rate:>4.0%}  {_one_line(ln.prompt)}")
            if not every and len(lines) > SHOWN:
                out.append(f"  {cls:<13} ... and {len(lines) - SHOWN} more (--all lists them)")
    out.append("")
    frontier = lm.frontier
    out.append(f"frontier (learning now, the latest group disagreed): {len(frontier)} prompts")
    for ln in frontier if every else frontier[:SHOWN]:
        out.append(f"  {ln.visits[-1].rate:>4.0%}  {_one_line(ln.prompt)}")
    if report.curriculum:
        skips = [entry for _, _, skipped in report.curriculum for entry in skipped]
        solved = sum(1 for e in skips if e["reason"] == "solved")
        out.append("")
        out.append(
            f"curriculum: {len(skips)} draws skipped over {len(report.curriculum)} steps ({solved} solved, "
            f"{len(skips) - solved} never solved); the order of every step is stored (storage.learning.curriculum_order)"
        )
    out.append("")
    if not report.alerts:
        out.append("reward-hacking watch: nothing to report")
    for alert in report.alerts:
        checkpoint = report.checkpoint_for(alert)
        near = f"; nearest checkpoint: step {checkpoint}" if checkpoint is not None else ""
        out.append(f"⚠ {alert.name} ({alert.steps}) [{alert.state}]: {alert.message}{near}")
        out.append(f"  {alert.hint}")
    return "\n".join(out)


def _one_line(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def cmd_prompts(args: argparse.Namespace) -> int:
    """Print a run's learning map and watch; exit 2 for an unknown run."""
    from app import actions

    print(map_text(actions.learning(args.run_id, args.upto_step), args.all))
    return 0


def alerts_text(run_id: int, alerts) -> str:
    """A run's one list of alerts (trainer.insight.alerts) as ``grpo-studio alerts`` prints it: one line each (a watch
    alert with the steps it held at and whether it still holds), its hint indented below."""
    if not alerts:
        return f"run {run_id}: no alerts"
    out = [f"run {run_id}: {len(alerts)} alerts"]
    for a in alerts:
        mark = "note" if a.level == "note" else "⚠"
        where = f" ({a.steps}, {'holds now' if a.holds_now else 'cleared'})" if a.steps else ""
        out.append(f"{mark} {a.name}{where}: {a.message}")
        out.append(f"  {a.hint}")
    return "\n".join(out)


def cmd_alerts(args: argparse.Namespace) -> int:
    """Print a run's alerts (what the Monitor's banner and the API's /alerts list)."""
    from app import actions

    print(alerts_text(args.run_id, actions.run_alerts(args.run_id)))
    return 0
