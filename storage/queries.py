"""Query functions. Each takes a ``session``; the caller owns the transaction and keeps it short."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, false, func, or_, select, text, update
from sqlalchemy.orm import Session

from storage.models import (
    CHUNK_STEPS,
    CurriculumStep,
    Evaluation,
    HeldOutResult,
    Metric,
    MetricChunk,
    Run,
    RunLog,
    RunStatus,
    Sample,
    SampleTokens,
    Sweep,
    SweepState,
    utcnow,
)


# --- runs -----------------------------------------------------------------------------------------------------------
# The verbs of a run's life cycle. Nothing outside this module assigns a Run's fields, so every status change and what
# it implies (a cleared error, the timestamps) is written down once:
#   create_run, create_fork, requeue_run (resume)  → queued; worker_launched (or slurm_submitted) keeps it queued but
#                                       gives it a live worker (or a Slurm job)
#   mark_running (the worker itself)  → running; set_backend, set_progress, drop_steps_after while it trains
#   finish_run                        → completed, failed or stopped
def create_run(
    session: Session,
    name: str,
    config: dict[str, Any],
    total_steps: int = 0,
    sweep_id: int | None = None,
    sweep_point: dict[str, Any] | None = None,
) -> Run:
    """Queue a run with its config (a JSON-able mapping) and return it with its id assigned; a sweep's member
    knows its sweep and its point."""
    run = Run(
        name=name,
        config=config,
        status=RunStatus.QUEUED,
        total_steps=total_steps,
        sweep_id=sweep_id,
        sweep_point=sweep_point,
    )
    session.add(run)
    session.flush()
    return run


SCHEDULE_LOCK_ID = 0x73636864  # "schd": PostgreSQL's advisory lock for starting runs


def lock_scheduling(session: Session) -> None:
    """Hold the lock that starting runs takes, until the transaction ends: two dashboards (or a dashboard and the
    command line) that each allow one run must not each see no run training and start one. SQLite: its write lock,
    taken by a write that changes nothing; PostgreSQL: a transaction-level advisory lock."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": SCHEDULE_LOCK_ID})
    else:
        session.execute(update(Run).where(false()).values(id=Run.id))


EVALUATION_QUEUE_LOCK_ID = 0x6576616C  # "eval": PostgreSQL's advisory lock for an evaluation taking its turn


def lock_evaluation_queue(session: Session) -> None:
    """Hold the lock that an evaluation job taking its turn takes, until the transaction ends (as
    :func:`lock_scheduling` does for runs): on PostgreSQL a job whose id came first may commit its row after a later
    one's, and without the lock each could decide that no one is ahead of it."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": EVALUATION_QUEUE_LOCK_ID})
    else:
        session.execute(update(Evaluation).where(false()).values(id=Evaluation.id))


def lock_run(session: Session, run_id: int) -> Run | None:
    """The run, read under the database's write lock (SQLite) or its row lock (PostgreSQL), or None when it is gone.

    Python's sqlite3 begins a transaction only at the first write, so a plain read before an insert saw a run that
    a delete then removed before the insert's own transaction began: a fork created that way took its deleted
    parent's id and named itself as its own parent. Writing first (a no-op update of the row) makes the read and
    what follows one transaction that no delete can come between.
    """
    session.execute(update(Run).where(Run.id == run_id).values(id=Run.id))
    return session.get(Run, run_id, populate_existing=True)


def create_fork(session: Session, parent: Run, step: int, name: str, config: dict[str, Any]) -> Run:
    """Queue a run that starts from ``parent``'s checkpoint of ``step``: it records its parent, and its step counter
    starts at ``step``, where its worker resumes (the caller copies the checkpoint and sets the output dir)."""
    run = Run(
        name=name,
        config=config,
        status=RunStatus.QUEUED,
        total_steps=config.get("max_steps", 0),
        current_step=step,
        parent_run_id=parent.id,
        parent_step=step,
    )
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, run_id: int) -> Run | None:
    """The run with this id, or None."""
    return session.get(Run, run_id)


def list_runs(session: Session, statuses: Iterable[RunStatus] | None = None) -> Sequence[Run]:
    """Runs, newest first, optionally only those in ``statuses``."""
    stmt = select(Run).order_by(Run.id.desc())
    if statuses is not None:
        stmt = stmt.where(Run.status.in_(list(statuses)))
    return session.scalars(stmt).all()


def set_config(session: Session, run: Run, config: dict[str, Any]) -> None:
    """Replace the run's stored config (the launcher stores it with its relative paths made absolute)."""
    run.config = config


def has_runs(session: Session) -> bool:
    """Whether the database holds any run at all (the Monitor's empty state says to launch one)."""
    return session.scalar(select(Run.id).limit(1)) is not None


def fork_point(session: Session, run_id: int) -> tuple[int, int] | None:
    """(parent run id, step) of a fork whose parent still exists; None for a run that is no fork."""
    row = session.execute(select(Run.parent_run_id, Run.parent_step).where(Run.id == run_id)).first()
    if row is None or row.parent_run_id is None or session.get(Run, row.parent_run_id) is None:
        return None
    return row.parent_run_id, row.parent_step


def set_output_dir(session: Session, run: Run, output_dir: str) -> None:
    """Record the run's directory before any worker starts (a fork's holds the checkpoint it starts from)."""
    run.output_dir = output_dir


def requeue_run(session: Session, run: Run) -> None:
    """Queue a stopped or failed run again, without a worker: the scheduler starts one, which resumes it."""
    run.status = RunStatus.QUEUED
    run.pid = run.pid_started = run.slurm_job_id = None
    run.error = None
    run.finished_at = None


def worker_launched(session: Session, run: Run, pid: int, pid_started: str | None, output_dir: str) -> None:
    """Record the worker process a launcher started for the run. The run stays queued until the worker marks itself
    running, but it holds a training slot from now on (it has a live pid)."""
    run.status = RunStatus.QUEUED
    run.pid = pid
    run.pid_started = pid_started
    run.output_dir = output_dir
    run.error = None
    run.finished_at = None


def slurm_submitted(session: Session, run: Run, job_id: str, output_dir: str) -> None:
    """Record the Slurm job submitted for the run: it stays queued (Slurm's queue now) until the worker starts."""
    run.status = RunStatus.QUEUED
    run.pid = run.pid_started = None
    run.slurm_job_id = job_id
    run.output_dir = output_dir
    run.error = None
    run.finished_at = None


def mark_running(
    session: Session, run: Run, pid: int, output_dir: str, pid_started: str | None = None, host: str | None = None
) -> None:
    """Record that a worker process ``pid`` (on ``host``) has taken the run; clears the error of a previous attempt."""
    run.status = RunStatus.RUNNING
    run.pid = pid
    run.host = host or run.host
    run.pid_started = pid_started
    run.output_dir = output_dir
    run.error = None
    run.started_at = run.started_at or utcnow()
    run.finished_at = None
    # a fresh liveness record: a resumed run's last step time is the previous worker's, not this one's
    run.heartbeat_at, run.stepped_at, run.step_seconds = utcnow(), None, None


def set_backend(session: Session, run_id: int, description: str) -> None:
    """Record which model path the worker took and why, for the dashboard."""
    session.execute(update(Run).where(Run.id == run_id).values(backend=description))


def set_progress(
    session: Session,
    run_id: int,
    current_step: int,
    total_steps: int | None = None,
    stepped_at: datetime | None = None,
    step_seconds: float | None = None,
) -> None:
    """Update the run's step counter (and total, when known); the worker also says when the step ended and how long
    recent steps took (the liveness columns of :class:`Run`)."""
    values: dict[str, Any] = {"current_step": current_step}
    if total_steps is not None:
        values["total_steps"] = total_steps
    if stepped_at is not None:
        values["stepped_at"] = stepped_at
    if step_seconds is not None:
        values["step_seconds"] = step_seconds
    session.execute(update(Run).where(Run.id == run_id).values(values))


def heartbeat(session: Session, run_id: int, at: datetime | None = None) -> None:
    """Record that the run's worker is alive now (its writer thread calls this every few seconds)."""
    session.execute(update(Run).where(Run.id == run_id).values(heartbeat_at=at or utcnow()))


def drop_steps_after(session: Session, run_id: int, step: int) -> None:
    """Delete the metrics and samples an interrupted attempt logged after ``step`` and set the step counter back to
    it: a run resumed from the checkpoint of ``step`` logs those steps again, and each step must appear once."""
    for model in (Metric, Sample, SampleTokens, HeldOutResult, CurriculumStep):
        session.execute(delete(model).where(model.run_id == run_id, model.step > step))
    # and the packed copies of blocks holding such a step (storage/series.py)
    session.execute(
        delete(MetricChunk).where(MetricChunk.run_id == run_id, MetricChunk.first_step > step - CHUNK_STEPS)
    )
    set_progress(session, run_id, step)


def requeued(session: Session, run: Run) -> None:
    """A run whose Slurm job went back into Slurm's queue: queued again, its job id kept (the job restarts the worker,
    which resumes from the latest checkpoint), no process of its own until then."""
    run.status = RunStatus.QUEUED
    run.pid = run.pid_started = None


def finish_run(session: Session, run: Run, status: RunStatus, error: str | None = None) -> None:
    """Put the run in a terminal status, with the error text for ``failed``."""
    if not status.terminal:
        raise ValueError(f"finish_run needs a terminal status, got {status.value}")
    run.status = status
    run.error = error
    run.finished_at = utcnow()


def sweep_stopped(session: Session, run: Run, reason: str) -> None:
    """Record why a sweep stopped or skipped its member ``run`` (a pruning rule's sentence), in the run's row and
    its log; a member skipped before it ever started is finished as stopped here too."""
    run.sweep_stop = reason
    add_log(session, run.id, f"sweep: {reason}")
    if run.status == RunStatus.QUEUED and not run.pid and not run.slurm_job_id:
        finish_run(session, run, RunStatus.STOPPED, reason)


def sweep_active(session: Session, sweep_id: int) -> bool:
    """Whether the sweep ``sweep_id`` is active (the scheduler's pass asks and prunes its members)."""
    return session.scalar(select(Sweep.state).where(Sweep.id == sweep_id)) == SweepState.ACTIVE.value


def sweep_resumed(session: Session, run: Run) -> None:
    """A member the sweep's stop had stopped goes on with its sweep: its stop reason cleared (the caller requeues
    it)."""
    run.sweep_stop = None
    add_log(session, run.id, "sweep: resumed with its sweep")


def delete_run(session: Session, run_id: int) -> None:
    """Delete a run with its metrics, samples and log (the caller removes its files)."""
    for model in (Metric, MetricChunk, Sample, SampleTokens, HeldOutResult, CurriculumStep, RunLog, Evaluation):
        session.execute(delete(model).where(model.run_id == run_id))
    session.execute(delete(Run).where(Run.id == run_id))


# --- metrics --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricPoint:
    """A metric value as read back: ``value`` is NaN/inf again where that was logged."""

    step: int
    value: float
    wall_time: float


def metric_rows(run_id: int, step: int, logs: dict[str, Any], wall_time: float) -> list[dict[str, Any]]:
    """Turn one TRL ``logs`` dict into metric rows: every numeric key, whatever it is called; non-finite kept as raw."""
    rows = []
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        value = float(value)
        finite = math.isfinite(value)
        rows.append(
            {
                "run_id": run_id,
                "step": step,
                "key": key,
                "value": value if finite else None,
                "raw": None if finite else repr(value),
                "wall_time": wall_time,
            }
        )
    return rows


def add_metric_rows(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Bulk-insert rows made by :func:`metric_rows`; a key logged again at a step replaces its value there.

    One row per (run, key, step) is enforced by the unique index: TRL's end-of-training log repeats ``epoch`` at the
    last step, and a write replayed after a lost connection may have been committed already. Duplicates within
    ``rows`` are folded first (the last wins), because PostgreSQL refuses one statement that updates a row twice.
    """
    if not rows:
        return
    unique = list({(row["run_id"], row["key"], row["step"]): row for row in rows}.values())
    session.execute(_metric_upsert(session.get_bind().dialect.name), unique)


_UPSERTS: dict[str, Any] = {}


def _metric_upsert(dialect: str):
    """INSERT … ON CONFLICT (run_id, key, step) DO UPDATE for SQLite and PostgreSQL (a plain insert elsewhere), built
    once per dialect: the writer runs it every second."""
    if dialect not in _UPSERTS:
        table = Metric.__table__
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        elif dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            _UPSERTS[dialect] = table.insert()
            return _UPSERTS[dialect]
        stmt = insert(table)
        _UPSERTS[dialect] = stmt.on_conflict_do_update(
            index_elements=["run_id", "key", "step"],
            set_={"value": stmt.excluded.value, "raw": stmt.excluded.raw, "wall_time": stmt.excluded.wall_time},
        )
    return _UPSERTS[dialect]


def metric_series(session: Session, run_id: int, key: str, after_step: int = -1) -> list[MetricPoint]:
    """Values of ``key`` for ``run_id`` with step > ``after_step``, in step order (one index range scan)."""
    stmt = (
        select(Metric.step, Metric.value, Metric.raw, Metric.wall_time)
        .where(Metric.run_id == run_id, Metric.key == key, Metric.step > after_step)
        .order_by(Metric.step)
    )
    return [MetricPoint(step, read_value(value, raw), wall) for step, value, raw, wall in session.execute(stmt)]


def metrics_since(session: Session, run_id: int, after_step: int = -1) -> dict[str, list[tuple[int, float, float]]]:
    """All metric values of a run with step > ``after_step`` as ``(step, value, wall_time)`` tuples grouped by key,
    in step order: what one dashboard poll needs. Plain tuples, because a first read can be 400,000 rows."""
    stmt = (
        select(Metric.key, Metric.step, Metric.value, Metric.raw, Metric.wall_time)
        .where(Metric.run_id == run_id, Metric.step > after_step)
        .order_by(Metric.step)
    )
    out: dict[str, list[tuple[int, float, float]]] = {}
    for key, step, value, raw, wall in session.execute(stmt).tuples():
        points = out.get(key)
        if points is None:
            points = out[key] = []
        points.append((step, value if value is not None else read_value(value, raw), wall))
    return out


def metric_keys(session: Session, run_id: int) -> list[str]:
    """The distinct metric keys a run has logged, sorted."""
    stmt = select(Metric.key).where(Metric.run_id == run_id).distinct().order_by(Metric.key)
    return list(session.scalars(stmt))


def last_metric(session: Session, run_id: int, key: str) -> float | None:
    """The latest value of ``key`` for a run, or None if never logged."""
    stmt = (
        select(Metric.value, Metric.raw)
        .where(Metric.run_id == run_id, Metric.key == key)
        .order_by(Metric.step.desc())
        .limit(1)
    )
    row = session.execute(stmt).first()
    return None if row is None else read_value(*row)


def read_value(value: float | None, raw: str | None) -> float:
    """A stored metric value as a float: NaN/inf again from ``raw`` where the value column is NULL."""
    return float(raw) if value is None and raw else (value if value is not None else math.nan)


# --- samples --------------------------------------------------------------------------------------------------------
def add_sample_rows(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Bulk-insert completion samples (dicts with the columns of :class:`Sample`)."""
    if rows:
        session.execute(Sample.__table__.insert(), list(rows))


def prune_samples(session: Session, run_id: int, before_step: int, keep_every: int) -> int:
    """Delete a run's samples of steps before ``before_step`` except every ``keep_every``-th step (the retention of a
    long run); returns how many rows went."""
    tokens = SampleTokens  # a pruned completion's token values go with it
    session.execute(
        delete(tokens).where(tokens.run_id == run_id, tokens.step < before_step, tokens.step % keep_every != 0)
    )
    stmt = delete(Sample).where(Sample.run_id == run_id, Sample.step < before_step, Sample.step % keep_every != 0)
    return session.execute(stmt).rowcount


def sample_steps(session: Session, run_id: int) -> list[int]:
    """The steps for which a run has stored samples, ascending."""
    stmt = select(Sample.step).where(Sample.run_id == run_id).distinct().order_by(Sample.step)
    return list(session.scalars(stmt))


def samples_at(session: Session, run_id: int, step: int) -> Sequence[Sample]:
    """The samples of one step, in the order they were generated."""
    stmt = select(Sample).where(Sample.run_id == run_id, Sample.step == step).order_by(Sample.id)
    return session.scalars(stmt).all()


# --- log ------------------------------------------------------------------------------------------------------------
def add_log(session: Session, run_id: int, message: str, level: str = "INFO") -> None:
    """Append a line to a run's log."""
    session.add(RunLog(run_id=run_id, message=message, level=level))


# The log lines that mark a worker's start and a stop asked of it (trainer.supervise's start and stop write them): which
# came last says whether the run's current worker was asked to stop, without a column of its own.
WORKER_STARTED, STOP_REQUESTED = "worker started", "stop requested"


def stop_asked(session: Session, run_id: int) -> bool:
    """Whether a stop was asked of the run's latest worker: its log's latest "stop requested" line comes after the
    latest "worker started" one (a resumed run's old stop does not count)."""
    stmt = (
        select(RunLog.message)
        .where(
            RunLog.run_id == run_id,
            (RunLog.message == STOP_REQUESTED) | RunLog.message.startswith(WORKER_STARTED),
        )
        .order_by(RunLog.id.desc())
        .limit(1)
    )
    return session.scalar(stmt) == STOP_REQUESTED


# The log lines that mark where a run is in its start (app/web/widgets/start_phases.py reads them back): queued again by a resume
# (app.actions.runs), the worker taking the run (trainer.job.worker's claim), its trainer built (trainer.job.worker's
# "trainer ready in ... s", read by bench/first_step.py too) and the held-out evaluation it will run first
# (trainer.evaluation.periodic_eval). Written by their owners; matched here by how they begin.
RESUME_REQUESTED, WORKER_RUNNING = "resume requested", "worker running"
TRAINER_READY, HELDOUT_EVERY = "trainer ready in ", "held-out evaluation every "
START_MARKS = (WORKER_STARTED, WORKER_RUNNING, TRAINER_READY, HELDOUT_EVERY)


def start_lines(session: Session, run_id: int) -> list[RunLog]:
    """The log lines that mark the run's start since it was last queued (its latest "resume requested" line, first,
    when it has one), oldest first: a handful, whatever the length of its log."""
    since = select(func.max(RunLog.id)).where(RunLog.run_id == run_id, RunLog.message == RESUME_REQUESTED)
    after = session.scalar(since) or 0
    marked = or_(*(RunLog.message.startswith(mark) for mark in START_MARKS))
    stmt = select(RunLog).where(RunLog.run_id == run_id, RunLog.id >= after, or_(RunLog.id == after, marked))
    return list(session.scalars(stmt.order_by(RunLog.id)).all())


def log_since(session: Session, run_id: int, after_id: int = 0) -> list[RunLog]:
    """A run's log lines with an id after ``after_id``, oldest first (``grpo-studio logs --follow`` polls this)."""
    stmt = select(RunLog).where(RunLog.run_id == run_id, RunLog.id > after_id).order_by(RunLog.id)
    return list(session.scalars(stmt).all())


def log_tail(session: Session, run_id: int, limit: int = 50) -> list[RunLog]:
    """The last ``limit`` log lines of a run, oldest first."""
    stmt = select(RunLog).where(RunLog.run_id == run_id).order_by(RunLog.id.desc()).limit(limit)
    return list(reversed(session.scalars(stmt).all()))


# A line of a run's log saying that one of the worker's measures (trainer.job.measures, trainer.job.token_capture)
# turned itself off, and why; the Monitor's charts and the token view read it back with measures_off.
MEASURE_OFF = "measure turned off: "


def measure_off_line(measure: str, step: int, reason: str) -> str:
    """The log line saying ``measure`` (a metric key, or ``token_values``) turned itself off at ``step``."""
    return f"{MEASURE_OFF}{measure} at step {step}: {reason}"


def measures_off(session: Session, run_id: int) -> dict[str, str]:
    """Measure -> "at step N: reason", for each measure of the run that turned itself off (the first time)."""
    stmt = select(RunLog.message).where(RunLog.run_id == run_id, RunLog.message.startswith(MEASURE_OFF))
    found: dict[str, str] = {}
    for message in session.scalars(stmt.order_by(RunLog.id)):
        measure, _, rest = message.removeprefix(MEASURE_OFF).partition(" ")
        found.setdefault(measure, rest)
    return found


# --- evaluations ----------------------------------------------------------------------------------------------------
def add_evaluation(
    session: Session,
    run_id: int,
    adapter: str,
    k: int,
    samples: int,
    results: dict | None = None,
    status: RunStatus = RunStatus.COMPLETED,
) -> Evaluation:
    """Store a held-out evaluation of a run: finished (``results``), or a job that has just started."""
    finished = utcnow() if status.terminal else None
    evaluation = Evaluation(
        run_id=run_id, adapter=adapter, k=k, samples=samples, results=results, status=status, finished_at=finished
    )
    session.add(evaluation)
    session.flush()
    return evaluation


def get_evaluation(session: Session, evaluation_id: int) -> Evaluation | None:
    """The evaluation with this id, or None."""
    return session.get(Evaluation, evaluation_id)


def evaluation_progress(session: Session, evaluation_id: int, done: int, total: int) -> None:
    """Record how many of the job's ``total`` answers are generated."""
    session.execute(update(Evaluation).where(Evaluation.id == evaluation_id).values(done=done, total=total))


def evaluation_started(session: Session, evaluation: Evaluation, pid: int, pid_started: str | None) -> None:
    """Record the job's process."""
    evaluation.pid, evaluation.pid_started = pid, pid_started


def finish_evaluation(
    session: Session, evaluation: Evaluation, status: RunStatus, results: dict | None = None, error: str | None = None
) -> None:
    """End an evaluation job: completed with its results, or failed/stopped with the reason."""
    evaluation.status, evaluation.results, evaluation.error = status, results, error
    evaluation.finished_at = utcnow()


def live_evaluations(session: Session) -> Sequence[Evaluation]:
    """Every evaluation job marked queued or running, of any run, oldest first (the order of the queue)."""
    live = (RunStatus.QUEUED, RunStatus.RUNNING)
    stmt = select(Evaluation).where(Evaluation.status.in_(live)).order_by(Evaluation.id)
    return session.scalars(stmt).all()


def evaluation_takes_turn(session: Session, evaluation: Evaluation) -> None:
    """A queued evaluation job's turn has come: it is running from now."""
    evaluation.status = RunStatus.RUNNING


def latest_evaluation(session: Session, run_id: int, finished: bool = False) -> Evaluation | None:
    """The newest evaluation of a run (with ``finished``, the newest completed one), or None."""
    stmt = select(Evaluation).where(Evaluation.run_id == run_id)
    if finished:
        stmt = stmt.where(Evaluation.status == RunStatus.COMPLETED)
    return session.scalars(stmt.order_by(Evaluation.id.desc()).limit(1)).first()
