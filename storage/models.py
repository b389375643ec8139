"""All tables of grpo-studio in one module.

Metrics are stored in long form (one row per run, step and key) rather than one column per metric, because TRL's
set of logged keys changes between versions and with the configured rewards; the worker stores whatever arrives.
The composite index ``(run_id, key, step)`` makes "all values of key K for run R after step S" a single index range
scan; ``(run_id, step)`` does the same for "everything run R logged after step S", which each dashboard poll asks.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime

from sqlalchemy import JSON, DateTime, Enum, Float, ForeignKey, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    """Timezone-aware now, used for every timestamp column."""
    return datetime.now(UTC)


class RunStatus(enum.StrEnum):
    """Life cycle of a run. ``queued`` and ``running`` are live; the other three are terminal.

    A StrEnum, so a member prints as the string stored in the database ("running"), as the dashboard shows it.
    """

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def terminal(self) -> bool:
        """True for the statuses a run never leaves on its own."""
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.STOPPED)

    @property
    def resumable(self) -> bool:
        """True for the statuses a user may resume from (the worker continues from the latest checkpoint)."""
        return self in (RunStatus.STOPPED, RunStatus.FAILED)


class Base(DeclarativeBase):
    """Declarative base of all grpo-studio tables."""


def primary_key(sort_order: int = 0) -> Mapped[int]:
    """The integer ``id`` primary key every table has."""
    return mapped_column(Integer, primary_key=True, sort_order=sort_order)


def run_fk(sort_order: int = 0) -> Mapped[int]:
    """The ``run_id`` of a row that belongs to a run: deleting the run deletes the row (in SQLite too, since
    storage/db.py turns foreign keys on)."""
    return mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), sort_order=sort_order)


class RunRow:
    """The two columns every table of a run's rows starts with: its own ``id`` and the ``run_id`` it belongs to.

    Mixin columns would otherwise come after the class's own; the negative sort orders keep them first, as 0.1's
    tables (and migration 0001) have them.
    """

    id: Mapped[int] = primary_key(sort_order=-2)
    run_id: Mapped[int] = run_fk(sort_order=-1)


def created_now() -> Mapped[datetime]:
    """When the row was written, timezone-aware."""
    return mapped_column(DateTime(timezone=True), default=utcnow)


def owned_rows() -> Mapped[list]:
    """A run's rows of one kind, deleted with it; ``passive_deletes`` leaves that to the database's ON DELETE."""
    return relationship(back_populates="run", cascade="all, delete-orphan", passive_deletes=True)


def status_column(default: RunStatus, **kwargs) -> Mapped[RunStatus]:
    """A :class:`RunStatus` stored as the member's value in a VARCHAR(16) (no native enum type, no CHECK
    constraint): the schema stays what 0.1 created, and a status added later needs no migration. validate_strings
    refuses a string that is no status."""
    kind = Enum(
        RunStatus, native_enum=False, length=16, values_callable=lambda e: [m.value for m in e], validate_strings=True
    )
    return mapped_column(kind, default=default, **kwargs)


class Run(Base):
    """One training run: its config, where it is in its life cycle, and where its files are."""

    __tablename__ = "runs"
    # Ids a user holds (``?run=6``, exports, scripts, trackers) are never handed out again after a delete: SQLite
    # without AUTOINCREMENT reuses the highest id (revision 0008). PostgreSQL's sequences never reuse one.
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = primary_key()
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[RunStatus] = status_column(RunStatus.QUEUED, index=True)
    config: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = created_now()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pid: Mapped[int | None] = mapped_column(Integer)
    # The worker process's start time as the OS reports it: together with the pid it identifies the process even
    # after the pid has been reused by another one.
    pid_started: Mapped[str | None] = mapped_column(String(32))
    output_dir: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    current_step: Mapped[int] = mapped_column(Integer, default=0)
    total_steps: Mapped[int] = mapped_column(Integer, default=0)
    # Which model path the worker took and why ("plain transformers + PEFT: no GPU"), shown by the dashboard.
    backend: Mapped[str | None] = mapped_column(Text)
    # Where the worker runs, for the dashboard: the host name, or a Slurm job's node list (set by the worker), and the
    # Slurm job of a run on the slurm executor (trainer.supervise.slurm): its liveness is the job's state, not a pid.
    host: Mapped[str | None] = mapped_column(Text)
    slurm_job_id: Mapped[str | None] = mapped_column(String(32))
    # A fork (trainer/supervise/fork.py) starts from a checkpoint of another run: which run, and that checkpoint's step.
    # Not a foreign key: a fork outlives its parent's deletion and still says where its first steps came from.
    parent_run_id: Mapped[int | None] = mapped_column(Integer)
    parent_step: Mapped[int | None] = mapped_column(Integer)
    # Liveness, written by the worker (trainer/job/db_writer.py): a heartbeat every few seconds from its writer
    # thread, whatever the training loop does, and when the latest step ended with the recent steps' median
    # duration. Neither moving is a frozen worker; only the heartbeat moving is a slow step (app/actions/liveness.py).
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    stepped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    step_seconds: Mapped[float | None] = mapped_column(Float)
    # A sweep's member (issue 41): its sweep, the point it trains (setting -> value, what differs from the sweep's
    # base config), and why the sweep stopped or skipped it (a pruning rule's sentence; NULL: it ran its course).
    sweep_id: Mapped[int | None] = mapped_column(ForeignKey("sweeps.id"), index=True)
    sweep_point: Mapped[dict | None] = mapped_column(JSON)
    sweep_stop: Mapped[str | None] = mapped_column(Text)

    metrics: Mapped[list[Metric]] = owned_rows()
    metric_chunks: Mapped[list[MetricChunk]] = owned_rows()
    samples: Mapped[list[Sample]] = owned_rows()
    logs: Mapped[list[RunLog]] = owned_rows()
    evaluations: Mapped[list[Evaluation]] = owned_rows()

    def __repr__(self) -> str:
        return (
            f"Run(id={self.id}, name={self.name!r}, status={self.status}, step={self.current_step}/{self.total_steps})"
        )


class SweepState(enum.StrEnum):
    """A sweep is ``active`` while a member is queued or running, ``finished`` once every member has ended,
    ``stopped`` when a user stopped it (no member is asked or pruned until it is resumed)."""

    ACTIVE = "active"
    FINISHED = "finished"
    STOPPED = "stopped"


class Sweep(Base):
    """A search over settings (issue 41): its definition (trainer/config/sweep.py's SweepSpec as stored), the base
    config its members vary, the objective it ranks them by, and its state. Each member is a run whose
    ``sweep_id`` is this sweep's (storage/sweeps.py reads them)."""

    __tablename__ = "sweeps"
    # AUTOINCREMENT: a sweep's id is handed to users (grpo-studio sweeps --id, /sweeps), as a run's is
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = primary_key()
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = created_now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    definition: Mapped[dict] = mapped_column(JSON)
    base_config: Mapped[dict] = mapped_column(JSON)
    objective: Mapped[str] = mapped_column(String(200))
    direction: Mapped[str] = mapped_column(String(3))  # "max" or "min"
    state: Mapped[str] = mapped_column(String(16), default=SweepState.ACTIVE.value)


class Metric(RunRow, Base):
    """One logged scalar: ``key`` at ``step`` of ``run_id``, as TRL logged it."""

    __tablename__ = "metrics"
    # (run, key, step): one chart's series after a step, and unique: a key has one value per step (the writer upserts:
    # TRL's end-of-training log repeats ``epoch`` at the last step); (run, step): everything new since the last poll.
    __table_args__ = (
        Index("ix_metrics_run_key_step", "run_id", "key", "step", unique=True),
        Index("ix_metrics_run_step", "run_id", "step"),
    )

    step: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(200))
    # NULL stands for a non-finite value (NaN, inf): SQLite can't store NaN, and the dashboard must still see that
    # a value was logged at this step, so the worker keeps the text form in ``raw``.
    value: Mapped[float | None] = mapped_column(Float)
    raw: Mapped[str | None] = mapped_column(String(16))
    wall_time: Mapped[float] = mapped_column(Float)

    run: Mapped[Run] = relationship(back_populates="metrics")


CHUNK_STEPS = 100  # steps per MetricChunk: 10,000 steps x 40 keys read as 4,000 packed rows + at most 99 steps of rows


class MetricChunk(RunRow, Base):
    """A copy of one key's points over one block of steps, packed into one row: the first chart read of a long run
    reads 4,000 of these instead of 400,000 metric rows (see storage/series.py, which writes and reads them)."""

    __tablename__ = "metric_chunks"
    __table_args__ = (Index("ix_metric_chunks_run_step", "run_id", "first_step"),)

    first_step: Mapped[int] = mapped_column(Integer)  # a multiple of CHUNK_STEPS; the block is that many steps
    key: Mapped[str] = mapped_column(String(200))
    points: Mapped[bytes] = mapped_column(LargeBinary)  # little-endian float64 (step, value, wall_time) triples

    run: Mapped[Run] = relationship(back_populates="metric_chunks")


class Sample(RunRow, Base):
    """One sampled completion of a training step with its per-reward scores and group-relative advantage."""

    __tablename__ = "samples"
    __table_args__ = (Index("ix_samples_run_step", "run_id", "step"),)

    step: Mapped[int] = mapped_column(Integer)
    # Position of the completion's group within the step, so the dashboard can compare siblings.
    group_index: Mapped[int] = mapped_column(Integer, default=0)
    prompt: Mapped[str] = mapped_column(Text)
    completion: Mapped[str] = mapped_column(Text)
    rewards: Mapped[dict] = mapped_column(JSON)
    total_reward: Mapped[float | None] = mapped_column(Float)
    advantage: Mapped[float | None] = mapped_column(Float)
    reference_answer: Mapped[str | None] = mapped_column(Text)
    # A tool run's completion turn by turn (trainer.tools.turns: role, content, and a call's name and arguments);
    # None for a run without tools and for rows from before revision 0010, whose ``completion`` is all there is.
    turns: Mapped[list[dict] | None] = mapped_column(JSON)

    run: Mapped[Run] = relationship(back_populates="samples")


class RunLog(RunRow, Base):
    """A line of a run's log (status changes, warnings, the traceback of a failure)."""

    __tablename__ = "run_logs"
    # AUTOINCREMENT: a log line's id is a reader's cursor (/log's after_id), which must never point behind new lines
    __table_args__ = (Index("ix_run_logs_run_id", "run_id", "id"), {"sqlite_autoincrement": True})

    created_at: Mapped[datetime] = created_now()
    level: Mapped[str] = mapped_column(String(10), default="INFO")
    message: Mapped[str] = mapped_column(Text)

    run: Mapped[Run] = relationship(back_populates="logs")


class Evaluation(RunRow, Base):
    """A held-out evaluation of a run: base and tuned scored on the same K problems (results as JSON).

    Started from the dashboard it is a job, like a run: a detached process (``pid``) that writes its progress
    (``done`` of ``total`` answers generated) and then its results or its error here, so it outlives a dashboard
    restart and any dashboard shows where it is. Rows from before jobs existed read as completed.
    """

    __tablename__ = "evaluations"
    # AUTOINCREMENT: an evaluation id is handed to the user (/evaluate's answer), as a run's is
    __table_args__ = (Index("ix_evaluations_run_id", "run_id", "id"), {"sqlite_autoincrement": True})

    created_at: Mapped[datetime] = created_now()
    adapter: Mapped[str] = mapped_column(String(40))
    k: Mapped[int] = mapped_column(Integer)
    samples: Mapped[int] = mapped_column(Integer)
    # {"base": {"correct": .., "pass_at_1": .., "format": .., "mean_length": .., "rewards": {name: mean}}, "tuned": ..}
    # None until the job has finished.
    results: Mapped[dict | None] = mapped_column(JSON)
    status: Mapped[RunStatus] = status_column(RunStatus.COMPLETED, server_default=RunStatus.COMPLETED.value)
    done: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    total: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    pid: Mapped[int | None] = mapped_column(Integer)
    pid_started: Mapped[str | None] = mapped_column(String(32))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    run: Mapped[Run] = relationship(back_populates="evaluations")


# --- what the model is learning (issue 31): app/web/pages/learning.py reads these through storage/learning.py ----------
class HeldOutResult(RunRow, Base):
    """One held-out problem's greedy result at one periodic evaluation (trainer/evaluation/periodic_eval.py): the
    per-problem rows behind the ``heldout/correct`` metric of that step, for the learning map."""

    __tablename__ = "heldout_results"
    __table_args__ = (Index("ix_heldout_results_run_step", "run_id", "step"),)

    step: Mapped[int] = mapped_column(Integer)
    problem: Mapped[int] = mapped_column(Integer)  # position in the run's fixed held-out subset
    question: Mapped[str] = mapped_column(Text)
    correct: Mapped[float] = mapped_column(Float)  # 1.0 or 0.0


class SampleTokens(RunRow, Base):
    """Per-token values of one sampled completion, for a bounded number of completions per step
    (``RunConfig.token_samples_per_step``): each token's text, its log-probability and entropy under the policy that
    sampled it, and the reference's log-probability (the base: the adapter off), by the worker's own forward passes.

    The values are little-endian float16 (storage/learning.py packs them), two bytes a value, so 200
    tokens of three series cost 1.2 kB, a few per step. ``sample_index`` is the completion's position among its step's
    samples (the order :func:`storage.queries.samples_at` returns them in)."""

    __tablename__ = "sample_tokens"
    __table_args__ = (Index("ix_sample_tokens_run_step", "run_id", "step"),)

    step: Mapped[int] = mapped_column(Integer)
    sample_index: Mapped[int] = mapped_column(Integer)
    tokens: Mapped[list] = mapped_column(JSON)  # the text of each token, in order
    logprobs: Mapped[bytes] = mapped_column(LargeBinary)
    entropies: Mapped[bytes | None] = mapped_column(LargeBinary)
    ref_logprobs: Mapped[bytes | None] = mapped_column(LargeBinary)


class CurriculumStep(RunRow, Base):
    """What the curriculum (trainer/job/curriculum.py, ``RunConfig.curriculum``) decided for one step: the questions
    drawn, in order, and those skipped with the reason ("solved" or "never solved"); the run's data order, replayable."""

    __tablename__ = "curriculum_steps"
    __table_args__ = (Index("ix_curriculum_steps_run_step", "run_id", "step"),)

    step: Mapped[int] = mapped_column(Integer)
    drawn: Mapped[list] = mapped_column(JSON)
    skipped: Mapped[list] = mapped_column(JSON)  # [{"question": ..., "reason": ...}]
