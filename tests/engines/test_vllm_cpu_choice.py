"""vLLM on a CPU when asked (issue 56), the logic without an engine: which path a CPU machine takes, what the review
refuses in one sentence, the engine's environment mapped from the run's own settings, and the engine report read
from an engine shaped as TRL 1.16 and vLLM 0.32 hold it. tests/engines/test_vllm_cpu.py runs the real engine."""

from __future__ import annotations

import dataclasses
import importlib.util
from types import SimpleNamespace

import pytest

from tests.helpers import tiny_config
from trainer.config import RunConfig
from trainer.job.engine_report import engine_line, report_engine, sampling_line
from trainer.loading import backend as backend_module
from trainer.loading.backend import BackendError, Capabilities, cpu_vllm_problem, select_backend
from trainer.loading.vllm_cpu import cpu_vllm_env, kv_bytes_per_token, kv_cache_gib
from trainer.review import model as review_model

CPU_WITH_VLLM = Capabilities(cuda=False, bf16=False, unsloth=False, vllm=True)
SMOLLM2 = {  # the real model's config.json, the fields read here
    "hidden_size": 576,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "num_hidden_layers": 30,
}


@pytest.fixture
def model_dir(tmp_path):
    """A model folder whose config.json says SmolLM2-135M's shape (64-wide heads)."""
    import json

    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2))
    return str(tmp_path)


def test_a_cpu_takes_vllm_only_when_asked_with_backend_trl(model_dir):
    asked = RunConfig(model_name_or_path=model_dir, backend="trl", use_vllm=True)
    chosen = select_backend(asked, CPU_WITH_VLLM)
    assert (chosen.name, chosen.device, chosen.use_vllm, chosen.bf16) == ("trl_vllm", "cpu", True, False)
    assert chosen.describe().startswith("TRL + vLLM colocate, transformers + PEFT on cpu (fp32): no GPU; backend: trl")
    # the default (auto) stays plain generation, the faster one on a small CPU; so does a CPU without vLLM
    assert select_backend(dataclasses.replace(asked, backend="auto"), CPU_WITH_VLLM).name == "plain"
    assert select_backend(asked, dataclasses.replace(CPU_WITH_VLLM, vllm=False)).name == "plain"
    assert select_backend(dataclasses.replace(asked, use_vllm=False), CPU_WITH_VLLM).name == "plain"


def test_heads_vllms_cpu_attention_cannot_run_are_refused_in_one_sentence(model_dir):
    tiny = tiny_config(backend="trl", use_vllm=True)
    problem = cpu_vllm_problem(tiny)
    assert problem == (
        "vLLM on a CPU runs attention heads 32, 64, 80, 96, … wide, and builtin:tiny's are 24: set use_vllm: false "
        "(or backend: auto) to generate with transformers"
    )
    with pytest.raises(BackendError, match="builtin:tiny's are 24"):
        select_backend(tiny, CPU_WITH_VLLM)  # the worker's own check, should a run get past the review
    assert cpu_vllm_problem(RunConfig(model_name_or_path=model_dir, backend="trl")) is None  # 576 / 9 = 64
    assert cpu_vllm_problem(RunConfig(model_name_or_path="owner/not-downloaded", backend="trl")) is None


def test_the_review_refuses_them_before_launch_on_a_machine_without_a_gpu(monkeypatch, model_dir):
    monkeypatch.setattr(review_model, "nvidia_smi_gpu", lambda: None)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        review_model.importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real_find_spec(name)
    )
    tiny = tiny_config(backend="trl", use_vllm=True)
    assert any("builtin:tiny's are 24" in p for p in review_model.gpu_path_problems(tiny))
    fits = RunConfig(model_name_or_path=model_dir, backend="trl", use_vllm=True, load_in_4bit=False)
    assert review_model.gpu_path_problems(fits) == []
    assert review_model.machine_warnings(fits) == []  # asked for on purpose, and it runs: no "no GPU" warning


def test_training_through_a_vllm_server_is_refused_on_a_cpu_whatever_the_backend(monkeypatch, model_dir):
    monkeypatch.setattr(review_model, "nvidia_smi_gpu", lambda: None)
    server = RunConfig(model_name_or_path=model_dir, vllm_mode="server")
    (problem,) = [p for p in review_model.gpu_path_problems(server) if "server" in p]
    assert problem == (
        "vllm_mode: server needs a GPU: TRL sends the trained weights to the vLLM server over NCCL only; on a CPU "
        "use vllm_mode: colocate"
    )
    monkeypatch.setattr(review_model, "nvidia_smi_gpu", lambda: "NVIDIA H100, 580.1")
    assert not [p for p in review_model.gpu_path_problems(server) if "server" in p]


def test_the_cpu_engines_kv_cache_is_sized_from_the_run_and_a_users_choice_is_kept():
    per_token = kv_bytes_per_token(SMOLLM2)
    assert per_token == 2 * 30 * 3 * 64 * 2  # keys and values, 30 layers, 3 KV heads of 64, 16 bits
    small = RunConfig(num_generations=4, per_device_train_batch_size=4, max_seq_length=256)
    assert kv_cache_gib(small, per_token) == 1  # 4 x 256 tokens x 23 KB: well under 1 GiB, vLLM's unit
    big = RunConfig(num_generations=64, per_device_train_batch_size=64, max_seq_length=32_768)
    assert kv_cache_gib(big, per_token) == 45  # 64 x 32768 x 23040 B = 45 GiB
    env = cpu_vllm_env(small, SMOLLM2, environ={})
    assert env == {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_HOST_IP": "127.0.0.1"}
    chosen = {"VLLM_CPU_KVCACHE_SPACE": "8", "VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    assert cpu_vllm_env(small, SMOLLM2, environ=chosen) == {"VLLM_HOST_IP": "127.0.0.1"}


def fake_engine(calls: list) -> SimpleNamespace:
    """An engine with the attributes engine_report reads, where vLLM 0.32 keeps them (vllm/config: cache_config,
    model_config (enforce_eager: config/model.py:272), scheduler_config, device_config.device_type) and TRL 1.16 calls
    generate (vllm_generation.py:729)."""
    config = SimpleNamespace(
        cache_config=SimpleNamespace(kv_cache_memory_bytes=1 << 30, gpu_memory_utilization=0.9),
        model_config=SimpleNamespace(dtype="torch.bfloat16", enforce_eager=False, max_model_len=256),
        scheduler_config=SimpleNamespace(max_num_seqs=4),
        device_config=SimpleNamespace(device_type="cpu"),
    )
    return SimpleNamespace(
        llm_engine=SimpleNamespace(vllm_config=config),
        generate=lambda prompts, sampling_params=None, use_tqdm=True: calls.append(sampling_params) or ["out"],
    )


def test_the_engine_report_logs_the_engines_settings_and_its_first_sampling_once():
    calls, lines = [], []
    llm = fake_engine(calls)
    trainer = SimpleNamespace(vllm_generation=SimpleNamespace(llm=llm))
    assert report_engine(trainer, lines.append) is True
    assert lines == ["vLLM engine: cpu, bfloat16, compiled, max_model_len 256, max_num_seqs 4, KV cache 1 GiB"]
    params = SimpleNamespace(temperature=0.9, top_p=0.95, top_k=0, max_tokens=24, n=1)
    assert llm.generate(["a"], sampling_params=params, use_tqdm=False) == ["out"]
    llm.generate(["b"], sampling_params=params, use_tqdm=False)
    assert lines[1:] == ["vLLM sampling: temperature 0.9, top_p 0.95, top_k 0, max_tokens 24, n 1"]
    assert calls == [params, params]  # both calls reached the engine, the second without the report
    on_gpu = fake_engine([])
    on_gpu.llm_engine.vllm_config.cache_config.kv_cache_memory_bytes = None
    assert engine_line(on_gpu).endswith("gpu_memory_utilization 0.9")
    assert sampling_line(params).startswith("vLLM sampling: temperature 0.9")
    assert report_engine(SimpleNamespace(vllm_generation=None), lines.append) is False  # plain or server: nothing


def test_the_head_width_of_a_model_not_on_this_machine_is_unknown_not_guessed(monkeypatch):
    monkeypatch.setattr(backend_module, "existing_model_path", lambda config: None)
    assert backend_module.head_width(RunConfig(model_name_or_path="owner/name")) is None


def test_top_p_below_1_with_trls_vllm_correction_is_warned_with_its_measured_cost(model_dir):
    from trainer.review.model import sampling_warnings

    nucleus = RunConfig(model_name_or_path=model_dir, backend="trl", use_vllm=True, top_p=0.95)
    (warning,) = sampling_warnings(nucleus)
    assert warning.startswith("top_p 0.95 with use_vllm: TRL's importance-sampling correction weighs each completion")
    assert warning.endswith("set top_p: 1, or vllm_importance_sampling_correction: false")
    for fine in (
        dataclasses.replace(nucleus, top_p=1.0),
        dataclasses.replace(nucleus, vllm_importance_sampling_correction=False),
        dataclasses.replace(nucleus, use_vllm=False),
        dataclasses.replace(nucleus, backend="plain"),
        tiny_config(top_p=0.95),  # the built-in models never generate with vLLM
    ):
        assert sampling_warnings(fine) == []


def test_a_model_the_review_could_not_read_is_refused_when_it_loads(tmp_path):
    """A GGUF file or hub model is on disk only once the worker has it: the worker checks its heads before vLLM starts
    (trainer.loading.vllm_cpu.prepare_cpu_vllm), in the review's words."""
    import json

    from trainer.loading.vllm_cpu import prepare_cpu_vllm

    (tmp_path / "config.json").write_text(json.dumps({**SMOLLM2, "hidden_size": 216}))  # 9 heads of 24
    config = RunConfig(model_name_or_path="owner/narrow-heads", backend="trl")
    with pytest.raises(BackendError) as refused:
        prepare_cpu_vllm(config, str(tmp_path))
    assert str(refused.value).startswith("vLLM on a CPU runs attention heads 32, 64, 80, 96, … wide, and owner/")
    assert "narrow-heads's are 24" in str(refused.value)


def test_a_config_json_in_the_working_directory_is_not_read_for_a_model_not_on_disk(tmp_path, monkeypatch):
    import json

    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2))
    monkeypatch.setattr(backend_module, "existing_model_path", lambda config: None)
    assert backend_module.head_width(RunConfig(model_name_or_path="owner/name")) is None


class FakeLLM:
    """``vllm.LLM`` as TRL 1.16 builds it (generation/vllm_generation.py:347-364: keywords only, no dtype and no
    enforce_eager); records the keywords it was built with."""

    built: list[dict] = []

    def __init__(self, **kwargs):
        FakeLLM.built.append(kwargs)


@pytest.fixture
def fake_vllm(monkeypatch):
    import sys
    import types

    module = types.ModuleType("vllm")
    module.LLM = type("LLM", (FakeLLM,), {})
    FakeLLM.built = []
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def test_a_run_asking_for_an_eager_engine_gets_one_and_a_caller_choosing_otherwise_is_kept(fake_vllm, monkeypatch):
    from trainer.job import worker
    from trainer.loading.backend import Backend
    from trainer.loading.vllm_env import engine_defaults

    backend = Backend("trl_vllm", "cuda", True, True, "test")
    monkeypatch.setattr("trainer.loading.backend.select_backend", lambda config, caps=None: backend)
    monkeypatch.setattr("trainer.loading.vllm_env.prepare_vllm", lambda: {})
    worker.start_backend(tiny_config(backend="trl", use_vllm=True, vllm_enforce_eager=True))
    fake_vllm.LLM(model="m", max_model_len=512)  # as TRL calls it
    fake_vllm.LLM(model="m", enforce_eager=False)  # a caller that chose
    engine_defaults(dtype="float32")  # the CPU's float32 on top: both hold, the wrapper is not wrapped again
    fake_vllm.LLM(model="m")
    assert FakeLLM.built == [
        {"model": "m", "max_model_len": 512, "enforce_eager": True},
        {"model": "m", "enforce_eager": False},
        {"model": "m", "enforce_eager": True, "dtype": "float32"},
    ]
    assert fake_vllm.LLM.__init__.grpo_studio_original is FakeLLM.__init__


def test_by_default_the_engine_is_built_as_vllm_builds_it(fake_vllm, monkeypatch):
    from trainer.job import worker
    from trainer.loading.backend import Backend

    backend = Backend("trl_vllm", "cuda", True, True, "test")
    monkeypatch.setattr("trainer.loading.backend.select_backend", lambda config, caps=None: backend)
    monkeypatch.setattr("trainer.loading.vllm_env.prepare_vllm", lambda: {})
    assert RunConfig().vllm_enforce_eager is False
    worker.start_backend(tiny_config(backend="trl", use_vllm=True))
    fake_vllm.LLM(model="m")
    assert FakeLLM.built == [{"model": "m"}]  # compiled: faster generation for a run of more than a few dozen steps
