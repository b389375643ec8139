"""scripts/device_check.py (issue 26, item 5): the one-shot check for an offline GPU node, run here with --cpu-smoke so
it can't rot, and scripts/device_bundle.sh's shape (making the archive needs PyPI, so the suite does not run it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import load_script

from .conftest import ROOT


@pytest.fixture(scope="module")
def device_check():
    return load_script("device_check.py")


def test_step_time_needs_no_second_step(device_check):
    """gpu_check divided by zero for --steps <= 2; here one step gives its own time and none gives None."""
    assert device_check.typical_step([]) is None
    assert device_check.typical_step([3.0]) == 3.0
    assert device_check.typical_step([9.0, 1.0]) == 1.0  # the first step pays for warm-up
    assert device_check.typical_step([9.0, 1.0, 2.0, 30.0]) == 2.0


def test_defaults_are_the_builtin_model_offline(device_check):
    args = device_check.parser().parse_args([])
    assert args.model == "builtin:tiny" and args.stages.split(",") == device_check.STAGES
    env = device_check.stage_env("/tmp/x", cpu_smoke=True)
    assert env["HF_HUB_OFFLINE"] == "1" and env["GRPO_STUDIO_HOME"] == "/tmp/x" and env["CUDA_VISIBLE_DEVICES"] == ""


def test_every_stage_has_a_timeout_and_all_fit_a_ten_minute_allocation(device_check):
    assert set(device_check.TIMEOUTS) == set(device_check.STAGES)
    assert sum(device_check.TIMEOUTS.values()) < 600


def test_a_row_says_ok_failed_or_skipped_with_its_figures(device_check):
    ok = {"stage": "plain", "status": "ok", "seconds_per_step": 0.25, "peak_gpu_gib": 1.5, "wall_s": 20.0}
    assert device_check.row_line(ok) == "plain         ok: 0.250 s/step, peak 1.50 GiB, 20.0 s in all"
    failed = {"stage": "unsloth-4bit", "status": "failed", "error": "timed out after 210 s", "wall_s": 210}
    assert device_check.row_line(failed) == "unsloth-4bit  failed: timed out after 210 s"


@pytest.mark.slow
def test_cpu_smoke_passes_with_a_row_for_every_stage(tmp_path):
    """The whole check on the CPU: a real 2-step run, Compare on its adapter, the GPU-busy path with a real holder."""
    out, log = tmp_path / "summary.json", tmp_path / "check.log"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "device_check.py"),
            "--cpu-smoke",
            "--out",
            str(out),
            "--log",
            str(log),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {row["stage"]: row for row in json.loads(out.read_text())["rows"]}
    assert list(rows) == ["plain", "plain-4bit", "unsloth-4bit", "compare", "gpu-busy"]
    assert [rows[s]["status"] for s in rows] == ["ok", "skipped", "skipped", "ok", "ok"]
    assert rows["plain-4bit"]["reason"] == rows["unsloth-4bit"]["reason"] == "needs CUDA (--cpu-smoke)"
    assert rows["plain"]["steps"] == 2 and rows["plain"]["seconds_per_step"] > 0
    assert rows["plain"]["backend"].startswith("plain transformers + PEFT on cpu")
    assert rows["gpu-busy"]["refused"].startswith("GPU 0 is in use by pid ")
    summary = done.stdout.split("\nsummary:\n", 1)[1]
    for stage in rows:  # every stage's row printed
        assert f"\n{stage:<13} " in "\n" + summary
    assert "[plain] " in log.read_text()  # the stages' output was streamed to the log


def test_bundle_script_gathers_the_missing_wheels_for_python_3_12():
    text = (ROOT / "scripts" / "device_bundle.sh").read_text()
    assert "--python-version 3.12" in text and "--only-binary=:all:" in text and "--no-deps" in text
    for name in ("trl==", "datasets==", "sqlalchemy==", "alembic==", "math-verify==", "unsloth==", "unsloth_zoo=="):
        assert name in text.lower()
    assert "libbitsandbytes_cuda130.so" in text  # bitsandbytes' CUDA 13 build only
    assert "LIMIT_MIB=64" in text  # checks its own size
    wheels = text.split("WHEELS=(", 1)[1].split(")", 1)[0].lower()
    assert "vllm" not in wheels and "xformers" not in wheels  # too big to carry; built for CUDA 12
