"""A stop is a stop in every phase of a run (issue 36, item 3): queued, starting, loading, stepping, saving and
evaluating all end ``stopped``, never ``failed``.

The worker's own phases are reached in this process by the worker's entry point (``run_worker``), with the stop
asked from inside the phase (a patched step of it sets the stop request, as SIGTERM's handler would): a signal timed
from outside would land in a phase only by luck. Start-up is the one phase that needs a real process: a stop sent
while Python is still importing the worker. Stepping is tests/runs/test_signals.py's SIGTERM at step 3.
"""

from __future__ import annotations

import pytest

from app import actions
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, run_row, tiny_config, wait_for
from trainer.job import worker
from trainer.job.stop import StopRequest
from trainer.supervise.schedule import reconcile
from trainer.supervise.start import start_worker
from trainer.supervise.workers import is_alive

TERMINAL = ("completed", "failed", "stopped")


def test_a_queued_run_without_a_worker_is_stopped_at_once():
    run_id = create_run(tiny_config(name="queued"))
    assert actions.stop(run_id) is False  # no worker to signal
    run = run_row(run_id)
    assert run.status == "stopped" and run.error is None


def test_a_dead_worker_after_a_stop_is_reconciled_as_stopped_and_one_without_as_failed(tmp_path):
    """The scheduler's reconcile reads the log: a stop asked of the latest worker makes its death a stop; the stop of
    an earlier worker (before a resume) does not."""
    asked, crashed = (create_run(tiny_config(name=n)) for n in ("asked", "crashed"))
    with get_sessionmaker().begin() as s:
        for run_id, lines in (
            (asked, ["worker started (pid 1)", "stop requested"]),
            (crashed, ["worker started (pid 1)", "stop requested", "worker started (pid 2)"]),
        ):
            run = queries.get_run(s, run_id)
            queries.worker_launched(s, run, 2**22 + 7, "0", str(tmp_path))  # a pid no process has
            for line in lines:
                queries.add_log(s, run_id, line)
    with get_sessionmaker().begin() as s:
        assert reconcile(s) == [crashed]
    assert run_row(asked).status == "stopped" and "before the first step" in run_row(asked).error
    assert run_row(crashed).status == "failed" and run_row(crashed).error.startswith("worker exited unexpectedly")


@pytest.mark.slow
def test_a_stop_while_the_worker_process_starts_ends_it_stopped(tiny_model_path):
    """Two real workers, stopped the moment they were started and half a second later: both in Python's start-up or
    the worker's imports (3-4 s here), where SIGTERM used to kill the process and the run read "worker exited
    unexpectedly"."""
    import time

    runs = []
    for delay in (0.0, 0.5):
        run_id = create_run(tiny_config(name=f"start-{delay}"))
        with get_sessionmaker().begin() as s:
            start_worker(s, queries.get_run(s, run_id))
        time.sleep(delay)
        assert actions.stop(run_id) is True
        runs.append(run_id)

    def ended() -> bool:
        with get_sessionmaker().begin() as s:
            reconcile(s)  # the scheduler's tick: a worker killed before its handler was in place
        return all(run_row(r).status in TERMINAL and not is_alive(run_row(r)) for r in runs)

    wait_for(ended, 120, "both workers to end")
    for run_id in runs:
        run = run_row(run_id)
        assert run.status == "stopped", (run.status, run.error)
        assert run.current_step == 0


def _train_stopping_in(monkeypatch, phase_patch, **overrides):
    """Run the worker in this process on a fresh run, with ``phase_patch(stop)`` arranging for the stop to be asked
    inside one phase; returns the run row."""
    stop = StopRequest()
    phase_patch(stop)
    run_id = create_run(tiny_config(name="phase", **overrides))
    status = worker.run_worker(run_id, stop=stop)
    assert stop.requested, "the phase was never reached"
    run = run_row(run_id)
    assert status.value == run.status == "stopped", (run.status, run.error)
    return run


@pytest.mark.slow
def test_a_stop_while_the_model_loads_ends_it_stopped_before_any_step(monkeypatch, tiny_model_path):
    original = worker.build_trainer

    def patch(stop):
        def loading(*args, **kwargs):
            stop.event.set()
            return original(*args, **kwargs)

        monkeypatch.setattr(worker, "build_trainer", loading)

    run = _train_stopping_in(monkeypatch, patch)
    assert run.current_step == 0 and run.error is None


@pytest.mark.slow
def test_a_stop_while_the_final_adapter_is_saved_ends_it_stopped_with_the_adapter(monkeypatch, tiny_model_path):
    """All steps done, the adapter being written: the stop still ends the run stopped (it used to say completed,
    as if the stop had been ignored); the adapter is whole."""
    from pathlib import Path

    from trl import GRPOTrainer

    from trainer.supervise.run_files import RunFiles

    original = GRPOTrainer.save_model

    def patch(stop):
        def saving(self, output_dir=None, *args, **kwargs):
            if output_dir and Path(output_dir).name == "adapter":
                stop.event.set()
            return original(self, output_dir, *args, **kwargs)

        monkeypatch.setattr(GRPOTrainer, "save_model", saving)

    run = _train_stopping_in(monkeypatch, patch, max_steps=1, save_steps=100)
    assert run.current_step == 1
    assert (RunFiles(Path(run.output_dir)).adapter / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_a_stop_during_the_first_heldout_evaluation_ends_it_stopped_after_one_step(monkeypatch, tiny_model_path):
    """The step-0 held-out evaluation (the base model, before any update) is where a stop lands first on a run with
    ``eval_steps``: the run stops at the next step boundary, one step in, with the evaluation stored."""
    from trainer.evaluation import periodic_eval

    original = periodic_eval.heldout_metrics

    def patch(stop):
        def evaluating(*args, **kwargs):
            stop.event.set()
            return original(*args, **kwargs)

        monkeypatch.setattr(periodic_eval, "heldout_metrics", evaluating)

    run = _train_stopping_in(monkeypatch, patch, max_steps=4, eval_steps=2)
    assert run.current_step == 1
    with get_sessionmaker().begin() as s:
        assert [p.step for p in queries.metric_series(s, run.id, "heldout/correct")][:1] == [0]
