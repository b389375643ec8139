"""A config that needs what this machine lacks says so before launch (issue 58: a GPU preset read "Valid" on a
CPU-only machine, then would have trained a 3B model on its CPU in 32 bits). Read from nvidia-smi, faked here at that
boundary (trainer.loading.backend.nvidia_smi_gpu): the machine running the suite has none."""

from __future__ import annotations

import dataclasses

import pytest

from trainer.presets import load_preset, resolve_preset
from trainer.review import model as model_review


def preset(name: str):
    return load_preset(resolve_preset(name))


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(model_review, "nvidia_smi_gpu", lambda: None)


def test_a_gpu_preset_on_a_machine_without_a_gpu_is_warned_before_launch(no_gpu):
    from app import actions

    checked = actions.validate(resolve_preset("gsm8k-llama3b"), actions.Access(any_path=True))
    (warning,) = [w for w in checked.warnings if "no GPU" in w]
    assert warning.startswith("this machine has no GPU that nvidia-smi sees, so use_vllm and load_in_4bit can't apply")
    assert "unsloth/Llama-3.2-3B-Instruct would train on the CPU in 32 bits" in warning


@pytest.mark.parametrize(
    "change",
    [{"backend": "plain"}, {"executor": "slurm"}, {"use_vllm": False, "load_in_4bit": False}],
    ids=["plain on purpose", "runs on a cluster", "asks for no GPU path"],
)
def test_no_warning_where_the_run_asks_for_no_gpu_here(no_gpu, change):
    assert model_review.machine_warnings(dataclasses.replace(preset("gsm8k-llama3b"), **change)) == []


def test_the_cpu_presets_and_a_machine_with_a_gpu_get_no_warning(no_gpu, monkeypatch):
    for name in ("tiny-offline", "tiny-calculator", "smollm2-135m"):
        assert model_review.machine_warnings(preset(name)) == [], name
    monkeypatch.setattr(model_review, "nvidia_smi_gpu", lambda: "NVIDIA H100 80GB HBM3, 580.65.06")
    assert model_review.machine_warnings(preset("gsm8k-llama3b")) == []
