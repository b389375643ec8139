"""The actions that read what a run wrote: its metric series as columns, its sampled completions, its alerts and its
log. The Monitor, ``grpo-studio logs`` / ``export --metrics`` and the API (``/metrics``, ``/samples``, ``/alerts``)
all read through these."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from app.actions.base import ActionError, find_run
from storage import learning as learning_rows
from storage import queries
from storage.db import get_sessionmaker
from storage.series import series_since
from trainer.config import RunConfig

if TYPE_CHECKING:
    from trainer.insight.spread import NoSpread

MAX_SAMPLES = 1_000  # completions one call returns at most (a step of a big run holds a few hundred)
MAX_LOG_LINES = 5_000


def metrics(run_id: int, keys: Sequence[str] | None = None, since_step: int = -1) -> dict[str, list]:
    """The run's metric series after step ``since_step`` as columns: ``step`` (every step any chosen key was logged
    at, ascending), ``wall_time``, then one column per key (``keys``: those only; default every key), None where a
    key was not logged at that step.

    A key the run has not logged yet is an empty column while the run is queued or running (a just-launched run logs
    nothing before its first step, and some keys arrive later: the held-out score at its first evaluation), so a poll
    loop can ask for what it will chart from its first call. Once the run has ended nothing more will come: an
    unknown key is then refused naming the keys it logged."""
    with get_sessionmaker().begin() as session:
        run = find_run(session, run_id)
        ended = run.status.terminal
        series = series_since(session, int(run_id), int(since_step))
        known = queries.metric_keys(session, int(run_id))
    wanted = list(keys) if keys else sorted(series)
    unknown = [k for k in wanted if k not in known]
    if unknown and ended:
        logged = f"it logged {', '.join(known)}" if known else "it logged no metric"
        raise ActionError(f"run {run_id} has no metric {', '.join(map(repr, unknown))}: {logged}")
    return columns({k: series[k] for k in wanted if k in series}, wanted)


def columns(series: dict[str, np.ndarray], keys: Sequence[str]) -> dict[str, list]:
    """Per-key (n, 3) point arrays (step, value, wall time) as aligned columns (see :func:`metrics`)."""
    steps = sorted({int(s) for points in series.values() for s in points[:, 0]})
    at = {s: i for i, s in enumerate(steps)}
    table: dict[str, list] = {"step": steps, "wall_time": [None] * len(steps)}
    for key in keys:
        column: list = [None] * len(steps)
        for step, value, wall in series.get(key, np.empty((0, 3))):
            i = at[int(step)]
            column[i] = None if np.isnan(value) else float(value)
            table["wall_time"][i] = table["wall_time"][i] or float(wall)
        table[key] = column
    return table


def samples(run_id: int, step: int | None = None, limit: int = 200, newest_if_missing: bool = False) -> dict[str, Any]:
    """The completions sampled at ``step`` (default: the newest sampled step), at most ``limit``, with their rewards
    and advantages (and a tool run's turns), and the steps that have samples. A step without samples is refused, or with
    ``newest_if_missing`` read as the newest (the Monitor's slider before the first samples arrive)."""
    limit = max(1, min(int(limit), MAX_SAMPLES))
    with get_sessionmaker().begin() as session:
        find_run(session, run_id)
        steps = queries.sample_steps(session, int(run_id))
        if step is not None and int(step) not in steps and newest_if_missing:
            step = None
        if step is not None and int(step) not in steps:
            shown = f"{steps[0]}..{steps[-1]}" if steps else "none yet"
            raise ActionError(f"run {run_id} kept no samples at step {step} (sampled steps: {shown})")
        chosen = int(step) if step is not None else (steps[-1] if steps else None)
        rows = queries.samples_at(session, int(run_id), chosen)[:limit] if chosen is not None else []
        found = [
            {
                "group": s.group_index,
                "prompt": s.prompt,
                "completion": s.completion,
                "reference_answer": s.reference_answer,
                "rewards": dict(s.rewards),
                "total_reward": s.total_reward,
                "advantage": s.advantage,
            }
            # a tool run's sample also has its turns (trainer.tools.turns); a plain run's reads as it always did
            | ({"turns": [dict(turn) for turn in s.turns]} if s.turns is not None else {})
            for s in rows
        ]
    return {"step": chosen, "sampled_steps": steps, "samples": found}


def alerts(run_id: int) -> list[dict[str, Any]]:
    """The run's one list of alerts (trainer.insight.alerts): a frozen worker or hanging step first, then the failure signs
    of its recent metrics, the reward-hacking watch's history (each with the steps it held at, kept after it
    clears), then the notes; each with what to try."""
    return [a.as_dict() for a in run_alerts(run_id)]


def run_alerts(run_id: int) -> list:
    """The run's alerts as trainer.insight.alerts.RunAlert (see :func:`alerts`)."""
    from app.actions.liveness import liveness_alerts
    from app.actions.monitoring import fork_notes
    from trainer.insight.alerts import alert_list

    history = watch_alerts(run_id)
    with get_sessionmaker().begin() as session:
        run = find_run(session, run_id)
        series = series_since(session, run.id)
        notes = fork_notes(run)
        return alert_list(
            series,
            RunConfig.from_stored(run.config).max_completion_length,
            liveness_alerts(run),
            history,
            notes=notes,
        )


def nothing_learned(run_id: int) -> NoSpread | None:
    """trainer.insight.spread's verdict on the run's stored metrics: a NoSpread when no group of any step so far had
    a reward spread (its ``sentence`` is what ``/run``, ``grpo-studio run`` and the Monitor's banner say), None while
    some group disagreed or too early to tell."""
    from trainer.insight.spread import KEYS, no_spread

    with get_sessionmaker().begin() as session:
        run = find_run(session, run_id)
        series = {key: [(p.step, p.value) for p in queries.metric_series(session, run.id, key)] for key in KEYS}
    return no_spread(series)


def watch_alerts(run_id: int, series=None) -> list:
    """The reward-hacking watch's history of a run (trainer.insight.watch) from ``series`` (default: read) and its
    stored groups and held-out set size."""
    from trainer.insight.watch import watch

    with get_sessionmaker().begin() as session:
        run = find_run(session, run_id)
        if series is None:
            series = series_since(session, run.id)
        groups = learning_rows.group_stats(session, run.id)
        size = learning_rows.heldout_size(session, run.id)
    return watch(series, groups, size)


def log(run_id: int, after_id: int = 0, limit: int = MAX_LOG_LINES) -> dict[str, Any]:
    """The run's log lines after line ``after_id``, oldest first (at most ``limit``), whether the run has ended, and
    the id to ask after next time."""
    with get_sessionmaker().begin() as session:
        run = find_run(session, run_id)
        lines = queries.log_since(session, run.id, int(after_id))[: max(1, int(limit))]
        ended = run.status.terminal
        found = [
            {"id": line.id, "time": line.created_at.isoformat(), "level": line.level, "message": line.message}
            for line in lines
        ]
    return {"lines": found, "ended": ended, "next_after": found[-1]["id"] if found else int(after_id)}


def learning(run_id: int, upto: int | None = None):
    """The run's learning map (every prompt's class and its pass rate at each visit, the signal share per step, the
    frontier) and the reward-hacking watch's alerts, as of step ``upto`` (default: now); see trainer.insight."""
    from trainer.insight.report import NoSuchRun, learning_report

    try:
        return learning_report(int(run_id), upto)
    except NoSuchRun as exc:
        raise ActionError(str(exc)) from None
    except (TypeError, ValueError):
        raise ActionError(f"run id {run_id!r}: expected a whole number, as the runs list shows it") from None


def learning_json(report) -> dict[str, Any]:
    """A learning report as JSON values (the API's ``/prompts``). Mappings keyed by step are keyed by the step as
    text: JSON keys are strings, and Gradio's encoder (orjson) refuses an int key where json.dumps would convert it
    (the client then saw only a cancelled call)."""
    lm = report.map
    return {
        "run_id": report.run_id,
        "upto": lm.upto,
        "counts": lm.counts(),
        "frontier": [line.prompt for line in lm.frontier],
        "signal": {str(step): share for step, share in lm.signal.items()},
        "prompts": [
            {
                "prompt": line.prompt,
                "source": line.source,
                "class": line.cls,
                "pass_rate": {str(step): rate for step, rate in line.cells.items()},
            }
            for line in lm.lines
        ],
        "alerts": [
            {
                "name": a.name,
                "message": a.message,
                "hint": a.hint,
                "first_step": a.first_step,
                "last_step": a.last_step,
                "holds_now": a.holds_now,
                "nearest_checkpoint": report.checkpoint_for(a),
            }
            for a in report.alerts
        ],
    }
