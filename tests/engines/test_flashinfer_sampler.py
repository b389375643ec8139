"""No FlashInfer sampler without nvcc (issue 26, item 1): nvcc is looked for where flashinfer looks, and without it
every vLLM engine grpo-studio starts (Compare's, TRL's colocated one in the worker, the vLLM server) starts with
``VLLM_USE_FLASHINFER_SAMPLER=0``, keeping a value the user chose. Offline, on the CPU: vLLM is a stand-in with the
real signatures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.engines.test_gpu_path import QWEN, _fake_vllm
from tests.helpers import tiny_config
from trainer.loading.backend import Backend
from trainer.loading.vllm_env import FLASHINFER_SAMPLER, nvcc_path, prepare_vllm, vllm_env


def _nvcc(directory: Path) -> Path:
    (directory / "bin").mkdir(parents=True)
    (directory / "bin" / "nvcc").write_text("#!/bin/sh\n")
    return directory / "bin" / "nvcc"


def test_nvcc_is_looked_for_where_flashinfer_looks(tmp_path):
    """flashinfer 0.7.0.post1 jit/cpp_ext.py:48-65: CUDA_HOME, then CUDA_PATH, then `which nvcc`, then /usr/local/cuda."""
    toolkit = _nvcc(tmp_path / "cuda-13.0")
    assert nvcc_path({"CUDA_HOME": str(tmp_path / "cuda-13.0")}, which=lambda name: None) == str(toolkit)
    assert nvcc_path({"CUDA_PATH": str(tmp_path / "cuda-13.0")}, which=lambda name: None) == str(toolkit)
    assert nvcc_path({}, which=lambda name: str(toolkit)) == str(toolkit.resolve())
    # flashinfer takes CUDA_HOME without looking further: an nvcc elsewhere on PATH would not be used
    (tmp_path / "runtime-only").mkdir()
    assert nvcc_path({"CUDA_HOME": str(tmp_path / "runtime-only")}, which=lambda name: str(toolkit)) is None


def test_without_nvcc_the_flashinfer_sampler_is_turned_off():
    assert vllm_env({}, nvcc=lambda env: None) == {FLASHINFER_SAMPLER: "0"}
    assert vllm_env({}, nvcc=lambda env: "/usr/local/cuda/bin/nvcc") == {}


def test_a_sampler_setting_the_user_chose_is_kept():
    assert vllm_env({FLASHINFER_SAMPLER: "1"}, nvcc=lambda env: None) == {}


def test_compare_engine_starts_with_the_sampler_off_without_nvcc(monkeypatch, tmp_path, no_sampler_choice):
    from trainer.evaluation.vllm_sampling import VllmSampler

    record = {}
    for name, module in _fake_vllm(record).items():
        monkeypatch.setitem(sys.modules, name, module)
    seen = []
    original = sys.modules["vllm"].LLM.__init__
    monkeypatch.setattr(
        sys.modules["vllm"].LLM,
        "__init__",
        lambda self, *a, **k: seen.append(os.environ.get(FLASHINFER_SAMPLER)) or original(self, *a, **k),
    )
    monkeypatch.setattr("trainer.loading.vllm_env.nvcc_path", lambda env=None: None)
    VllmSampler("Qwen/Qwen2.5-0.5B-Instruct", tiny_config(**QWEN))
    assert seen == ["0"]


def test_worker_turns_the_sampler_off_before_trls_colocate_engine(monkeypatch, no_sampler_choice):
    from trainer.job import worker

    monkeypatch.setattr("trainer.loading.vllm_env.nvcc_path", lambda env=None: None)
    backend = Backend("trl_vllm", "cuda", True, True, "test")
    monkeypatch.setattr("trainer.loading.backend.select_backend", lambda config, caps=None: backend)
    assert worker.start_backend(tiny_config(**QWEN)) is backend
    assert os.environ[FLASHINFER_SAMPLER] == "0"


def test_a_plain_worker_leaves_the_sampler_setting_alone(monkeypatch, no_sampler_choice):
    from trainer.job import worker

    monkeypatch.setattr("trainer.loading.vllm_env.nvcc_path", lambda env=None: None)
    worker.start_backend(tiny_config())  # the built-in model on this CPU: plain, no vLLM
    assert FLASHINFER_SAMPLER not in os.environ


def test_vllm_server_gets_the_sampler_off_and_its_gpus(monkeypatch, no_sampler_choice):
    from trainer.supervise.vllm_server import server_env

    monkeypatch.setattr("trainer.loading.vllm_env.nvcc_path", lambda env=None: None)
    env = server_env(["2", "3"])
    assert env[FLASHINFER_SAMPLER] == "0" and env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert FLASHINFER_SAMPLER not in os.environ  # the supervisor's own environment is not changed


def test_prepare_vllm_sets_the_variable_in_this_process(monkeypatch, no_sampler_choice):
    monkeypatch.setattr("trainer.loading.vllm_env.nvcc_path", lambda env=None: None)
    assert prepare_vllm() == {FLASHINFER_SAMPLER: "0"} and os.environ[FLASHINFER_SAMPLER] == "0"
    assert prepare_vllm() == {}  # set once: a second engine changes nothing
