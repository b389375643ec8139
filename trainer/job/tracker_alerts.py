"""A run's alerts, sent to its tracker as they fire (issue 34, item 5): with ``report_to: [trackio]`` every alert of
the one list (trainer/insight/alerts.py: the failure signs of trainer.insight.health and trainer.insight.signals, the
reward-hacking watch's history, the notes) goes to ``trackio.alert()``, so a user who watches the run in trackio
sees the same alerts as the Monitor's banner, ``/alerts`` and ``grpo-studio alerts``. The liveness signs (a frozen
worker, a hanging step) are the one exception: only an onlooker can see them, and a frozen worker sends nothing.

The worker keeps the series it logged and the shape of each sampled group in memory and judges the list every
``every`` steps (the watch reads the whole run: every step would cost a long run's steps a little each), and once
more when training ends. Each alert is sent once, when it fires:

- a watch alert when its stretch first appears (keyed by its name and first step; a new stretch is a new alert);
- a sign of now (NaN loss, zero std, KL climbing, ...) when it starts to hold: it is sent again only after a
  judgement where it did not hold, so a sign that lasts a thousand steps is one alert, not a hundred.

Warnings go as trackio's ``WARN``, notes (readings that look like a failure but are not one) as ``INFO``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from storage.learning import GroupStats
from trainer.insight.alerts import NOTE, RunAlert, alert_list

log = logging.getLogger(__name__)

WATCH_EVERY = 10  # steps between two judgements of the alert list in the worker

# send(title, text, level): level is "warn" for a warning and "info" for a note (trackio's AlertLevel values)
Send = Callable[[str, str, str], None]


class AlertForwarder:
    """Keeps what the alert list reads and hands each alert to ``send(title, text, level)`` once, when it fires."""

    def __init__(self, send: Send, every: int = WATCH_EVERY, max_completion_length: int | None = None) -> None:
        self.send, self.every, self.max_completion_length = send, max(1, every), max_completion_length
        self.series: dict[str, list[tuple[int, float]]] = defaultdict(list)
        self.groups: list[GroupStats] = []
        self.sent: set[tuple[str, int]] = set()  # the watch's stretches already sent
        self.holding: set[tuple[str, str]] = set()  # the signs of now that held at the last judgement
        self.last_judged: int | None = None
        self.step = 0
        self.notes: list = []  # notes read off the run's rows once, at its start (a fork's change of rewards)

    def observe(self, step: int, logs: Mapping[str, Any], rows: Sequence[Mapping[str, Any]] = ()) -> None:
        """One logged step: its numeric metrics, and its sample rows (for the diversity sign); judge when due."""
        self.step = step
        for key, value in logs.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                # a NaN kept as NaN, as the stored rows give it to the dashboard: the NaN-loss sign looks for it
                self.series[key].append((step, float(value)))
        by_group: dict[int, list[str]] = defaultdict(list)
        for row in rows:
            by_group[row["group_index"]].append(str(row["completion"]))
        for group, texts in sorted(by_group.items()):
            self.groups.append(GroupStats(step, group, len(texts), len(set(texts)), sum(map(len, texts)) / len(texts)))
        if self.last_judged is None or step - self.last_judged >= self.every:
            self.last_judged = step
            self.judge()

    def judge(self) -> None:
        """Send every alert that fired since the last judgement."""
        holding = set()
        for alert in alert_list(self.series, self.max_completion_length, groups=self.groups, notes=self.notes):
            level = "info" if alert.level == NOTE else "warn"
            if alert.first_step is not None:  # the watch's: a stretch of steps
                key = (alert.name, alert.first_step)
                if key not in self.sent:
                    self.sent.add(key)
                    self.send(f"{alert.name} ({alert.steps})", _text(alert), level)
                continue
            key = (alert.source, alert.name)
            holding.add(key)
            if key not in self.holding:
                self.send(f"{alert.name} (step {self.step})", _text(alert), level)
        self.holding = holding


def _text(alert: RunAlert) -> str:
    return f"{alert.message}. {alert.hint[:1].upper()}{alert.hint[1:]}"


def trackio_forwarder(report_to: Sequence[str], max_completion_length: int | None = None) -> AlertForwarder | None:
    """An :class:`AlertForwarder` to ``trackio.alert()`` when the run reports to trackio, else None. A failed send
    is logged and never ends the run."""
    if "trackio" not in report_to:
        return None
    import trackio

    def send(title: str, text: str, level: str) -> None:
        try:
            trackio.alert(title=title, text=text, level=trackio.AlertLevel(level))
        except Exception as exc:  # noqa: BLE001 - a tracker's hiccup must not end a training run
            log.warning("trackio alert %r not sent: %s", title, exc)

    return AlertForwarder(send, max_completion_length=max_completion_length)
