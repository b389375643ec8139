"""vLLM server mode: ``python -m trainer.supervise.vllm_server RUN_ID -- TRAINING COMMAND...``.

On a node with several GPUs, generation (most of a GRPO step's time) gets GPUs of its own: TRL's ``trl vllm-serve``
runs on the GPUs of ``vllm_gpus`` and the training command on the rest, as TRL documents
(https://huggingface.co/docs/trl/vllm_integration: "vLLM server and TRL trainer must use different CUDA devices").
This process sits between the launcher and both: it picks free ports, starts the server in a session of its own,
runs the training command with ``CUDA_VISIBLE_DEVICES`` set to the other GPUs and the server's address in its
environment (trainer.job.trl_args.vllm_server_kwargs), and stops the server when training has ended, however it
ended. TRL's trainer waits for the server itself (``vllm_server_timeout``).

A stop reaches the training processes (they are in this process's group, which the launcher or Slurm signals) but
not the server, which must keep generating until the last step has finished; it is stopped afterwards. Both pids go
to the run's log.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

from storage import queries
from storage.db import get_sessionmaker
from trainer.config.cluster import vllm_gpu_positions
from trainer.loading.vllm_env import vllm_env
from trainer.supervise.commands import VLLM_GROUP_PORT_ENV, VLLM_SERVER_ENV, vllm_serve_command
from trainer.supervise.gpu_lease import GpuBusy, acquire, default_wait
from trainer.supervise.run_files import RunFiles

SERVER_STOP_WAIT_S = 30
# How long the server may take to answer /health before the run fails saying so: loading a large model and starting
# its engine takes minutes (GRPO_STUDIO_VLLM_START_TIMEOUT_S changes it). TRL's own client waits 240 s by default
# (GRPOConfig.vllm_server_timeout), without telling a dead server from a slow one.
SERVER_START_TIMEOUT_S = 900
PORT_TRIES = 3  # a port found free can be taken before the server binds it: try another, twice


def split_gpus(visible: list[str], vllm_positions: list[int]) -> tuple[list[str], list[str]]:
    """The node's visible GPUs split into (vLLM's, training's), by position: under Slurm ``CUDA_VISIBLE_DEVICES``
    lists the job's GPUs (e.g. 4,5,6,7), so ``vllm_gpus`` counts within that list, not the machine's numbering."""
    missing = [p for p in vllm_positions if p >= len(visible)]
    if missing:
        raise ValueError(f"vllm_gpus names GPU position {missing[0]}, but this node shows {len(visible)} GPUs")
    serve = [visible[p] for p in vllm_positions]
    return serve, [gpu for gpu in visible if gpu not in serve]


def visible_gpus() -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES``, else every GPU nvidia-smi lists."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [gpu.strip() for gpu in listed.split(",") if gpu.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def server_env(serve_gpus: list[str]) -> dict[str, str]:
    """The ``trl vllm-serve`` process's environment: this one's, on the server's GPUs, with what every vLLM engine
    needs (trainer.loading.vllm_env: no FlashInfer sampler without nvcc)."""
    return os.environ | vllm_env() | {"CUDA_VISIBLE_DEVICES": ",".join(serve_gpus)}


def _log(run_id: int, message: str, level: str = "INFO") -> None:
    with get_sessionmaker().begin() as session:
        queries.add_log(session, run_id, message, level)


def free_port() -> int:
    """A TCP port nothing on this node listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the server's process: be sent SIGTERM when this supervisor dies, even by SIGKILL (Linux prctl), so a killed
    run never leaves a server holding its GPUs."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def supervise(run_id: int, training: list[str]) -> int:
    """Start the run's vLLM server, run ``training`` beside it, stop the server; returns training's exit code."""
    from trainer.config import RunConfig

    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, run_id)
        config, _ = RunConfig.from_dict(dict(run.config))
        files = RunFiles.of(run.output_dir, run_id).create()
    serve_gpus, train_gpus = split_gpus(visible_gpus(), vllm_gpu_positions(config))
    if not train_gpus:
        _log(run_id, f"vllm_gpus {config.vllm_gpus!r} leaves no GPU of this node for training", "ERROR")
        return 1
    try:  # the server's GPUs' leases (trainer.supervise.gpu_lease), held by this supervisor while the server lives
        leases = [
            acquire(f"run {run_id}'s vLLM server", gpu, wait_s=default_wait(), on_wait=lambda m: _log(run_id, m))
            for gpu in serve_gpus
        ]
    except GpuBusy as exc:
        _log(run_id, str(exc), "ERROR")
        return 1
    try:
        return _serve_and_train(run_id, config, files, serve_gpus, train_gpus, training)
    finally:
        for lease in leases:
            lease.release()


def _serve_and_train(run_id, config, files: RunFiles, serve_gpus, train_gpus, training: list[str]) -> int:
    started = _start_server(run_id, config, files, serve_gpus)
    if isinstance(started, str):
        _log(run_id, started, "ERROR")
        return 1
    server, port = started
    _log(
        run_id,
        f"vLLM server started (pid {server.pid}) on GPUs {','.join(serve_gpus)} at 127.0.0.1:{port}; training on "
        f"GPUs {','.join(train_gpus)} (supervisor pid {os.getpid()}; server log {files.vllm_log})",
    )
    env = os.environ | {
        "CUDA_VISIBLE_DEVICES": ",".join(train_gpus),
        VLLM_SERVER_ENV: f"127.0.0.1:{port}",
        VLLM_GROUP_PORT_ENV: str(free_port()),
    }
    trainer = subprocess.Popen(training, stdin=subprocess.DEVNULL, env=env, cwd=str(files.root))
    # Slurm may signal only this process (the job's batch step): pass a stop on to training.
    signal.signal(signal.SIGTERM, lambda *_: trainer.send_signal(signal.SIGTERM))
    signal.signal(signal.SIGINT, lambda *_: trainer.send_signal(signal.SIGINT))
    died = False
    while trainer.poll() is None:
        if server.poll() is not None and not died:
            # Training can't go on without its generator: stop it now (it saves at its step boundary) rather than
            # let TRL's client wait out its timeout on every request.
            _log(run_id, f"{server_exit(server, files)}; stopping training", "ERROR")
            trainer.send_signal(signal.SIGTERM)
            died = True
        time.sleep(1)
    _stop_server(server)
    _log(run_id, f"vLLM server stopped (pid {server.pid})")
    return 1 if died and trainer.returncode == 0 else trainer.returncode


def _start_server(run_id, config, files: RunFiles, serve_gpus) -> tuple[subprocess.Popen, int] | str:
    """Start the run's server and wait until it answers: (the server, its port), or why it did not, in a sentence.
    A port taken between choosing and binding it gets another (:data:`PORT_TRIES`)."""
    from trainer.loading.backend import model_path

    timeout = float(os.environ.get("GRPO_STUDIO_VLLM_START_TIMEOUT_S") or SERVER_START_TIMEOUT_S)
    for attempt in range(1, PORT_TRIES + 1):
        port = free_port()
        command = vllm_serve_command(
            model_path(config), len(serve_gpus), port, config.vllm_gpu_memory_utilization, config.max_seq_length
        )
        start = files.vllm_log.stat().st_size if files.vllm_log.exists() else 0
        with open(files.vllm_log, "ab") as log:
            server = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # out of the group a stop signals: it serves until the last step is done
                preexec_fn=_die_with_parent,
                env=server_env(serve_gpus),
                cwd=str(files.root),
            )
        problem = wait_until_ready(server, port, timeout)
        if problem is None:
            return server, port
        exited = server.poll() is not None
        _stop_server(server)
        written = files.vllm_log.read_bytes()[start:].decode(errors="replace")
        if exited and "address already in use" in written.lower() and attempt < PORT_TRIES:
            _log(run_id, f"port {port} was taken before the vLLM server bound it: trying another")
            continue
        return server_exit(server, files, written, " before it answered") if exited else problem
    raise AssertionError("unreachable: the last try returns")


def wait_until_ready(server: subprocess.Popen, port: int, timeout_s: float, interval_s: float = 1.0) -> str | None:
    """Poll the server's ``/health`` (vLLM's and TRL's server both answer it; trl 1.16 generation/vllm_client.py:278)
    until it answers 200: None then, else why not: it exited, or it did not answer within ``timeout_s``."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            return f"the vLLM server exited with code {server.returncode} before it answered"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                if answer.status == 200:
                    return None
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() >= deadline:
            return (
                f"the vLLM server did not answer at 127.0.0.1:{port} within {timeout_s:g} s (set "
                "GRPO_STUDIO_VLLM_START_TIMEOUT_S for a model that takes longer to load)"
            )
        time.sleep(interval_s)


def server_exit(server: subprocess.Popen, files: RunFiles, written: str | None = None, when: str = "") -> str:
    """One sentence on a server that exited: its code, ``when``, and the last line of its log (``written``: what it
    wrote this time, else the whole log)."""
    text = written if written is not None else files.vllm_log.read_text(errors="replace")
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    said = f" ({last[:300]})" if last else ""
    return f"the vLLM server exited with code {server.returncode}{when}{said}; its log: {files.vllm_log}"


def _stop_server(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (vLLM has worker processes), SIGKILL if it lingers."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(SERVER_STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def main(argv: list[str] | None = None) -> int:
    """``python -m trainer.supervise.vllm_server RUN_ID -- COMMAND...``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or not argv[0].isdigit() or argv[1] != "--":
        print("usage: python -m trainer.supervise.vllm_server RUN_ID -- TRAINING COMMAND...", file=sys.stderr)
        return 2
    return supervise(int(argv[0]), argv[2:])


if __name__ == "__main__":
    sys.exit(main())
