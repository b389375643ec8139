"""The GPU path, round 3 (issue 26): the FlashInfer sampler without nvcc, xformers out of the image, a LoRA id per
adapter version, and one lease per GPU across every process grpo-studio starts. Offline, on the CPU: vLLM and the
GPU are stand-ins with the real signatures, and the lease is exercised between real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trainer.job import gpu_lease
from trainer.loading.backend import Backend, Capabilities
from trainer.loading.vllm_env import FLASHINFER_SAMPLER, nvcc_path, prepare_vllm, vllm_env

from .conftest import ROOT
from .helpers import create_run, run_row, tiny_config
from .test_gpu_path import PROMPT, QWEN, _fake_vllm


@pytest.fixture
def no_sampler_choice(monkeypatch):
    """VLLM_USE_FLASHINFER_SAMPLER unset for the test and restored afterwards (also when the code under test sets it)."""
    monkeypatch.setenv(FLASHINFER_SAMPLER, "unset-by-test")
    monkeypatch.delenv(FLASHINFER_SAMPLER)


# --- item 1: no FlashInfer sampler without nvcc ------------------------------------------------------------------------
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
    from trainer.job.vllm_server import server_env

    monkeypatch.setattr("trainer.loading.vllm_env.nvcc_path", lambda env=None: None)
    env = server_env(["2", "3"])
    assert env[FLASHINFER_SAMPLER] == "0" and env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert FLASHINFER_SAMPLER not in os.environ  # the supervisor's own environment is not changed


def test_prepare_vllm_sets_the_variable_in_this_process(monkeypatch, no_sampler_choice):
    monkeypatch.setattr("trainer.loading.vllm_env.nvcc_path", lambda env=None: None)
    assert prepare_vllm() == {FLASHINFER_SAMPLER: "0"} and os.environ[FLASHINFER_SAMPLER] == "0"
    assert prepare_vllm() == {}  # set once: a second engine changes nothing


# --- items 1 and 2: the image --------------------------------------------------------------------------------------------
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_image_turns_the_flashinfer_sampler_off():
    assert "    VLLM_USE_FLASHINFER_SAMPLER=0\n" in DOCKERFILE


def test_image_leaves_out_xformers_built_for_cuda_12():
    install = next(line for line in DOCKERFILE.splitlines() if 'pip install ".[gpu]"' in line)
    assert install.endswith("&& pip uninstall -y xformers")
    assert "libcudart.so.12" in DOCKERFILE  # and says why


# --- item 3: a new LoRA id whenever the adapter's files change --------------------------------------------------------
def _adapter(directory: Path, weights: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "adapter_config.json").write_text('{"r": 8}')
    (directory / "adapter_model.safetensors").write_bytes(weights)
    return directory


def test_a_rewritten_adapter_gets_a_new_lora_id(monkeypatch, tmp_path, no_sampler_choice):
    """vLLM serves what it cached under an id (vllm 0.32 lora/request.py:15-28); a resumed run rewrites adapter/."""
    from trainer.evaluation.sampling import SamplingSettings
    from trainer.evaluation.vllm_sampling import VllmSampler

    record = {}
    for name, module in _fake_vllm(record).items():
        monkeypatch.setitem(sys.modules, name, module)
    sampler = VllmSampler("Qwen/Qwen2.5-0.5B-Instruct", tiny_config(**QWEN))
    settings = SamplingSettings(greedy=False, temperature=0.7, top_p=0.9, max_new_tokens=5, seed=0)
    adapter = _adapter(tmp_path / "run" / "adapter", b"first")

    def lora_id() -> int:
        sampler.sample(PROMPT, 1, adapter, settings)
        return record["chats"][-1][2].lora_int_id

    assert lora_id() == 1 and lora_id() == 1  # unchanged files: vLLM's cached copy is the right one
    _adapter(adapter, b"second, longer")
    assert lora_id() == 2 and record["chats"][-1][2].lora_path == str(adapter)
    stat = (adapter / "adapter_model.safetensors").stat()
    _adapter(adapter, b"second, LONGER")  # same size: the modification time tells them apart
    os.utime(adapter / "adapter_model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert lora_id() == 3


def test_peft_compare_loads_a_rewritten_adapter_again(tmp_path, tiny_model_path):
    """The PEFT side (Compare's CPU path and evaluation) names adapters by their files too, and drops the old one."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainer.evaluation.compare import ModelCache

    def save(value: float) -> None:
        model = get_peft_model(
            AutoModelForCausalLM.from_pretrained(tiny_model_path), LoraConfig(r=2, target_modules=["q_proj"])
        )
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.data.fill_(value)
        model.save_pretrained(tmp_path / "adapter")

    def lora_b(model) -> float:
        return next(
            float(p.detach().flatten()[0])
            for n, p in model.named_parameters()
            if "lora_B" in n and model.active_adapter in n
        )

    cache = ModelCache()
    save(0.25)
    model, _ = cache.get(str(tiny_model_path), tmp_path / "adapter")
    assert lora_b(model) == pytest.approx(0.25)
    assert cache.get(str(tiny_model_path), tmp_path / "adapter")[0] is model and len(cache.adapters) == 1
    save(-0.5)
    model, _ = cache.get(str(tiny_model_path), tmp_path / "adapter")
    assert lora_b(model) == pytest.approx(-0.5) and len(cache.adapters) == 1
    cache.release()


# --- item 4: one lease per GPU ------------------------------------------------------------------------------------------
HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from trainer.job.gpu_lease import acquire
    lease = acquire("a test holder", "0", root=Path({home!r}))
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
    """
)


def _hold(home: Path, seconds: float) -> subprocess.Popen:
    """Another process holding GPU 0's lease for ``seconds`` (it has printed "held" when this returns)."""
    script = HOLDER.format(root=str(ROOT), home=str(home))
    process = subprocess.Popen([sys.executable, "-c", script, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_process_is_told_who_holds_the_gpu(tmp_path):
    holder = _hold(tmp_path, 60)
    try:
        with pytest.raises(gpu_lease.GpuBusy) as refused:
            gpu_lease.acquire("the dashboard's Compare panel", "0", root=tmp_path)
        message = str(refused.value)
        assert message.startswith(f"GPU 0 is in use by pid {holder.pid} (a test holder) since ")
        assert message.count(". ") == 0 and message.endswith(").")  # one sentence
        assert gpu_lease.holder("0", root=tmp_path).pid == holder.pid
        assert gpu_lease.holder("1", root=tmp_path) is None  # another GPU is free
        with gpu_lease.gpu_lease("another GPU's user", "1", root=tmp_path):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_holder_never_keeps_the_gpu(tmp_path):
    """The kernel drops a flock with its holder's last descriptor, however the holder ended (here: SIGKILL)."""
    holder = _hold(tmp_path, 60)
    holder.kill()
    holder.wait()
    assert gpu_lease.holder("0", root=tmp_path) is None
    with gpu_lease.gpu_lease("the next user", "0", root=tmp_path):
        assert gpu_lease.holder("0", root=tmp_path) is None  # this process's own lease is not "someone else"


def test_a_background_user_waits_for_the_gpu_bounded(tmp_path):
    holder = _hold(tmp_path, 1.0)
    told = []
    started = time.monotonic()
    lease = gpu_lease.acquire("run 2's worker", "0", root=tmp_path, wait_s=60, poll_s=0.1, on_wait=told.append)
    waited = time.monotonic() - started
    lease.release()
    holder.wait()
    assert len(told) == 1 and told[0].startswith("waiting up to 60 s for the GPU: GPU 0 is in use by pid")
    assert waited < 60  # it got the GPU when the holder let go, not at the deadline


def test_a_background_user_gives_up_after_its_wait(tmp_path):
    holder = _hold(tmp_path, 60)
    try:
        with pytest.raises(gpu_lease.GpuBusy, match="a test holder"):
            gpu_lease.acquire("run 3's worker", "0", root=tmp_path, wait_s=0.3, poll_s=0.1)
    finally:
        holder.kill()
        holder.wait()


def test_one_process_may_take_its_own_lease_twice(tmp_path):
    outer = gpu_lease.acquire("evaluation 1", "0", root=tmp_path)
    inner = gpu_lease.acquire("evaluation 1, again", "0", root=tmp_path)
    inner.release()
    assert gpu_lease.lease_path("0", tmp_path) in gpu_lease._HELD  # the outer holder still has it
    outer.release()
    assert gpu_lease.lease_path("0", tmp_path) not in gpu_lease._HELD
    assert gpu_lease.lease_path("0", tmp_path).read_text() == ""  # reads as free


def test_a_cpu_user_takes_no_lease(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_lease, "acquire", lambda *a, **k: pytest.fail("a CPU run must not take a GPU lease"))
    with gpu_lease.lease_for("cpu", "run 1's worker"):
        pass


def test_slurm_jobs_on_one_node_do_not_share_a_lease(monkeypatch, tmp_path):
    """Slurm hands each job GPUs of its own and may number them from 0 in each job: two jobs never wait on each other."""
    monkeypatch.setenv("SLURM_JOB_ID", "101")
    first = gpu_lease.lease_path("0", tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", "102")
    assert gpu_lease.lease_path("0", tmp_path) != first
    monkeypatch.delenv("SLURM_JOB_ID")
    assert gpu_lease.lease_path("0", tmp_path) not in (first, gpu_lease.lease_path("1", tmp_path))


def test_physical_gpu_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert (gpu_lease.physical_gpu(0), gpu_lease.physical_gpu(1)) == ("4", "5")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu_lease.physical_gpu(1) == "1"


def test_a_gpu_worker_fails_naming_the_holder_when_the_gpu_stays_busy(fresh_db, monkeypatch, studio_home):
    """A CLI worker on a GPU another process holds: the run fails, its last line the one sentence (no model loads)."""
    from storage.db import data_dir
    from trainer.job import worker

    holder = _hold(data_dir(), 60)
    try:
        monkeypatch.setenv(gpu_lease.WAIT_ENV, "0.2")
        monkeypatch.setattr(worker, "start_backend", lambda config: Backend("plain", "cuda", True, False, "fake GPU"))
        monkeypatch.setattr(worker, "build_trainer", lambda *a, **k: pytest.fail("must not load a model"))
        run_id = create_run(tiny_config())
        assert worker.run_worker(run_id).value == "failed"
        error = run_row(run_id).error  # one sentence (the traceback goes to the run's log)
        assert error.startswith(f"GpuBusy: GPU 0 is in use by pid {holder.pid} (a test holder)")
    finally:
        holder.kill()
        holder.wait()


def test_dashboard_says_who_holds_the_gpu(fresh_db, monkeypatch):
    from storage.db import data_dir, get_sessionmaker
    from trainer.job import launch

    holder = _hold(data_dir(), 60)
    try:
        with get_sessionmaker().begin() as session:
            monkeypatch.setattr(launch, "gpu_visible", lambda: False)
            assert launch.gpu_busy(session) is None  # no GPU here: never told to wait
            monkeypatch.setattr(launch, "gpu_visible", lambda: True)
            assert launch.gpu_busy(session).startswith(f"GPU 0 is in use by pid {holder.pid} (a test holder)")
    finally:
        holder.kill()
        holder.wait()


def test_compare_panel_is_refused_while_another_process_holds_the_gpu(monkeypatch, tmp_path, no_sampler_choice):
    from storage.db import data_dir
    from trainer.evaluation.compare import ModelCache, compare

    record = {}
    for name, module in _fake_vllm(record).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(
        "trainer.loading.backend.probe", lambda: Capabilities(cuda=True, bf16=True, unsloth=False, vllm=True)
    )
    holder = _hold(data_dir(), 60)
    try:
        with pytest.raises(gpu_lease.GpuBusy, match=f"pid {holder.pid}"):
            compare(tiny_config(**QWEN), tmp_path / "final", PROMPT, "4", n=1, cache=ModelCache())
        assert "engines" not in record  # refused before vLLM started
    finally:
        holder.kill()
        holder.wait()
    cache = ModelCache()
    compare(tiny_config(**QWEN), tmp_path / "final", PROMPT, "4", n=1, cache=cache)
    assert gpu_lease.lease_path("0") in gpu_lease._HELD  # the panel holds the GPU while its engine lives
    cache.release()
    assert gpu_lease.lease_path("0") not in gpu_lease._HELD
