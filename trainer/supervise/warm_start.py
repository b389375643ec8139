"""Starting a training worker without paying for its imports again: the launcher's side of a warm parent.

A worker spends most of its first seconds importing torch, transformers, peft, trl and datasets: 7 of the 12 CPU
seconds of a tiny run on a 2-core machine. A launcher that starts more than one worker (a dashboard, its queue, a
sweep) paid that each time. Now:

- the first worker it starts runs as ``python -m trainer.job.warm_start --pipes R,W RUN_ID``: it imports the
  libraries, forks a *warm parent* that keeps them, and trains RUN_ID as ``python -m trainer.job.worker RUN_ID``
  would (trainer.job.warm_start, the other side of the two pipes);
- each later start (:func:`start`) is one line to the warm parent: the run, the log, the working directory and the
  launcher's environment of now. It forks a child set up as a fresh detached worker would be and answers its pid,
  which the launcher records as it records a fresh worker's;
- :func:`start` starts a fresh process instead, as before, when the warm parent is still importing, is gone, or was
  started with another environment than the launch's in a variable that a library may read as it is imported
  (anything but grpo-studio's own variables and the compile caches, which are read later): the child would otherwise
  train with the first launch's settings.

Only where no NVIDIA GPU is visible: on the Unsloth path unsloth must be imported before transformers, trl and peft
(trainer.job.worker.start_backend), and a GPU run's start is short beside its training anyway. Only the plain
single-process worker (not ``accelerate launch``, ``torchrun`` or the vLLM server's supervisor).
``GRPO_STUDIO_WARM_START=0`` in the launcher's environment turns it off.

Standard library only: the dashboard imports this module, and must start light.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

MODULE = "trainer.job.warm_start"  # the worker process that forks the warm parent
WORKER_MODULE = "trainer.job.worker"
IDLE_SECONDS = 15 * 60  # a warm parent holds a few hundred MB: it goes after this long without a start
ANSWER_SECONDS = 30.0  # a fork answers in milliseconds; a parent silent this long (stopped, swapped out) is killed
READY = b"ready"  # the parent's first line: "ready PID"
GO = b"g"  # what a forked child waits for before it runs: its pid has reached the launcher
# Read by grpo-studio after its worker has started, or by a library only when it compiles (the cache directories:
# trainer.loading.backend.CACHE_VARIABLES): a launch may differ from the warm parent's environment in these.
RUNTIME_PREFIXES = ("GRPO_STUDIO_",)
RUNTIME_VARIABLES = frozenset(
    {
        "DATABASE_URL",
        "PWD",
        "OLDPWD",
        "PYTEST_CURRENT_TEST",
        "UNSLOTH_COMPILE_LOCATION",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "VLLM_CACHE_ROOT",
    }
)
# GRPO_STUDIO_WARM_START=0 in the launcher's environment: every worker a fresh process, as before.
SWITCH = "GRPO_STUDIO_WARM_START"


def import_settings(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` a library may read as it is imported: what a warm parent's environment and a launch's
    must agree on."""
    return {
        name: value
        for name, value in env.items()
        if name not in RUNTIME_VARIABLES and not name.startswith(RUNTIME_PREFIXES)
    }


# --- the launcher's side ----------------------------------------------------------------------------------------------
class _WarmParent:
    """The launcher's end of one warm parent's pipes, the import settings it was started with, and the command line
    of the process it was forked from (``origin``)."""

    def __init__(self, requests: int, answers: int, settings: dict[str, str], origin: list[str]) -> None:
        self.requests, self.answers, self.settings, self.origin = requests, answers, settings, origin
        self.pid: int | None = None  # the warm parent's own, from its "ready" line
        self.gone = False

    @property
    def ready(self) -> bool:
        return self.pid is not None and not self.gone

    def look(self) -> None:
        """Read, without waiting, whether the parent said it is ready, or has gone (its end of the pipe closed)."""
        try:
            while self.pid is None and not self.gone and readable(self.answers, 0):
                word, _, pid = read_line(self.answers).partition(b" ")
                if word == READY and pid.strip().isdigit():
                    self.pid = int(pid)
                else:
                    self.gone = True
        except (OSError, ValueError):
            self.gone = True

    def start(self, run_id: int, log: Path, cwd: Path, env: dict[str, str]) -> int | None:
        """Ask for a worker of ``run_id``; its pid, or None when the parent refused or did not answer (then it is
        killed: a child it forked after all waits for a go that never comes, and exits)."""
        request = {"run_id": run_id, "log": str(log), "cwd": str(cwd), "env": env}
        try:
            write_all(self.requests, json.dumps(request).encode() + b"\n")
            if not readable(self.answers, ANSWER_SECONDS):
                self.kill()
                return None
            answer = json.loads(read_line(self.answers) or b"{}")
        except (OSError, ValueError):
            self.gone = True
            return None
        pid = answer.get("pid") if isinstance(answer, dict) else None
        return pid if isinstance(pid, int) and pid > 0 else None

    def kill(self) -> None:
        """End a parent that stopped answering."""
        import signal

        self.gone = True
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def close(self) -> None:
        """Let the parent go: it ends when it reads the end of its requests. Closing twice closes nothing else."""
        for fd in (self.requests, self.answers):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.requests = self.answers = -1
        self.gone = True


_parent: _WarmParent | None = None
_lock = threading.Lock()  # a dashboard launches from several request threads
# Warm parents let go, by pid. One is nobody's child (its first worker forked it twice removed), so the init process
# reaps it; but where this launcher is the container's PID 1 (the Docker image's `grpo-studio serve`) it is this
# process's, and is reaped here.
_let_go: list[int] = []


def _reap_let_go() -> None:
    for pid in list(_let_go):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid  # not ours: the init process reaps it
        if done:
            _let_go.remove(pid)


def warmable(command: list[str]) -> bool:
    """Whether ``command`` (from trainer.supervise.commands.worker_command) is the plain worker a warm parent can
    start, on a machine without a visible GPU, unless :data:`SWITCH` is 0."""
    from trainer.supervise.gpu_lease import gpu_visible

    plain = len(command) == 4 and command[:3] == [sys.executable, "-m", WORKER_MODULE] and command[3].isdigit()
    return plain and os.environ.get(SWITCH, "1").strip() != "0" and not gpu_visible()


def start(command: list[str], log: Path, cwd: Path, env: dict[str, str]) -> int:
    """Start the worker ``command`` detached (its own session, output appended to ``log``, in ``cwd``, with ``env``);
    returns its pid. Forked by this launcher's warm parent where one is ready and fits, else a fresh process (the
    first of them becomes the next warm parent)."""
    global _parent
    if not warmable(command):
        return spawn(command, log, cwd, env).pid
    run_id = int(command[3])
    with _lock:
        parent = _parent
        if parent is not None:
            parent.look()
            if parent.ready and parent.settings == import_settings(env):
                # No process starts here: tests/suite/slow_guard.py judges this start by the command the parent came from.
                sys.audit("grpo_studio.warm_start", run_id, parent.origin)
                pid = parent.start(run_id, log, cwd, env)
                if pid is not None:
                    return pid
            if parent.ready or parent.gone or parent.settings != import_settings(env):  # let it go
                parent.close()
                _let_go.extend([parent.pid] if parent.pid else [])
                _parent = parent = None
        _reap_let_go()
        if parent is not None:  # still importing: this one starts fresh, the next may find it ready
            return spawn(command, log, cwd, env).pid
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        origin = [sys.executable, "-m", MODULE, "--pipes", f"{requests_read},{answers_write}", str(run_id)]
        try:
            process = spawn(origin, log, cwd, env, pass_fds=(requests_read, answers_write))
        except BaseException:
            for fd in (requests_write, answers_read):
                os.close(fd)
            raise
        finally:
            os.close(requests_read)
            os.close(answers_write)
        _parent = _WarmParent(requests_write, answers_read, import_settings(env), origin)
        return process.pid


def spawn(
    command: list[str], log: Path, cwd: Path, env: dict[str, str], pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen:
    """Start ``command`` as a detached process of its own session (it outlives the launcher), its output appended to
    ``log``, in ``cwd``."""
    with open(log, "ab") as log_file:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            # A writable directory of its own: what a library writes to its working directory stays there (in the
            # container the package root is root-owned site-packages).
            cwd=str(cwd),
            pass_fds=pass_fds,
        )


def readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` has something to read (or its end) within ``timeout_s`` (poll: any fd number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(int(timeout_s * 1000)))


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_line(fd: int) -> bytes:
    """One line from ``fd`` (b"" at its end), read a byte at a time so nothing after it is taken."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line
