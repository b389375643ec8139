"""Stopping, crashing and resuming: SIGTERM → stopped with an adapter; SIGKILL → reconcile marks failed, metrics kept;
resume continues from the checkpoint with step numbers continuing."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, run_row, start_run, tiny_config, wait_for
from trainer.supervise.run_files import RunFiles
from trainer.supervise.schedule import reconcile
from trainer.supervise.start import start_worker
from trainer.supervise.workers import is_alive

pytestmark = pytest.mark.slow

TERMINAL = ("completed", "failed", "stopped")


_launch = start_run  # insert the run and start its worker as the dashboard does


def _steps(run_id: int, key: str = "reward") -> list[int]:
    with get_sessionmaker().begin() as s:
        return [p.step for p in queries.metric_series(s, run_id, key)]


def _resume(run_id: int, max_steps: int) -> None:
    """Resume a stopped/failed run to ``max_steps`` (shortened from 400 so the test doesn't train that long; the
    resumed worker reads its config from the row)."""
    wait_for(lambda: not is_alive(run_row(run_id)), 60, "the previous worker to exit")
    with get_sessionmaker().begin() as s:
        row = queries.get_run(s, run_id)
        row.config = {**row.config, "max_steps": max_steps}
    with get_sessionmaker().begin() as s:
        start_worker(s, queries.get_run(s, run_id))
    wait_for(lambda: run_row(run_id).status in TERMINAL, 300, "the resumed run to end")


def test_sigterm_stops_at_a_step_boundary_saves_adapter_and_resume_continues(tiny_model_path):
    # many steps, so the run is still going when the signal arrives
    run_id = _launch(tiny_config(name="sigterm", max_steps=400, save_steps=1000))
    wait_for(lambda: run_row(run_id).current_step >= 3, 300, "three steps")
    os.kill(run_row(run_id).pid, signal.SIGTERM)
    wait_for(lambda: run_row(run_id).status in TERMINAL, 120, "the stop")
    run = run_row(run_id)
    assert run.status == "stopped" and run.error is None
    files = RunFiles(Path(run.output_dir))
    assert (files.adapter / "adapter_model.safetensors").is_file()
    checkpoint = files.latest_checkpoint()
    stopped_at = int(checkpoint.name.split("-")[1])
    assert 3 <= stopped_at < 400 and run.current_step == stopped_at
    assert _steps(run_id) == list(range(1, stopped_at + 1))

    _resume(run_id, max_steps=stopped_at + 3)
    run = run_row(run_id)
    assert run.status == "completed", run.error
    assert _steps(run_id) == list(range(1, stopped_at + 4))  # continues, doesn't restart at 1
    with get_sessionmaker().begin() as s:
        assert queries.sample_steps(s, run_id)[-1] == stopped_at + 3


def test_sigkill_is_reconciled_as_failed_and_keeps_metrics_then_resumes(tiny_model_path):
    run_id = _launch(tiny_config(name="sigkill", max_steps=400, save_steps=2))
    wait_for(lambda: len(_steps(run_id)) >= 5, 300, "five logged steps")
    os.kill(run_row(run_id).pid, signal.SIGKILL)
    wait_for(lambda: not is_alive(run_row(run_id)), 30, "the process to die")
    logged = _steps(run_id)
    with get_sessionmaker().begin() as s:
        assert reconcile(s) == [run_id]
    run = run_row(run_id)
    assert run.status == "failed" and run.error.startswith("worker exited unexpectedly")
    assert _steps(run_id) == logged and logged[:5] == [1, 2, 3, 4, 5]  # nothing logged before the kill is lost

    checkpoint_step = int(RunFiles(Path(run.output_dir)).latest_checkpoint().name.split("-")[1])
    _resume(run_id, max_steps=checkpoint_step + 2)
    run = run_row(run_id)
    assert run.status == "completed", run.error
    # steps after the checkpoint were redone once, not duplicated
    assert _steps(run_id) == list(range(1, checkpoint_step + 3))


def test_reconcile_leaves_live_and_waiting_runs_alone(tiny_model_path):
    waiting = create_run(tiny_config(name="waiting"))
    with get_sessionmaker().begin() as s:
        assert waiting not in reconcile(s)
    assert run_row(waiting).status == "queued"


def test_a_half_written_checkpoint_is_not_resumed_from(tmp_path):
    files = RunFiles(tmp_path)
    for step, complete in ((2, True), (4, True), (6, False)):
        d = files.checkpoints / f"checkpoint-{step}"
        d.mkdir(parents=True)
        if complete:
            (d / "trainer_state.json").write_text("{}")
    assert files.latest_checkpoint().name == "checkpoint-4"
    assert files.prune_partial_checkpoints() == ["checkpoint-6"]
    assert not (files.checkpoints / "checkpoint-6").exists()
