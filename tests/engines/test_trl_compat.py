"""The core runs on TRL 1.15 as well as the installed 1.16: a worker process with TRL 1.15 first on its path
trains a short builtin:tiny run. CI installs TRL 1.15 into .ci-cache/trl115 (see .ci/run)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from storage import queries
from storage.db import get_sessionmaker
from tests.conftest import ROOT
from tests.helpers import create_run, run_row, tiny_config

TRL115 = ROOT / ".ci-cache" / "trl115"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (TRL115 / "trl").is_dir(), reason="TRL 1.15 is not installed in .ci-cache/trl115"),
]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TRL115), str(ROOT)])}


def test_config_conversion_on_trl_115():
    code = (
        "import trl, dataclasses; from trainer.config import RunConfig; from trainer.job.trl_args import to_trl;"
        "a = to_trl(RunConfig(), '/tmp/x'); g = a.grpo;"
        "print(trl.__version__, g.beta, g.loss_type, g.num_generations, a.prompt_truncation_needed)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    version, beta, loss, groups, truncation = out.stdout.split()[-5:]
    assert version == "1.15.0" and (beta, loss, groups) == ("0.04", "grpo", "8")


def test_trainer_builds_on_trl_115(tiny_model_path, tmp_path):
    """grpo-studio's arguments, rewards, data and LoRA config are accepted by TRL 1.15's GRPOTrainer."""
    code = (
        "import sys, trl; from pathlib import Path; sys.path.insert(0, 'tests');"
        "from helpers import tiny_config; from trainer.job.worker import build_trainer;"
        f"t = build_trainer(tiny_config(), Path({str(tmp_path)!r}), [], print);"
        "print('BUILT', trl.__version__, type(t).__name__, t.args.beta, t.args.loss_type)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "BUILT 1.15.0 GRPOTrainer 0.04 grpo"


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_worker_trains_on_trl_115(tiny_model_path):
    """Training itself on TRL 1.15 needs a GPU: its GRPOTrainer computes log-probs with a Triton kernel
    (trl/kernels/chunked_logprob.py) that CPU builds of torch can't run. TRL 1.16 has a plain torch path."""
    run_id = create_run(tiny_config(name="trl115", max_steps=2))
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "worker", str(run_id)],
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    run = run_row(run_id)
    assert run.status == "completed", (run.error or "") + out.stderr[-3000:]
    with get_sessionmaker().begin() as s:
        assert [p.step for p in queries.metric_series(s, run_id, "reward")] == [1, 2]
        assert any(line.message.startswith("TRL 1.15.0") for line in queries.log_tail(s, run_id))
