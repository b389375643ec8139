"""Held-out evaluation as a job: a row in ``evaluations`` plus a detached process, like a training run.

Evaluating 200 problems with sampled pass@1 takes a minute or more. Run inside a dashboard request it sat behind a
bare spinner, held a Gradio worker, and was lost when the dashboard restarted. As a job:

- :func:`start_evaluation` (dashboard process, torch-free) checks what it can up front — the run, the adapter, a
  held-out split — so bad input is refused before anything starts; then it writes a row (status ``queued``) and
  starts ``python -m trainer.evaluation.eval_job ID`` in its own session (trainer.supervise.start.spawn_detached), output
  to ``eval-ID.log`` in the run directory.
- the job process first waits its turn (:func:`wait_turn`): runs and evaluation jobs share one limit, the
  dashboard's ``--max-concurrent-runs`` (trainer.supervise.schedule.slots, default 1), over every dashboard of the
  database, evaluations first come first served among themselves (six requests at once used to load six models,
  with no end, and five evaluations ran beside a training run: issue 58.6). Waiting costs a sleeping Python process and no model; the queue is the rows themselves, so
  it survives a dashboard restart and every dashboard shows who waits behind whom (:func:`queued_behind`).
- then it loads the model, writes ``done``/``total`` answers as it goes (at most about once a second), and ends the
  row completed with its results, or failed with the error; SIGTERM ends it as stopped (queued or running); past
  ``GRPO_STUDIO_EVAL_TIMEOUT_S`` of running it ends as failed, and the run's log says so.
- :func:`evaluation_state` reads the row for a dashboard, and marks a job whose process has gone without a word
  (killed, out of memory) as failed, so no row stays ``queued`` or ``running`` forever.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from storage import queries
from storage.db import get_sessionmaker
from storage.models import Evaluation, RunStatus
from trainer.evaluation.run_lookup import run_adapter
from trainer.supervise import workers
from trainer.supervise.processes import pid_alive, process_start_time
from trainer.supervise.schedule import SLOTS_VARIABLE, slots
from trainer.supervise.start import spawn_detached

PROGRESS_INTERVAL = 1.0  # seconds between progress writes
QUEUE_POLL_S = 1.0  # seconds between two looks of a queued job at the queue: one small read each
START_GRACE_S = 120.0  # a row may wait this long for its process to be recorded (spawning takes well under a second)
# A job that runs (queueing not counted) longer than this ends as failed, and the run's log says so (the operator may change it).
TIMEOUT_VARIABLE = "GRPO_STUDIO_EVAL_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 3 * 3600


class EvaluationTimeout(BaseException):
    """Raised in the job's process by its alarm: the job ran past its time limit. A BaseException, as
    KeyboardInterrupt is, so that no ``except Exception`` in the model code it interrupts swallows it."""


def timeout_s() -> int:
    """The operator's ``GRPO_STUDIO_EVAL_TIMEOUT_S`` (at least 1), else :data:`DEFAULT_TIMEOUT_S`."""
    value = os.environ.get(TIMEOUT_VARIABLE, "")
    return max(1, int(value)) if value.strip().isdigit() else DEFAULT_TIMEOUT_S


def _alive(row: Evaluation) -> bool:
    """A job whose process is gone holds no place (evaluation_state marks it failed when it is next read); one still
    being started (no process recorded yet) holds one, for :data:`START_GRACE_S` (a starter killed between writing
    the row and starting the process must not block the queue for good)."""
    if row.pid:
        return pid_alive(row.pid, row.pid_started)
    created = row.created_at.replace(tzinfo=row.created_at.tzinfo or UTC) if row.created_at else None
    return created is None or (datetime.now(UTC) - created).total_seconds() < START_GRACE_S


def ahead_of(session, evaluation: Evaluation) -> list[Evaluation]:
    """The live jobs ``evaluation`` waits for: every running one, and the queued ones that came before it."""
    return [
        row
        for row in queries.live_evaluations(session)
        if row.id != evaluation.id and _alive(row) and (row.status == RunStatus.RUNNING or row.id < evaluation.id)
    ]


def queued_behind(session, evaluation: Evaluation) -> str | None:
    """Why ``evaluation`` may not run yet, in words ("queued behind evaluation 4 of run 1 …", "queued behind run 3
    (training) …"), or None when its turn has come. Every queued evaluation that came first counts, running or not
    (first come, first served), and so does every run that trains (one limit: trainer.supervise.schedule)."""
    ahead = ahead_of(session, evaluation)
    training = workers.active_runs(session)
    limit = slots()
    if len(ahead) + len(training) < limit:
        return None
    first = f"evaluation {ahead[0].id} of run {ahead[0].run_id} ({ahead[0].status})" if ahead else ""
    if not ahead:
        first = f"run {training[0].id} (training)"
    more = len(ahead) + len(training) - 1
    others = f" and {more} more" if more else ""
    return f"queued behind {first}{others}: {limit} at a time, runs and evaluations together ({SLOTS_VARIABLE})"


def start_evaluation(run_id: int, adapter: str, k: int, samples: int) -> int:
    """Check the request, record the job as queued and start its process, which runs when its turn comes; returns
    the evaluation's id. Raises RunLookupError / EvaluationError (from trainer.evaluation) with a clear message when
    it can't be done: the caller has checked the ranges (app.actions.arguments)."""
    from trainer.evaluation.evaluate import EvaluationError, heldout_problems

    if k < 1 or samples < 0:
        raise EvaluationError(f"K must be at least 1 and samples at least 0 (got K {k}, samples {samples})")
    config, _ = run_adapter(run_id, adapter)
    problems = heldout_problems(config, k)
    with get_sessionmaker().begin() as session:
        evaluation = queries.add_evaluation(session, run_id, adapter, len(problems), samples, status=RunStatus.QUEUED)
        session.flush()
        queries.evaluation_progress(session, evaluation.id, 0, 2 * len(problems) * (1 + samples))
        root = Path(queries.get_run(session, run_id).output_dir)
        evaluation_id = evaluation.id
    try:
        process = spawn_detached(
            [sys.executable, "-m", "trainer.evaluation.eval_job", str(evaluation_id)],
            root / f"eval-{evaluation_id}.log",
            root,
        )
    except OSError as exc:  # a row left queued with no process would hold its place for good
        _finish(evaluation_id, RunStatus.FAILED, error=f"the evaluation process could not start: {exc}")
        raise EvaluationError(f"the evaluation process could not start: {exc.strerror or exc}") from None
    with get_sessionmaker().begin() as session:
        evaluation = queries.get_evaluation(session, evaluation_id)
        queries.evaluation_started(session, evaluation, process.pid, process_start_time(process.pid))
    return evaluation_id


def wait_turn(evaluation_id: int, poll_s: float | None = None) -> bool:
    """Wait (in the job's process) until the job may run, then mark it running; True then, False when its row
    ended meanwhile (stopped, or marked failed by a dashboard). A row already running (the job's body called by
    hand) has its turn."""
    while True:
        with get_sessionmaker().begin() as session:
            # one job decides at a time, and not while the scheduler counts: no two take the last slot
            queries.lock_scheduling(session)
            queries.lock_evaluation_queue(session)
            row = queries.get_evaluation(session, evaluation_id)
            if row is None or row.status.terminal:
                return False
            if row.status == RunStatus.RUNNING:
                return True
            if queued_behind(session, row) is None:
                queries.evaluation_takes_turn(session, row)
                return True
        time.sleep(QUEUE_POLL_S if poll_s is None else poll_s)


def run_evaluation(evaluation_id: int) -> RunStatus:
    """The job's body (in its own process): wait for its turn, evaluate as the row asks, then end the row."""
    with get_sessionmaker().begin() as session:
        row = queries.get_evaluation(session, evaluation_id)
        if row is None:
            raise SystemExit(f"no evaluation with id {evaluation_id}")
        run_id, adapter, k, samples = row.run_id, row.adapter, row.k, row.samples
    try:
        if not wait_turn(evaluation_id):
            return _status(evaluation_id)
    except KeyboardInterrupt:
        return _finish(evaluation_id, RunStatus.STOPPED, error="stopped while queued")
    # torch is imported only now: a queued job is a sleeping Python process and nothing more
    from trainer.evaluation.compare import CACHE
    from trainer.evaluation.evaluate import evaluate_run
    from trainer.supervise.gpu_lease import default_wait

    # A job in its own process: on a GPU it waits for the GPU's lease as a worker does (trainer.supervise.gpu_lease).
    CACHE.lease_what, CACHE.lease_wait_s = f"evaluation {evaluation_id} of run {run_id}", default_wait()
    last = 0.0

    def on_answers(done: int, total: int) -> None:
        nonlocal last
        if time.monotonic() - last >= PROGRESS_INTERVAL or done == total:
            last = time.monotonic()
            with get_sessionmaker().begin() as session:
                queries.evaluation_progress(session, evaluation_id, done, total)

    limit = timeout_s()
    try:
        with time_limit(limit):
            results = evaluate_run(run_id, k, samples, adapter, on_answers=on_answers, store=False)
    except KeyboardInterrupt:
        return _finish(evaluation_id, RunStatus.STOPPED, error="stopped before it finished")
    except EvaluationTimeout:
        error = f"evaluation {evaluation_id} timed out after {limit} s ({TIMEOUT_VARIABLE}) and was stopped"
        with get_sessionmaker().begin() as session:
            queries.add_log(session, run_id, error, level="WARNING")
        return _finish(evaluation_id, RunStatus.FAILED, error=error)
    except Exception as exc:  # noqa: BLE001 - every failure ends the row, with its reason
        traceback.print_exc()
        return _finish(evaluation_id, RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
    return _finish(evaluation_id, RunStatus.COMPLETED, results=results)


def _finish(evaluation_id: int, status: RunStatus, results: dict | None = None, error: str | None = None) -> RunStatus:
    with get_sessionmaker().begin() as session:
        queries.finish_evaluation(session, queries.get_evaluation(session, evaluation_id), status, results, error)
    return status


def _status(evaluation_id: int) -> RunStatus:
    """The row's status; a row deleted with its run while the job waited reads as stopped."""
    with get_sessionmaker().begin() as session:
        row = queries.get_evaluation(session, evaluation_id)
        return row.status if row is not None else RunStatus.STOPPED


def evaluation_state(run_id: int) -> Evaluation | None:
    """The run's newest evaluation, detached from its session; a job whose process has died without ending its row
    is marked failed first."""
    with get_sessionmaker().begin() as session:
        row = queries.latest_evaluation(session, run_id)
        if row is not None and not row.status.terminal and not _alive(row):
            queries.finish_evaluation(
                session, row, RunStatus.FAILED, error="the evaluation process ended without a result (killed?)"
            )
        if row is not None:
            session.flush()
            session.expunge(row)
        return row


def queue_state(evaluation_id: int) -> str | None:
    """What a queued evaluation waits for, in words (:func:`queued_behind`); None when it is not queued or its turn
    has come (its process is about to take it)."""
    with get_sessionmaker().begin() as session:
        row = queries.get_evaluation(session, evaluation_id)
        if row is None or row.status != RunStatus.QUEUED:
            return None
        return queued_behind(session, row)


def stop_evaluation(run_id: int) -> bool:
    """Ask the run's queued or running evaluation job to stop (SIGTERM); True if one was signalled."""
    row = evaluation_state(run_id)
    if row is None or row.status.terminal or not row.pid:
        return False
    os.killpg(row.pid, signal.SIGTERM)
    return True


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise :class:`EvaluationTimeout` in this (main) thread after ``seconds``: the job's own alarm, so a job that
    hangs or was asked for too much ends, with its row and the run's log saying why."""

    def expired(_signum, _frame):
        raise EvaluationTimeout

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: list[str] | None = None) -> int:
    """``python -m trainer.evaluation.eval_job EVALUATION_ID``."""
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM → KeyboardInterrupt → ends as stopped
    status = run_evaluation(int(args[0]))
    return 0 if status == RunStatus.COMPLETED else 1


if __name__ == "__main__":
    raise SystemExit(main())
