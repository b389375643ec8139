"""Held-out evaluation as a job (issue 12): a row plus a detached process that outlives whoever started it, with its
progress in the database, its result equal to an in-process evaluation, and a terminal status however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from storage import queries
from storage.db import get_sessionmaker
from storage.models import RunStatus
from tests.conftest import ROOT
from tests.helpers import wait_for


def _row(evaluation_id: int):
    with get_sessionmaker().begin() as s:
        row = queries.get_evaluation(s, evaluation_id)
        s.expunge(row)
        return row


def _start_from_a_process_that_exits(run_id: int, k: int, samples: int) -> tuple[int, int]:
    """Start the job from a child process that then exits at once: the dashboard that started it is gone. Returns
    the evaluation's id and the starter's pid."""
    code = (
        "import os; from trainer.evaluation.eval_job import start_evaluation; "
        f"print(start_evaluation({run_id}, 'final', {k}, {samples}), os.getpid())"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    evaluation_id, starter = out.stdout.strip().splitlines()[-1].split()
    return int(evaluation_id), int(starter)


@pytest.mark.slow
def test_a_job_outlives_its_starter_and_scores_what_evaluate_run_scores(trained_run):
    from trainer.evaluation.eval_job import evaluation_state
    from trainer.evaluation.evaluate import evaluate_run

    run_id = trained_run[0]
    evaluation_id, starter = _start_from_a_process_that_exits(run_id, k=8, samples=1)
    starter_gone = datetime.now(UTC)
    assert _row(evaluation_id).pid not in (None, starter, os.getpid())  # its own process, recorded
    wait_for(
        lambda: _row(evaluation_id).status.terminal, 300, "the evaluation job to end"
    )  # queued, running, then ended
    row = _row(evaluation_id)
    assert row.status == RunStatus.COMPLETED and row.error is None and row.finished_at is not None
    # it outlived its starter: the row was ended after the process that started the job had exited
    assert row.finished_at.replace(tzinfo=row.finished_at.tzinfo or UTC) > starter_gone
    assert row.done == row.total == 2 * 8 * (1 + 1)  # base and tuned, a greedy and a sampled answer per problem
    assert row.results == evaluate_run(run_id, k=8, samples=1, store=False)  # same problems, seeds, numbers
    assert evaluation_state(run_id).id == evaluation_id


@pytest.mark.slow
def test_progress_is_written_as_answers_are_generated(trained_run, monkeypatch):
    from trainer.evaluation import eval_job

    run_id = trained_run[0]
    with get_sessionmaker().begin() as s:
        evaluation_id = queries.add_evaluation(s, run_id, "final", 70, 0, status=RunStatus.RUNNING).id
    seen = []
    write = queries.evaluation_progress
    monkeypatch.setattr(eval_job, "PROGRESS_INTERVAL", 0.0)
    monkeypatch.setattr(
        queries, "evaluation_progress", lambda s, i, done, total: seen.append(done) or write(s, i, done, total)
    )
    assert eval_job.run_evaluation(evaluation_id) == RunStatus.COMPLETED
    assert seen == [64, 70, 134, 140]  # batches of 64 answers: base, then tuned
    assert _row(evaluation_id).done == _row(evaluation_id).total == 140


@pytest.mark.slow
def test_a_killed_job_ends_failed_and_a_stopped_one_stopped(trained_run):
    from trainer.evaluation.eval_job import evaluation_state, start_evaluation, stop_evaluation

    run_id = trained_run[0]
    killed = start_evaluation(run_id, "final", 200, 4)
    os.killpg(_row(killed).pid, signal.SIGKILL)
    wait_for(lambda: evaluation_state(run_id).status == RunStatus.FAILED, 30, "the dead job to be noticed")
    assert "ended without a result" in _row(killed).error

    stopped = start_evaluation(run_id, "final", 200, 4)
    wait_for(lambda: _row(stopped).done > 0, 300, "the job to generate answers")
    assert stop_evaluation(run_id)
    wait_for(lambda: _row(stopped).status.terminal, 60, "the job to stop")
    assert _row(stopped).status == RunStatus.STOPPED and _row(stopped).results is None


@pytest.mark.slow
def test_bad_requests_are_refused_before_anything_starts(trained_run):
    from trainer.evaluation.eval_job import start_evaluation
    from trainer.evaluation.evaluate import EvaluationError
    from trainer.evaluation.run_lookup import RunLookupError

    run_id = trained_run[0]
    with get_sessionmaker().begin() as s:
        before = len(queries.get_run(s, run_id).evaluations)
    with pytest.raises(RunLookupError, match="no adapter 'step 99'"):
        start_evaluation(run_id, "step 99", 10, 0)
    with pytest.raises(EvaluationError, match="K must be at least 1"):
        start_evaluation(run_id, "final", 0, 0)
    with pytest.raises(RunLookupError, match="no run with id 999999"):
        start_evaluation(999999, "final", 10, 0)
    with get_sessionmaker().begin() as s:
        assert len(queries.get_run(s, run_id).evaluations) == before
