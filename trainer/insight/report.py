"""One read of a run for the learning views: its learning map, its reward-hacking watch and its checkpoints. The
Monitor's learning panel (app/web/pages/learning.py) and ``grpo-studio prompts`` (app/cli/prompts.py) both call
:func:`learning_report`, so the two show the same thing."""

from __future__ import annotations

from dataclasses import dataclass, field

from storage import learning, queries
from storage.db import get_sessionmaker
from trainer.insight.learning_map import LearningMap, build_map
from trainer.insight.watch import WatchAlert, nearest_checkpoint, watch


@dataclass
class LearningReport:
    """A run's learning map (as of ``map.upto``), the watch's alerts, and the steps of its complete checkpoints."""

    run_id: int
    name: str
    map: LearningMap
    alerts: list[WatchAlert] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)
    # (step, drawn, skipped) of each step the curriculum decided (storage.learning.curriculum_order); [] without one
    curriculum: list[tuple[int, list[str], list[dict[str, str]]]] = field(default_factory=list)

    def checkpoint_for(self, alert: WatchAlert) -> int | None:
        """The checkpoint nearest the end of what ``alert`` covers (the one to Compare with the base)."""
        return nearest_checkpoint(self.checkpoints, alert.last_step)


class NoSuchRun(LookupError):
    """The run id names no run."""


def learning_report(run_id: int, upto: int | None = None) -> LearningReport:
    """Read run ``run_id``'s rows and build its report; raises :class:`NoSuchRun` for an unknown id."""
    from trainer.supervise.fork import checkpoint_steps

    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, run_id)
        if run is None:
            raise NoSuchRun(f"no run with id {run_id} (grpo-studio runs lists them)")
        name = run.name
        samples = learning.scored_samples(session, run_id)
        heldout = learning.heldout_points(session, run_id)
        groups = learning.group_stats(session, run_id)
        order = learning.curriculum_order(session, run_id)
        series = {key: [(s, v) for s, v, _ in points] for key, points in queries.metrics_since(session, run_id).items()}
    if upto is not None:
        groups = [g for g in groups if g.step <= upto]
        order = [entry for entry in order if entry[0] <= upto]
        series = {key: [p for p in points if p[0] <= upto] for key, points in series.items()}
    lm = build_map(samples, heldout, upto)
    alerts = watch(series, groups, heldout_size(heldout))
    return LearningReport(run_id, name, lm, alerts, checkpoint_steps(run_id), order)


def heldout_size(points) -> int | None:
    """How many problems one held-out evaluation scored (the most at any step), None without evaluations: the set
    size the watch's held-out noise is figured at."""
    per_step: dict[int, int] = {}
    for p in points:
        per_step[p.step] = per_step.get(p.step, 0) + 1
    return max(per_step.values(), default=None)
