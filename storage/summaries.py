"""The run list: what the Runs table and the run pickers show, for a thousand runs, every dashboard tick.

Reading it run by run (the run, then its last reward, last KL and latest evaluation: four queries a run) cost a
dashboard tick 0.5 s at 200 runs. One statement with correlated subqueries (each latest value a single seek on the
``(run_id, key, step)`` index, the model and data set names read out of the config JSON by the database) cost 8 ms at
1,000 runs, most of it the 2,000 seeks and building rows in Python, and five dashboards polling at once cost a tick
60-90 ms (bench/runs_list.py; 12-19 ms read as below).

So the run list is read in two parts. The runs table's own columns are read every tick: one table, no joins. The
rest, each run's latest reward and KL and its latest finished evaluation, is kept from the previous tick (per
database, for every dashboard of this process) and read again only for the runs that are running (their metrics
arrive every step, and not always in the transaction that moves their step counter: TRL's step end comes before its
log) and for the runs whose row changed (a run that is not running gets new metrics only by being resumed, which
changes its status; deleted and new runs change the list). A finished evaluation (rare) re-reads every run's.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session, aliased

from storage.models import Evaluation, Metric, Run, RunStatus


@dataclass(frozen=True)
class RunSummary:
    """One row of the run list."""

    id: int
    name: str
    status: str
    current_step: int
    total_steps: int
    started_at: datetime | None
    finished_at: datetime | None
    model: str | None
    dataset: str | None
    last_reward: float | None
    last_kl: float | None
    evaluation: dict | None  # the latest held-out evaluation's results, if any
    host: str | None = None  # where the worker runs: a host, or a Slurm job's nodes
    slurm_job_id: str | None = None
    heartbeat_at: datetime | None = None  # liveness (storage/models.py, app/actions/liveness.py)
    stepped_at: datetime | None = None
    step_seconds: float | None = None
    # the latest periodic held-out score logged while training (eval_steps), for runs without an evaluation job
    last_heldout: float | None = None
    sweep_id: int | None = None  # the sweep the run is a member of (issue 41), if any


_RUN_COLUMNS = (
    Run.id,
    Run.name,
    Run.status,
    Run.current_step,
    Run.total_steps,
    Run.started_at,
    Run.finished_at,
    Run.config["model_name_or_path"].as_string(),
    Run.config["dataset_name"].as_string(),
    Run.host,
    Run.slurm_job_id,
    Run.heartbeat_at,
    Run.stepped_at,
    Run.step_seconds,
    Run.sweep_id,
)
_FINISHED_EVALUATIONS = select(func.count(Evaluation.id), func.max(Evaluation.id)).where(
    Evaluation.status == RunStatus.COMPLETED
)


def _latest_metric(key: str):
    metric = aliased(Metric)
    return (
        select(metric.value)
        .where(metric.run_id == Run.id, metric.key == key)
        .order_by(metric.step.desc())
        .limit(1)
        .scalar_subquery()
    )


def _latest_evaluation():
    return (
        select(Evaluation.results)
        .where(Evaluation.run_id == Run.id, Evaluation.status == RunStatus.COMPLETED)
        .order_by(Evaluation.id.desc())
        .limit(1)
        .scalar_subquery()
    )


@dataclass
class _Latest:
    """What one database's run list keeps between ticks."""

    lock: threading.Lock
    evaluations: tuple | None = None  # (count, newest id) of finished evaluations when ``summaries`` were read
    summaries: dict[int, tuple] = field(default_factory=dict)  # run id -> (its run row, its RunSummary)


_kept: weakref.WeakKeyDictionary[Engine, _Latest] = weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()


def _latest_for(engine: Engine) -> _Latest:
    with _kept_lock:
        return _kept.setdefault(engine, _Latest(threading.Lock()))


def _read_latest(connection: Connection, run_ids: list[int] | None) -> dict[int, tuple]:
    """(reward, KL, evaluation, held-out) of these runs (of every run for None), in as few statements as the ids
    allow."""
    stmt = select(
        Run.id,
        _latest_metric("reward"),
        # at beta 0 TRL logs no KL: the one the worker measured (every measured_kl_steps steps) stands in
        func.coalesce(_latest_metric("kl"), _latest_metric("kl_measured")),
        _latest_evaluation(),
        _latest_metric("heldout/correct"),
    )
    if run_ids is None:
        return {row[0]: tuple(row[1:]) for row in connection.execute(stmt)}
    values = {}
    for start in range(0, len(run_ids), 500):  # well under any database's limit on bound parameters
        chunk = stmt.where(Run.id.in_(run_ids[start : start + 500]))
        values.update({row[0]: tuple(row[1:]) for row in connection.execute(chunk)})
    return values


def run_summaries(session: Session, search: str | None = None, limit: int | None = None) -> list[RunSummary]:
    """Every run (newest first), or those whose name contains ``search`` (any case) or whose id is ``search``."""
    kept = _latest_for(session.get_bind())
    connection = session.connection()  # Core rows: the ORM's row building was most of a tick's cost
    with kept.lock:  # dashboards ticking at once: one reads what changed, the others then find it kept
        rows = [tuple(row) for row in connection.execute(select(*_RUN_COLUMNS).order_by(Run.id.desc()))]
        evaluations = tuple(connection.execute(_FINISHED_EVALUATIONS).one())
        previous = kept.summaries if kept.evaluations == evaluations else {}
        changed = [
            row
            for row in rows
            if row[2] == RunStatus.RUNNING  # row[2]: the status (_RUN_COLUMNS)
            or row[0] not in previous
            or previous[row[0]][0] != row
        ]
        if changed:
            latest = _read_latest(connection, None if len(changed) == len(rows) else [row[0] for row in changed])
            previous = dict(previous)  # the kept dict may be in another thread's hands: never changed in place
            for row in changed:
                if row[0] in latest:  # else deleted since the rows were read
                    previous[row[0]] = (row, _summary(row, latest[row[0]]))
        kept.summaries = {row[0]: previous[row[0]] for row in rows if row[0] in previous}
        kept.evaluations = evaluations
        current = kept.summaries
    summaries = matching([current[row[0]][1] for row in rows if row[0] in current], search)
    return summaries[:limit] if limit else summaries


def _summary(row, latest: tuple) -> RunSummary:
    *run, host, slurm_job_id, beat, stepped, pace, sweep_id = row
    reward, kl, evaluation, heldout = latest
    return RunSummary(
        *run,
        reward,
        kl,
        evaluation,
        host=host,
        slurm_job_id=slurm_job_id,
        heartbeat_at=beat,
        stepped_at=stepped,
        step_seconds=pace,
        last_heldout=heldout,
        sweep_id=sweep_id,
    )


def matching(summaries: list[RunSummary], search: str | None) -> list[RunSummary]:
    """The runs whose name contains ``search`` (any case) or whose id it is; all of them for an empty search."""
    text = (search or "").strip()
    if not text:
        return summaries
    folded = text.casefold()
    return [s for s in summaries if folded in s.name.casefold() or str(s.id) == text]
