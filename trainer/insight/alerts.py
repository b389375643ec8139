"""One list of a run's alerts (issue 34): the liveness signs (a frozen worker, a hanging step: app.actions.liveness, judged
by the dashboard), the failure signs of trainer.insight.health and trainer.insight.signals, and the reward-hacking
watch's history (trainer/insight/watch.py), then the notes (readings that look like a failure but are not one). The
Monitor's banner, the API's ``/alerts``, ``grpo-studio alerts`` and the run's tracker (trainer/job/tracker_alerts.py,
everything but the liveness signs, which only an onlooker can see) all get this list, so no alert is seen in one
place and missing from another.

Pure: series and rows in, alerts out (app.actions.reading reads the rows; the worker keeps its own)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from trainer.insight.collapse import fine_before
from trainer.insight.health import WINDOW, Alert, health_alerts
from trainer.insight.signals import signal_alerts, signal_notes
from trainer.insight.watch import COLLAPSE, HELDOUT_SIZE, WatchAlert, watch

WARNING, NOTE = "warning", "note"
# The failure signs whose advice is about the task (too hard: train on easier prompts; answers cut at the length
# limit: raise max_completion_length). After a collapse of a model that could do the task they are its symptoms, and
# their advice is wrong: the collapse's diagnosis says what to do instead (issue 57: three such alerts blamed the task
# of a run broken by a learning rate of 5e-2).
TASK_ADVICE = frozenset({"zero_std", "length_limit", "truncated_flat"})


@dataclass(frozen=True)
class RunAlert:
    """One entry of the list: what, what to try, how serious (``level``: warning or note), which rules raised it
    (``source``: liveness, health, signal, watch or fork) and, for the watch's, the steps where it held and whether it
    still holds (a cleared one stays listed)."""

    name: str
    message: str
    hint: str
    level: str = WARNING
    source: str = "health"
    first_step: int | None = None
    last_step: int | None = None
    holds_now: bool = True

    def as_dict(self) -> dict[str, Any]:
        """The entry as JSON-able values (the API's ``/alerts``)."""
        return asdict(self)

    @property
    def steps(self) -> str:
        """The steps it held at as a person reads them ("" for a sign of now)."""
        if self.first_step is None:
            return ""
        return (
            f"step {self.first_step}"
            if self.first_step == self.last_step
            else f"steps {self.first_step}-{self.last_step}"
        )


def _from(alert: Alert, source: str) -> RunAlert:
    return RunAlert(alert.name, alert.message, alert.hint, alert.level, source)


def _from_watch(alert: WatchAlert) -> RunAlert:
    return RunAlert(
        alert.name, alert.message, alert.hint, WARNING, "watch", alert.first_step, alert.last_step, alert.holds_now
    )


def alert_list(
    series: Mapping[str, Sequence],
    max_completion_length: int | None = None,
    liveness: Sequence[Alert] = (),
    watch_alerts: Sequence[WatchAlert] | None = None,
    groups: Sequence = (),
    heldout_size: int | None = None,
    notes: Sequence[Alert] = (),
) -> list[RunAlert]:
    """Every alert of a run: ``liveness`` (app.actions.liveness.liveness_alerts of a live run, when the caller has it),
    health and signal signs of the recent steps, the watch's history (``watch_alerts`` when already computed, else
    from ``series``, ``groups`` and ``heldout_size``), then the notes (``notes``: those the caller read off the run's
    rows, a fork's change of rewards: trainer.insight.forks)."""
    history = watch(series, groups, heldout_size) if watch_alerts is None else watch_alerts
    broke = _collapsed_from(series, history, heldout_size or HELDOUT_SIZE)
    found = [_from(a, "liveness") for a in liveness]
    found += [
        _from(a, "health")
        for a in health_alerts(series, max_completion_length)
        if not broke or a.name not in TASK_ADVICE
    ]
    found += [_from(a, "signal") for a in signal_alerts(series) if not broke or a.name not in TASK_ADVICE]
    found += [_from_watch(a) for a in history]
    found += [_from(a, "fork") for a in notes]
    listed_notes = [a for a in found if a.level == NOTE]
    return [a for a in found if a.level != NOTE] + listed_notes + [_from(a, "signal") for a in signal_notes(series)]


def _collapsed_from(series: Mapping[str, Sequence], history: Sequence[WatchAlert], n: int) -> bool:
    """Whether the recent steps (the failure signs' window) are those of a collapse of a model that could do the
    task before it (held-out well above 0 at the evaluation before the collapse began): the task-difficulty advice
    is then suppressed. Without a held-out evaluation before the collapse the advice stays: nothing says the task was
    within reach."""
    steps = [int(p[0]) for points in series.values() for p in points]
    if not steps:
        return False
    latest = max(steps)
    return any(
        a.name == COLLAPSE and a.last_step >= latest - WINDOW and fine_before(series, a.first_step, n) is not None
        for a in history
    )
