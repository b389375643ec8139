"""Multi-process training, proven on CPU with 2 processes (torchrun + gloo; on GPUs the launcher is
accelerate launch): one run, data-parallel, only the main process writing to the database; a stop reaches every
process and they end at the same step."""

from __future__ import annotations

import pytest

from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, run_row, tiny_config, wait_for
from trainer.supervise.start import start_worker
from trainer.supervise.stop import stop_worker
from trainer.supervise.workers import is_alive

pytestmark = pytest.mark.slow


def _launch(**overrides) -> int:
    run_id = create_run(tiny_config(num_processes=2, **overrides))
    with get_sessionmaker().begin() as s:
        start_worker(s, queries.get_run(s, run_id))
    return run_id


def test_two_processes_train_one_run_and_only_the_main_one_writes(tiny_model_path):
    run_id = _launch(name="two-procs", max_steps=3)
    wait_for(lambda: run_row(run_id).status in ("completed", "failed", "stopped"), 300, "the run to end")
    run = run_row(run_id)
    assert run.status == "completed", run.error
    with get_sessionmaker().begin() as s:
        assert [p.step for p in queries.metric_series(s, run_id, "reward")] == [1, 2, 3]  # once, not once per process
        # 2 processes x 8 completions per step, gathered by TRL into one table
        assert len(queries.samples_at(s, run_id, 3)) == 16
        logs = [line.message for line in queries.log_tail(s, run_id, 100)]
    assert sum(m.startswith("model path:") for m in logs) == 1
    with open(f"{run.output_dir}/worker.log") as f:
        assert f.read().count("model path:") == 2  # but both processes did train


def test_a_stop_reaches_every_process(tiny_model_path):
    run_id = _launch(name="two-procs-stop", max_steps=400, save_steps=1000)
    wait_for(lambda: run_row(run_id).current_step >= 3, 300, "three steps")
    with get_sessionmaker().begin() as s:
        assert stop_worker(s, queries.get_run(s, run_id))
    wait_for(lambda: run_row(run_id).status == "stopped", 120, "the stop")
    wait_for(lambda: not is_alive(run_row(run_id)), 60, "every process to exit")
    assert run_row(run_id).current_step < 400
