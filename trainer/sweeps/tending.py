"""Tending a sweep's running members (issue 41): each pass of the scheduler reads every running member of every
active sweep, judges it by the sweep's pruning rules (trainer/sweeps/prune.py) and stops a pruned one through the
normal stop path (trainer.supervise.stop.stop_worker: SIGTERM, the worker saves its adapter at its next step
boundary and ends stopped), with the reason in the member's row and log (storage.queries.sweep_stopped). A sweep
whose members have all ended is marked finished.

A member is judged again only when it has logged a new step since it was last judged (``judged`` keeps the step per
run between passes): the watch reads a run's whole history, which every 2 s would cost a long run's dashboard for
nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, MutableMapping

from sqlalchemy.orm import Session

from storage import learning, queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from storage.models import Run, RunStatus, Sweep, SweepState
from storage.series import series_since
from trainer import review
from trainer.config import RunConfig
from trainer.config.sweep import SweepError, SweepSpec, leans_after, parse, points
from trainer.insight.watch import watch
from trainer.supervise import schedule
from trainer.supervise.stop import stop_worker
from trainer.sweeps.prune import Stop, judge

log = logging.getLogger(__name__)


def tend(session: Session, judged: MutableMapping[int, int] | None = None) -> list[tuple[int, Stop]]:
    """One pass over the active sweeps: each running member judged (when it logged a step since ``judged`` saw
    it) and stopped when a rule speaks; a sweep whose members have all ended finished. Returns (run id, stop) of the
    members stopped now."""
    judged = {} if judged is None else judged
    stopped = []
    for sweep in sweep_rows.list_sweeps(session, SweepState.ACTIVE):
        try:
            spec = parse(sweep.definition)
        except SweepError:  # a definition stored by another version: its members run their course
            log.warning("sweep %d: its stored definition no longer reads; its members are not pruned", sweep.id)
            sweep_rows.finish_if_done(session, sweep)
            continue
        runs = sweep_rows.member_runs(session, sweep.id)
        due = [
            r for r in runs if r.status == RunStatus.RUNNING and not r.sweep_stop and judged.get(r.id) != r.current_step
        ]
        # the members' objectives only when a member is judged or TPE may ask: most passes see no new step, and
        # reading every member's series each 2 s was most of a pass's cost (bench/sweep_overhead.py)
        asking = spec.method == "tpe" and len(runs) < spec.members
        objectives = (
            {r.id: sweep_rows.objective_points(session, r.id, sweep.objective) for r in runs} if due or asking else {}
        )
        for run in due:
            judged[run.id] = run.current_step
            series = series_since(session, run.id)
            alerts = []
            if spec.prune.watch:
                alerts = watch(series, learning.group_stats(session, run.id), learning.heldout_size(session, run.id))
            peers = [points for other, points in objectives.items() if other != run.id]
            stop = judge(spec, series, peers, alerts)
            if stop is None:
                continue
            queries.sweep_stopped(session, run, stop.reason)
            stop_worker(session, run)
            stopped.append((run.id, stop))
            log.info("sweep %d: run %d %s", sweep.id, run.id, stop.reason)
        if asking:
            ask_next(session, sweep, spec, runs, objectives)
        sweep_rows.finish_if_done(session, sweep)
    return stopped


def ask_next(
    session: Session, sweep: Sweep, spec: SweepSpec, runs: list[Run], objectives: dict[int, list[tuple[int, float]]]
) -> Run | None:
    """A model-based sweep's next member, once none waits in the queue and it has fewer than its members: TPE is
    told the objective at the last evaluation of each member that ended with one, and asked one point (never one
    already used). Its config is checked like any run's; an invalid one is written stopped with its problems, so
    the table says why the point did not train. Returns the new member, or None."""
    if len(runs) >= spec.members or any(r.status == RunStatus.QUEUED for r in runs):
        return None
    told = [(r.sweep_point, objectives[r.id][-1][1]) for r in runs if r.status.terminal and objectives.get(r.id)]
    told_ids = {r.id for r in runs if r.status.terminal and objectives.get(r.id)}
    used = [r.sweep_point for r in runs if r.id not in told_ids]
    asked = points(spec, told, count=1, used=used)
    if not asked:
        return None
    point = asked[0]
    name = f"{sweep.name}-{len(runs) + 1}"
    found = review.check({**sweep.base_config, **point, "name": name})
    config = found.config.to_dict() if found.config is not None else {**sweep.base_config, **point, "name": name}
    steps = RunConfig.from_stored(config).max_steps
    run = queries.create_run(session, name, config, steps, sweep_id=sweep.id, sweep_point=point)
    leans = leans_after(spec) or 0
    how = "leaning on them" if len(told) >= leans else f"at random: TPE leans from {leans} results"
    queries.add_log(session, run.id, f"sweep: asked after {len(told)} results (TPE, {how})")
    if found.problems:
        queries.sweep_stopped(session, run, "not started: its config is invalid: " + "; ".join(found.problems))
    runs.append(run)
    return run


class Scheduler(schedule.Scheduler):
    """The dashboard's scheduler thread (trainer.supervise.schedule.Scheduler) that also tends the sweeps after each
    pass."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.judged: dict[int, int] = {}

    def each_pass(self) -> None:
        with get_sessionmaker().begin() as session:
            tend(session, self.judged)


def follow(
    sweep_id: int,
    max_concurrent: int = 1,
    interval: float = schedule.SCHEDULE_SECONDS,
    on_end: Callable[[int, str, str | None], None] | None = None,
) -> None:
    """Run a sweep's queue here until every member has ended (a foreground ``grpo-studio sweep``): what the
    dashboard's Scheduler does each pass, with ``on_end(run_id, status, stop_reason)`` told of each member that
    ends."""
    judged: dict[int, int] = {}
    told: set[int] = set()
    while True:
        states = schedule.poll_slurm()
        with get_sessionmaker().begin() as session:
            schedule.schedule(session, max_concurrent, slurm_states=states)
        with get_sessionmaker().begin() as session:
            tend(session, judged)
            sweep = sweep_rows.get_sweep(session, sweep_id)
            ended = [(r.id, str(r.status), r.sweep_stop) for r in sweep_rows.member_runs(session, sweep_id)]
            done = sweep is None or sweep.state == SweepState.FINISHED.value
        for run_id, status, reason in ended:
            if status in {s.value for s in RunStatus if s.terminal} and run_id not in told:
                told.add(run_id)
                if on_end is not None:
                    on_end(run_id, status, reason)
        if done:
            return
        time.sleep(interval)
