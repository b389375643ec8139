"""The trackers of ``report_to`` keep their files under the run's directory and stay off the network unless the
operator said otherwise (issue 35 item 3). trackio is installed here and is run for real; W&B, TensorBoard and MLflow
may not be, so the settings passed are checked against what transformers' integrations read."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.job.trackers import place_trackers, tracker_environment

ROOT = Path(__file__).resolve().parents[2]


def test_each_tracker_writes_under_the_run_and_wandb_stays_offline(tmp_path):
    run = tmp_path / "runs" / "6-abcd"
    env = tracker_environment(["trackio", "wandb", "mlflow", "tensorboard"], run, {})
    assert env == {
        "TRACKIO_DIR": str(run / "trackers" / "trackio"),
        "WANDB_DIR": str(run / "trackers"),
        "WANDB_MODE": "offline",
        "MLFLOW_TRACKING_URI": (run / "trackers" / "mlruns").resolve().as_uri(),
        "TENSORBOARD_LOGGING_DIR": str(run / "trackers" / "tensorboard"),
    }
    assert tracker_environment([], run, {}) == {}


def test_the_operators_own_settings_stand(tmp_path):
    operator = {"TRACKIO_DIR": "/srv/trackio", "WANDB_MODE": "online", "MLFLOW_TRACKING_URI": "http://mlflow:5000"}
    env = tracker_environment(["trackio", "wandb", "mlflow"], tmp_path, operator)
    assert env == {"WANDB_DIR": str(tmp_path / "trackers")}


def test_the_settings_are_the_ones_transformers_reads():
    """The variables by the names transformers' integrations read them: the W&B, MLflow and TensorBoard callbacks'
    os.getenv calls (W&B reads WANDB_DIR itself, wandb/sdk/wandb_settings.py)."""
    from transformers.integrations import integration_utils

    source = inspect.getsource(integration_utils)
    for name in ("MLFLOW_TRACKING_URI", "WANDB_MODE", "TENSORBOARD_LOGGING_DIR"):
        assert f'os.getenv("{name}"' in source, name


@pytest.mark.slow
def test_trackio_writes_its_database_under_the_run_and_nothing_in_the_users_cache(tmp_path):
    pytest.importorskip("trackio")
    run, home = tmp_path / "runs" / "6-abcd", tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKIO_", "HF_", "SPACE_ID"))}
    env |= {"HOME": str(home), "HF_HOME": str(home / ".cache" / "huggingface"), "PYTHONPATH": str(ROOT)}
    placed = place_trackers(["trackio"], run, env)
    assert placed == [f"TRACKIO_DIR={run / 'trackers' / 'trackio'}"]
    script = (
        "import trackio; trackio.init(project='grpo-studio', name='run 6', embed=False);"
        "trackio.log({'reward': 0.5}); trackio.finish()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (run / "trackers" / "trackio" / "grpo-studio.db").is_file()
    assert not (home / ".cache" / "huggingface" / "trackio").exists()
    assert {p.name for p in tmp_path.iterdir()} <= {"home", "runs"}  # nothing in the working directory
