"""Queries behind the "what the model is learning" views (issue 31): every sampled completion's score by prompt and
step, each group's spread and diversity, each held-out problem's result per evaluation, and the per-token values of
the completions the worker kept them for.

Reads return plain tuples and small frozen dataclasses, not ORM rows: the learning map of a long run reads every
sample row of it (bounded by the run's retention, ``keep_samples_every``), and the classifier
(trainer/insight/learning_map.py) is tested on literal rows of the same shape.

Token values are little-endian float16: two bytes a value, about three decimal digits, which is more than a
log-probability shown as a colour needs. Rows handed to the worker's writer carry them base64-encoded, because the
writer keeps rows it could not commit yet in a JSON-lines file (trainer/job/held_rows.py); :func:`add_token_rows`
decodes them.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from storage.models import CurriculumStep, HeldOutResult, Sample, SampleTokens


# --- packing --------------------------------------------------------------------------------------------------------
def pack_values(values: Sequence[float]) -> bytes:
    """``values`` as little-endian float16 (NaN stays NaN; values beyond float16's range become ±inf)."""
    clipped = [v if math.isnan(v) else max(-65504.0, min(65504.0, v)) for v in map(float, values)]
    return struct.pack(f"<{len(clipped)}e", *clipped)


def unpack_values(blob: bytes | None) -> list[float] | None:
    """The floats :func:`pack_values` packed (None stays None)."""
    if blob is None:
        return None
    return list(struct.unpack(f"<{len(blob) // 2}e", blob))


def token_row(
    run_id: int,
    step: int,
    sample_index: int,
    tokens: Sequence[str],
    logprobs: Sequence[float],
    entropies: Sequence[float] | None = None,
    ref_logprobs: Sequence[float] | None = None,
) -> dict[str, Any]:
    """A :class:`SampleTokens` row as the worker's writer holds it: JSON values only (blobs base64-encoded)."""

    def encoded(values: Sequence[float] | None) -> str | None:
        return None if values is None else base64.b64encode(pack_values(values)).decode("ascii")

    if len(logprobs) != len(tokens):
        raise ValueError(f"{len(tokens)} tokens but {len(logprobs)} log-probabilities")
    return {
        "run_id": run_id,
        "step": step,
        "sample_index": sample_index,
        "tokens": list(tokens),
        "logprobs": encoded(logprobs),
        "entropies": encoded(entropies),
        "ref_logprobs": encoded(ref_logprobs),
    }


def add_token_rows(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows made by :func:`token_row`."""
    if not rows:
        return
    blobs = ("logprobs", "entropies", "ref_logprobs")
    decoded = [{**row, **{k: None if row[k] is None else base64.b64decode(row[k]) for k in blobs}} for row in rows]
    session.execute(SampleTokens.__table__.insert(), decoded)


def add_heldout_rows(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert held-out results (dicts with the columns of :class:`HeldOutResult`), replacing those of the same run and
    step: a resumed run evaluates the checkpoint it starts from again (trainer/evaluation/periodic_eval.py), and each
    problem must count once per evaluation (the watch's noise reads the set's size off these rows)."""
    if rows:
        for run_id, step in sorted({(r["run_id"], r["step"]) for r in rows}):
            session.execute(delete(HeldOutResult).where(HeldOutResult.run_id == run_id, HeldOutResult.step == step))
        session.execute(HeldOutResult.__table__.insert(), list(rows))


def add_curriculum_rows(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert the curriculum's decisions (dicts with the columns of :class:`CurriculumStep`)."""
    if rows:
        session.execute(CurriculumStep.__table__.insert(), list(rows))


def curriculum_order(session: Session, run_id: int) -> list[tuple[int, list[str], list[dict[str, str]]]]:
    """(step, questions drawn, questions skipped with why) of every step the curriculum decided, in step order."""
    stmt = (
        select(CurriculumStep.step, CurriculumStep.drawn, CurriculumStep.skipped)
        .where(CurriculumStep.run_id == run_id)
        .order_by(CurriculumStep.step)
    )
    return [(step, list(drawn), list(skipped)) for step, drawn, skipped in session.execute(stmt).tuples()]


# --- reads ----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScoredSample:
    """One sampled completion's score, as the learning map reads it."""

    step: int
    group_index: int
    prompt: str
    rewards: dict[str, float | None]
    total_reward: float | None


def scored_samples(session: Session, run_id: int) -> list[ScoredSample]:
    """Every stored sample of a run without its completion text, in step order."""
    stmt = (
        select(Sample.step, Sample.group_index, Sample.prompt, Sample.rewards, Sample.total_reward)
        .where(Sample.run_id == run_id)
        .order_by(Sample.step, Sample.id)
    )
    return [ScoredSample(*row) for row in session.execute(stmt).tuples()]


def newest_steps(session: Session, run_id: int) -> tuple[int | None, int | None]:
    """The newest step with samples and the newest held-out evaluation of a run (None: none yet): two index reads,
    what a view of the learning map checks before it reads every sample again."""
    sampled = session.scalar(select(func.max(Sample.step)).where(Sample.run_id == run_id))
    evaluated = session.scalar(select(func.max(HeldOutResult.step)).where(HeldOutResult.run_id == run_id))
    return sampled, evaluated


@dataclass(frozen=True)
class GroupStats:
    """One group of one step: its size, how many different completions it holds, and its mean completion length in
    characters (the watch's diversity and length signals)."""

    step: int
    group_index: int
    size: int
    distinct: int
    mean_chars: float


def group_stats(session: Session, run_id: int) -> list[GroupStats]:
    """Size, distinct completions and mean length of every stored group of a run, in step order (one grouped scan)."""
    stmt = (
        select(
            Sample.step,
            Sample.group_index,
            func.count(),
            func.count(func.distinct(Sample.completion)),
            func.avg(func.length(Sample.completion)),
        )
        .where(Sample.run_id == run_id)
        .group_by(Sample.step, Sample.group_index)
        .order_by(Sample.step, Sample.group_index)
    )
    return [GroupStats(s, g, n, d, float(m or 0.0)) for s, g, n, d, m in session.execute(stmt).tuples()]


@dataclass(frozen=True)
class HeldOutPoint:
    """One held-out problem's greedy result at one evaluation."""

    step: int
    problem: int
    question: str
    correct: float


def heldout_points(session: Session, run_id: int) -> list[HeldOutPoint]:
    """Every per-problem held-out result of a run, by step then problem."""
    stmt = (
        select(HeldOutResult.step, HeldOutResult.problem, HeldOutResult.question, HeldOutResult.correct)
        .where(HeldOutResult.run_id == run_id)
        .order_by(HeldOutResult.step, HeldOutResult.problem)
    )
    return [HeldOutPoint(*row) for row in session.execute(stmt).tuples()]


def heldout_size(session: Session, run_id: int) -> int | None:
    """How many problems one held-out evaluation of a run scored (the most at any step), None without evaluations:
    the set size the watch's held-out noise is figured at."""
    per_step = (
        select(func.count().label("n")).where(HeldOutResult.run_id == run_id).group_by(HeldOutResult.step).subquery()
    )
    return session.execute(select(func.max(per_step.c.n))).scalar()


@dataclass(frozen=True)
class TokenValues:
    """The per-token values of one sampled completion (None where not computed)."""

    step: int
    sample_index: int
    tokens: list[str]
    logprobs: list[float]
    entropies: list[float] | None
    ref_logprobs: list[float] | None


def token_indices(session: Session, run_id: int, step: int) -> list[int]:
    """Positions among a step's samples whose token values are stored, ascending."""
    stmt = (
        select(SampleTokens.sample_index)
        .where(SampleTokens.run_id == run_id, SampleTokens.step == step)
        .order_by(SampleTokens.sample_index)
    )
    return list(session.scalars(stmt))


def token_values(session: Session, run_id: int, step: int, sample_index: int) -> TokenValues | None:
    """The token values of the ``sample_index``-th sample of ``step``, or None when none were kept for it."""
    stmt = select(SampleTokens).where(
        SampleTokens.run_id == run_id, SampleTokens.step == step, SampleTokens.sample_index == sample_index
    )
    row = session.scalars(stmt.limit(1)).first()
    if row is None:
        return None
    return TokenValues(
        row.step,
        row.sample_index,
        list(row.tokens),
        unpack_values(row.logprobs),
        unpack_values(row.entropies),
        unpack_values(row.ref_logprobs),
    )
