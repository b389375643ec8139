"""The reward-hacking watch's alerts, sent to the run's tracker as they appear (issue 34, item 5): with
``report_to: [trackio]`` each new alert of trainer/insight/watch.py goes to ``trackio.alert()``, so a user who
watches the run in trackio sees the same alerts as the Monitor's banner, ``/alerts`` and ``grpo-studio alerts``.

The worker keeps the series it logged and the shape of each sampled group in memory and judges the watch every
``every`` steps (it reads the whole run: every step would cost a long run's steps a little each). An alert is sent
once, when its stretch first appears (keyed by its name and first step). The failure signs of app/health.py are the
dashboard's (app/ is not imported by the worker) and are not sent: trackers chart the same metrics.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from storage.learning import GroupStats
from trainer.insight.watch import watch

log = logging.getLogger(__name__)

WATCH_EVERY = 10  # steps between two judgements of the watch in the worker


class AlertForwarder:
    """Keeps what the watch reads and hands each new alert to ``send(title, text)``."""

    def __init__(self, send: Callable[[str, str], None], every: int = WATCH_EVERY) -> None:
        self.send, self.every = send, max(1, every)
        self.series: dict[str, list[tuple[int, float]]] = defaultdict(list)
        self.groups: list[GroupStats] = []
        self.sent: set[tuple[str, int]] = set()
        self.last_judged: int | None = None

    def observe(self, step: int, logs: Mapping[str, Any], rows: Sequence[Mapping[str, Any]] = ()) -> None:
        """One logged step: its numeric metrics, and its sample rows (for the diversity sign); judge when due."""
        for key, value in logs.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
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
        """Send every alert not sent before."""
        for alert in watch(self.series, self.groups):
            key = (alert.name, alert.first_step)
            if key not in self.sent:
                self.sent.add(key)
                self.send(f"{alert.name} ({alert.steps})", f"{alert.message}. {alert.hint[:1].upper()}{alert.hint[1:]}")


def trackio_forwarder(report_to: Sequence[str]) -> AlertForwarder | None:
    """An :class:`AlertForwarder` to ``trackio.alert()`` when the run reports to trackio, else None. A failed send
    is logged and never ends the run."""
    if "trackio" not in report_to:
        return None
    import trackio

    def send(title: str, text: str) -> None:
        try:
            trackio.alert(title=title, text=text)
        except Exception as exc:  # noqa: BLE001 - a tracker's hiccup must not end a training run
            log.warning("trackio alert %r not sent: %s", title, exc)

    return AlertForwarder(send)
