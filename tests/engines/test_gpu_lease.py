"""One lease per GPU across every process grpo-studio starts (issue 26, item 4): a second user is told who holds
it, a dead holder never keeps it, a background user waits a bounded time, and the worker, the dashboard and the
Compare panel each take it or say who has it. Offline, on the CPU: the GPU and vLLM are stand-ins with the real
signatures, and the lease is exercised between real processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.engines.test_gpu_path import PROMPT, QWEN, _fake_vllm
from tests.helpers import create_run, run_row, tiny_config
from trainer.loading.backend import Backend, Capabilities
from trainer.supervise import gpu_lease

HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from trainer.supervise.gpu_lease import acquire
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

    holder = _hold(data_dir(), 60)
    try:
        with get_sessionmaker().begin() as session:
            monkeypatch.setattr(gpu_lease, "gpu_visible", lambda: False)
            assert gpu_lease.gpu_busy(session) is None  # no GPU here: never told to wait
            monkeypatch.setattr(gpu_lease, "gpu_visible", lambda: True)
            assert gpu_lease.gpu_busy(session).startswith(f"GPU 0 is in use by pid {holder.pid} (a test holder)")
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
