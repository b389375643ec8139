"""Is a running run's worker alive, and is it stepping? Read off the run row's liveness columns (issue 23, item 2).

The worker's writer thread stamps ``heartbeat_at`` every few seconds whatever the training loop does, and each step
end sets ``stepped_at`` and ``step_seconds`` (the recent steps' median). So a frozen worker (SIGSTOP, a machine that
went away) stops both, and a step that hangs (a generation that never ends) stops only the step. A step or a
heartbeat that merely arrives late is not an alarm: the verdicts wait for several missed heartbeats, and for a slow
step also for several times the usual step time. Plain functions of the row and the time, tested without a worker.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from trainer.insight.health import Alert

STALL_AFTER_SECONDS = 30.0  # six missed heartbeats (trainer/job/db_writer.py beats every 5 s)
SLOW_STEP_FACTOR = 5  # a step is slow once it has taken this many times the recent median (and the stall time)


def stall_after() -> float:
    """Seconds without a heartbeat before a run reads as stalled (``$GRPO_STUDIO_STALL_AFTER_S`` for tests)."""
    return float(os.environ.get("GRPO_STUDIO_STALL_AFTER_S") or STALL_AFTER_SECONDS)


def _age(at: datetime | None, now: datetime) -> float | None:
    if at is None:
        return None
    return (now - (at if at.tzinfo else at.replace(tzinfo=UTC))).total_seconds()


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def liveness_problem(run: Any, now: datetime | None = None) -> tuple[str, str] | None:
    """("stalled" or "slow_step", the sentence) for a running run whose worker froze or whose step hangs, else None.

    ``run`` is anything with ``status``, ``heartbeat_at``, ``stepped_at`` and ``step_seconds`` (a Run, a
    RunSummary). Runs from before heartbeats (``heartbeat_at`` None) are not judged.
    """
    if str(run.status) != "running" or run.heartbeat_at is None:
        return None
    now = now or datetime.now(UTC)
    limit = stall_after()
    beat, step = _age(run.heartbeat_at, now), _age(run.stepped_at, now)
    pace = f"steps took {_seconds(run.step_seconds)}" if run.step_seconds is not None else "no step timed yet"
    if beat > limit:
        quiet = min(beat, step) if step is not None else beat
        return "stalled", f"stalled: no step and no heartbeat for {quiet:.0f} s ({pace})"
    if step is not None and step > max(limit, SLOW_STEP_FACTOR * (run.step_seconds or 0.0)):
        return "slow_step", f"slow step: no step for {step:.0f} s ({pace}); the worker is alive"
    return None


def liveness_alerts(run, now=None) -> list[Alert]:
    """The stalled or slow-step alert of a running run, with what to check. Judged from outside the worker (a
    frozen worker can't say it is frozen), so these are the one kind of alert no tracker hears of."""
    problem = liveness_problem(run, now)
    if problem is None:
        return []
    name, message = problem
    if name == "stalled":
        hint = "the worker process is frozen or gone (suspended, out of memory, its machine down): check it, or stop and resume the run"
    else:
        hint = "the worker is alive but this step has not ended: a generation or reward may hang; see the raw worker output"
    return [Alert(name, message, hint)]
