"""scripts/device_check.py (issue 26, item 5): the one-shot check for an offline GPU node, run here with --cpu-smoke so
it can't rot, and scripts/device_bundle.sh's shape (making the archive needs PyPI, so the suite does not run it)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import load_script


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


def test_every_step_has_a_timeout_and_all_fit_eight_minutes(device_check):
    """Issue 38: the stages, the install and the torch import together within 480 s, leaving slack in a 10-minute
    allocation (the stages alone used to add up to 570 s, with the import and the install untimed)."""
    assert set(device_check.TIMEOUTS) == set(device_check.STAGES)
    total = device_check.INSTALL_TIMEOUT + device_check.IMPORT_TIMEOUT + sum(device_check.TIMEOUTS.values())
    assert total == device_check.default_budget_s() <= device_check.BUDGET_S == 480


@pytest.mark.parametrize("cpu_smoke", [False, True])
def test_every_stage_config_is_built_as_the_stage_builds_it_and_is_valid(device_check, cpu_smoke, tiny_model_path):
    """Issue 38, item 1: the unsloth-4bit stage passed model_name_or_path twice to dict() and died with a TypeError
    before training; every stage's config now comes from stage_config, which run_stage calls, and validates."""
    args = device_check.parser().parse_args(["--cpu-smoke"] if cpu_smoke else [])
    args.steps = 2
    configs = {stage: device_check.stage_config(args, stage) for stage in device_check.STAGES}
    trained = {stage: c for stage, c in configs.items() if c is not None}
    assert set(trained) == {"plain", "plain-4bit", "unsloth-4bit", "beta0", "beta0-unsloth"}
    for stage, config in trained.items():
        assert device_check.config_problems(config) == [], stage
        assert config.name == f"device-check-{stage}" and config.max_steps == 2 and not config.use_vllm
    for stage in device_check.UNSLOTH_STAGES:  # the built-in model by its directory, as Unsloth loads it
        assert trained[stage].backend == "unsloth" and trained[stage].load_in_4bit
        assert (Path(trained[stage].model_name_or_path) / "config.json").is_file()
    for stage in ("beta0", "beta0-unsloth"):  # what the preset's beta 0.04 never reaches
        config = trained[stage]
        assert (config.beta, config.num_iterations, config.measured_kl_steps) == (0.0, 2, 1)
        assert config.token_samples_per_step > 0
    assert trained["plain"].beta == 0.04 and trained["plain-4bit"].load_in_4bit
    assert (trained["plain"].num_generations == 2) is cpu_smoke


def test_a_row_says_ok_failed_or_skipped_with_its_figures(device_check):
    ok = {"stage": "plain", "status": "ok", "seconds_per_step": 0.25, "peak_gpu_gib": 1.5, "wall_s": 20.0}
    assert device_check.row_line(ok) == "plain         ok: 0.250 s/step, peak 1.50 GiB, 20.0 s in all"
    failed = {"stage": "unsloth-4bit", "status": "failed", "error": "timed out after 210 s", "wall_s": 210}
    assert device_check.row_line(failed) == "unsloth-4bit  failed: timed out after 210 s"
    beta0 = ok | {"stage": "beta0", "kl_measured": [0.0, 0.0123], "clip_ratio": [0.0, 0.1], "tokens_with_values": 40}
    assert device_check.row_line(beta0) == (
        "beta0         ok: 0.250 s/step, peak 1.50 GiB, measured KL 0.0123 (2 points), clip_ratio 0.1, "
        "40 tokens with values, 20.0 s in all"
    )


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
        timeout=900,  # a cap on a shared CPU (about 150 s on two quiet cores)
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(out.read_text())
    rows = {row["stage"]: row for row in summary["rows"]}
    assert list(rows) == ["plain", "plain-4bit", "unsloth-4bit", "beta0", "beta0-unsloth", "compare", "gpu-busy"]
    assert [rows[s]["status"] for s in rows] == ["ok", "skipped", "skipped", "ok", "skipped", "ok", "ok"]
    for stage in ("plain-4bit", "unsloth-4bit", "beta0-unsloth"):  # not trained, but their configs were checked
        assert rows[stage]["reason"] == "needs CUDA (--cpu-smoke); its config is valid"
    assert [row["step"] for row in summary["setup"]] == ["install", "torch import"]
    assert summary["setup"][1]["status"] == "ok" and summary["finished"]
    assert rows["plain"]["steps"] == 2 and rows["plain"]["seconds_per_step"] > 0
    beta0 = rows["beta0"]  # beta 0, num_iterations 2, token capture: on the CPU here
    assert (
        beta0["steps"] == 2 and beta0["kl_measured"] and all(math.isfinite(v) and v >= 0 for v in beta0["kl_measured"])
    )
    assert beta0["tokens_with_values"] > 0 and beta0["completions_with_token_values"] > 0
    assert len(beta0["clip_ratio"]) == 2 and beta0["measures_off"] == []
    assert rows["plain"]["backend"].startswith("plain transformers + PEFT on cpu")
    assert rows["gpu-busy"]["refused"].startswith("GPU 0 is in use by pid ")
    summary = done.stdout.split("\nsummary:\n", 1)[1]
    for stage in rows:  # every stage's row printed
        assert f"\n{stage:<13} " in "\n" + summary
    assert "[plain] " in log.read_text()  # the stages' output was streamed to the log


def test_bundle_script_gathers_the_missing_wheels_for_python_3_12():
    text = (ROOT / "scripts" / "device_bundle.sh").read_text()
    assert "--python-version 3.12" in text and "--only-binary=:all:" in text and "--no-deps" in text
    for name in (
        "trl==",
        "datasets==",
        "sqlalchemy==",
        "alembic==",
        "math-verify==",
        "unsloth==",
        "unsloth_zoo==",
        "peft==",
    ):
        assert name in text.lower()
    assert "libbitsandbytes_cuda130.so" in text  # bitsandbytes' CUDA 13 build only
    assert "LIMIT_MIB=64" in text  # checks its own size
    wheels = text.split("WHEELS=(", 1)[1].split(")", 1)[0].lower()
    assert "vllm" not in wheels and "xformers" not in wheels  # too big to carry; built for CUDA 12


@pytest.mark.slow
def test_a_check_killed_after_its_first_stage_leaves_its_summary(tmp_path):
    """Issue 38, item 5: the summary is rewritten after every step, so a check killed mid-way (a hang, an allocation
    that ran out) still leaves the rows it finished."""
    out, log = tmp_path / "summary.json", tmp_path / "check.log"
    command = [sys.executable, str(ROOT / "scripts" / "device_check.py"), "--cpu-smoke", "--stages", "gpu-busy,plain"]
    check = subprocess.Popen(
        command + ["--out", str(out), "--log", str(log)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        for line in check.stdout:
            if line.startswith("gpu-busy "):  # the first stage's row is printed: kill the check right there
                break
    finally:
        os.killpg(check.pid, signal.SIGKILL)
        check.wait(30)
    summary = json.loads(out.read_text())
    assert [row["stage"] for row in summary["rows"]] == ["gpu-busy"] and summary["rows"][0]["status"] == "ok"
    assert summary["finished"] is False and [row["step"] for row in summary["setup"]] == ["install", "torch import"]
    assert summary["rows"][0]["wall_s"] > 0


def test_the_pasted_command_is_the_same_in_the_readme_and_the_docs_and_parses(device_check):
    """The one line a user pastes on the node: README and docs/device-check.md agree, and the check accepts it."""
    lines = []
    for doc in ("README.md", "docs/device-check.md"):
        lines += [line for line in (ROOT / doc).read_text().splitlines() if "device_check.py --wheels" in line]
    assert len(lines) == 2 and lines[0] == lines[1]
    args = device_check.parser().parse_args(lines[0].split("device_check.py", 1)[1].split())
    assert (args.wheels, args.out, args.log) == ("/tmp/gs/wheels", "device-check.json", "device-check.log")


def test_the_install_step_says_what_is_missing(device_check, tmp_path):
    args = device_check.parser().parse_args([])
    assert device_check.install(args)["status"] == "skipped"  # nothing carried: the node has it all
    args = device_check.parser().parse_args(["--wheels", str(tmp_path), "--site", str(tmp_path / "site")])
    row = device_check.install(args)
    assert row["status"] == "failed" and row["error"] == f"no .whl file in {tmp_path}"
