"""A sweep end to end on the built-in model (issue 41): ``grpo-studio sweep`` with a 2 x 2 grid probes every point
(real probe children), skips the two the probe finds wasted with its reason stored, trains the other two one after
another under the concurrency limit (real detached workers, started by the scheduler's pass), and prints the
table with the best member marked."""

from __future__ import annotations

import pytest

from app import actions
from app.cli.main import main
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import tiny_config


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_2x2_grid_from_the_cli_skips_the_wasted_points_and_trains_the_others(tiny_model_path, tmp_path, capsys):
    # top_p 0.01 keeps only the likeliest token: every answer of a group is the same, so the probe says "wasted"
    config = tmp_path / "grid.json"
    tiny_config(name="e2e", max_steps=4, eval_steps=2, save_steps=4).save(config)
    assert main(["sweep", str(config), "--grid", "top_p=1.0,0.01 learning_rate=1e-5,5e-3"]) == 0
    out = capsys.readouterr().out
    table = actions.sweep_detail(1)
    assert [r.point for r in table.rows] == [
        {"top_p": 1.0, "learning_rate": 1e-5},
        {"top_p": 1.0, "learning_rate": 5e-3},
        {"top_p": 0.01, "learning_rate": 1e-5},
        {"top_p": 0.01, "learning_rate": 5e-3},
    ]
    assert [r.status for r in table.rows] == ["completed", "completed", "stopped", "stopped"]
    for row in table.rows[2:]:
        assert row.stop_reason.startswith("skipped before training: the probe says the run would learn nothing (")
        assert "of groups have identical rewards" in row.stop_reason and row.step == 0
    trained = table.rows[:2]
    assert all(r.objective_now is not None and 0 <= r.objective_now <= 1 for r in trained)
    # a step size that barely moves the adapter and one that does: the two learn apart, so "best" is not a tie
    assert trained[0].objective_now != trained[1].objective_now, [r.objective_now for r in trained]
    best = max(trained, key=lambda r: r.objective_now)
    assert [r.best for r in table.rows] == [r is best for r in table.rows]
    assert table.summary.state == "finished" and table.summary.best_run_id == best.run_id
    with get_sessionmaker().begin() as s:
        first, second = (queries.get_run(s, r.run_id) for r in trained)
        assert second.started_at >= first.finished_at  # one at a time: the concurrency limit of any run
        assert [line.message for line in queries.log_tail(s, table.rows[2].run_id)][0].startswith("sweep: skipped")
    assert f"best: run {best.run_id}" in out
