"""What the Monitor page reads: one poll of the picked run and its overlays (:func:`monitor_view`, in one database
session), the alerts of what its cache holds, and the reads of its learning panel (the token view, an alert's
completions, what a drawing of the map reflects). The page lays these out; it reads nothing itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.actions.liveness import liveness_alerts
from app.actions.monitor_state import RunCache
from storage import learning as learning_rows
from storage import queries
from storage.db import get_sessionmaker
from storage.models import Run, RunLog, RunStatus, Sample

LOG_LINES = 30  # grpo-studio's own log lines a poll shows
WORKER_LOG_LINES = 40  # lines of the worker's raw output, when asked for


@dataclass(frozen=True)
class MonitorRead:
    """What one poll of the Monitor read: the runs drawn (the picked one first, then its overlays and a fork's
    parent) with their caches brought up to date, and of the picked run its sampled steps, its last log lines, the
    measures that turned themselves off, where it waits in the queue and, when asked, its worker's raw output. The
    rows are as read (the session is closed): to show, not to change."""

    run_ids: list[int]
    caches: dict[int, RunCache]
    runs: dict[int, Run | None]
    fork: tuple[int, int] | None  # (parent run id, step) of a fork whose parent still exists
    sample_steps: list[int]
    log_lines: list[RunLog]
    measures_off: dict[str, str]
    # (running run ids, queued run ids ahead of it) while the picked run is queued without a worker, else None
    queue: tuple[list[int], list[int]] | None
    worker_log: str = ""
    # the log lines that mark the picked run's start (storage.queries.start_lines), read while it is live
    start_lines: list[RunLog] = field(default_factory=list)

    @property
    def main(self) -> Run | None:
        """The picked run's row; None when it no longer exists."""
        return self.runs[self.run_ids[0]]


def has_runs() -> bool:
    """Whether the database holds any run at all (the Monitor's empty state says to launch one)."""
    with get_sessionmaker().begin() as session:
        return queries.has_runs(session)


def monitor_view(
    run_id: int, overlay: Sequence[int] | None, caches: dict[int, RunCache] | None, raw: bool = False
) -> MonitorRead:
    """One Monitor poll of run ``run_id`` drawn with the ``overlay`` runs (and, for a fork, its parent, drawn under it
    on its step axis), in one session: each run's cache reads only the steps that arrived since the last poll (caches
    of runs no longer shown are dropped). ``raw`` also reads the worker's raw output file."""
    run_ids = [int(run_id)] + [int(r) for r in (overlay or []) if int(r) != int(run_id)]
    caches = {rid: cache for rid, cache in (caches or {}).items() if rid in run_ids}
    with get_sessionmaker().begin() as session:
        fork = queries.fork_point(session, int(run_id))
        if fork and fork[0] not in run_ids:  # a fork is drawn over its parent, on the parent's step axis
            run_ids.append(fork[0])
        for rid in run_ids:
            caches.setdefault(rid, RunCache(rid)).poll(session)
        runs = {rid: queries.get_run(session, rid) for rid in run_ids}
        steps = queries.sample_steps(session, int(run_id))
        log_lines = queries.log_tail(session, int(run_id), LOG_LINES)
        off = queries.measures_off(session, int(run_id))
        main = runs[int(run_id)]
        # a queued run with a pid has its worker starting (a slot taken): it waits behind no one
        queued = main is not None and main.status == RunStatus.QUEUED and main.pid is None
        queue = _queue(session, main) if queued else None
        live = main is not None and not RunStatus(main.status).terminal
        start_lines = queries.start_lines(session, int(run_id)) if live else []
    worker_log = ""
    if raw and main is not None:
        from trainer.supervise.workers import log_tail

        worker_log = log_tail(main, WORKER_LOG_LINES)
    return MonitorRead(run_ids, caches, runs, fork, steps, log_lines, off, queue, worker_log, start_lines)


def _queue(session, run: Run) -> tuple[list[int], list[int]]:
    """The running runs and the queued runs ahead of a queued ``run`` (by id: the scheduler starts the oldest)."""
    live = queries.list_runs(session, [RunStatus.RUNNING, RunStatus.QUEUED])
    running = sorted(r.id for r in live if r.status == RunStatus.RUNNING)
    ahead = sorted(r.id for r in live if r.status == RunStatus.QUEUED and r.id < run.id)
    return running, ahead


def cached_alerts(series, max_completion_length: int | None, run: Run | None = None, watch_alerts=()) -> list:
    """The run's one list of alerts (trainer.insight.alerts.alert_list) from the metric series a Monitor cache holds,
    the liveness of ``run`` (its row, when known) and the watch's history as the caller cached it."""
    from trainer.insight.alerts import alert_list

    live = liveness_alerts(run) if run is not None else []
    return alert_list(series, max_completion_length, live, watch_alerts, notes=fork_notes(run))


def fork_notes(run: Run | None) -> list:
    """The note of a fork that changed its parent's rewards (trainer.insight.forks); [] for any other run."""
    from trainer.insight.forks import fork_notes as read_notes

    if run is None or run.parent_run_id is None:
        return []
    with get_sessionmaker().begin() as session:
        return read_notes(session, run)


def sample_steps(run_id: int | None) -> list[int]:
    """The steps at which the run stored samples, ascending (none for no run)."""
    if run_id is None:
        return []
    with get_sessionmaker().begin() as session:
        return queries.sample_steps(session, int(run_id))


# --- the learning panel ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenRead:
    """One completion's token values (None when none were kept), its advantage, why the token capture turned itself
    off if it did ("at step N: reason"), and how many completions of its step kept token values."""

    values: Any
    advantage: float | None
    off: str | None
    kept: int


def latest_token_step(run_id: int) -> int | None:
    """The newest sampled step of the run with token values, None before any."""
    with get_sessionmaker().begin() as session:
        steps = queries.sample_steps(session, run_id)
        return next((s for s in reversed(steps) if learning_rows.token_indices(session, run_id, s)), None)


def newest_steps(run_id: int) -> tuple[int | None, int | None]:
    """The run's newest sampled step and its newest held-out evaluation (None: none yet; two index reads): what a
    drawing of the learning map reflects."""
    with get_sessionmaker().begin() as session:
        return learning_rows.newest_steps(session, run_id)


def samples_between(run_id: int, first: int, last: int) -> list[Sample]:
    """Every stored sample of the steps from ``first`` to ``last``, step by step, each step's in generated order."""
    with get_sessionmaker().begin() as session:
        steps = [s for s in queries.sample_steps(session, run_id) if first <= s <= last]
        return [s for step in steps for s in queries.samples_at(session, run_id, step)]


def step_samples(run_id: int, step: int) -> list[Sample]:
    """The samples of one step, in the order they were generated (a token index is a position in this list)."""
    with get_sessionmaker().begin() as session:
        return list(queries.samples_at(session, run_id, step))


def token_completions(run_id: int, step: int) -> list[tuple[int, int, float | None]]:
    """The completions of ``step`` that kept token values, as (index, group, advantage)."""
    with get_sessionmaker().begin() as session:
        indices = learning_rows.token_indices(session, run_id, step)
        samples = queries.samples_at(session, run_id, step)
    return [(i, samples[i].group_index, samples[i].advantage) for i in indices if i < len(samples)]


def token_values(run_id: int, step: int, index: int) -> TokenRead:
    """The token values of completion ``index`` of ``step`` and what the token view says beside them."""
    with get_sessionmaker().begin() as session:
        values = learning_rows.token_values(session, run_id, step, index)
        samples = queries.samples_at(session, run_id, step)
        off = queries.measures_off(session, run_id).get("token_values")
        kept = len(learning_rows.token_indices(session, run_id, step))
    advantage = samples[index].advantage if index < len(samples) else None
    return TokenRead(values, advantage, off, kept)
