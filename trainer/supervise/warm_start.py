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
ANSWER_SECONDS = 30.0  # a fork answers in milliseconds; a parent silent this long (stopped, swapped out) is given up
READY = b"ready\n"
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
        self.ready = False
        self.gone = False

    def look(self) -> None:
        """Read, without waiting, whether the parent said it is ready, or has gone (its end of the pipe closed)."""
        while not (self.ready or self.gone) and select.select([self.answers], [], [], 0)[0]:
            line = read_line(self.answers)
            self.ready, self.gone = line == READY, line != READY

    def start(self, run_id: int, log: Path, cwd: Path, env: dict[str, str]) -> int | None:
        """Ask for a worker of ``run_id``; its pid, or None when the parent refused or did not answer."""
        request = {"run_id": run_id, "log": str(log), "cwd": str(cwd), "env": env}
        try:
            os.write(self.requests, json.dumps(request).encode() + b"\n")
            if not select.select([self.answers], [], [], ANSWER_SECONDS)[0]:
                return None
            answer = json.loads(read_line(self.answers) or b"{}")
        except (OSError, ValueError):
            return None
        pid = answer.get("pid")
        return pid if isinstance(pid, int) and pid > 0 else None

    def close(self) -> None:
        """Let the parent go: it ends when it reads the end of its requests."""
        for fd in (self.requests, self.answers):
            try:
                os.close(fd)
            except OSError:
                pass


_parent: _WarmParent | None = None
_lock = threading.Lock()  # a dashboard launches from several request threads


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
                # No process starts here: tests/slow_guard.py judges this start by the command the parent came from.
                sys.audit("grpo_studio.warm_start", run_id, parent.origin)
                pid = parent.start(run_id, log, cwd, env)
                if pid is not None:
                    return pid
            if parent.ready or parent.gone or parent.settings != import_settings(env):
                parent.close()
                _parent = parent = None
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


def read_line(fd: int) -> bytes:
    """One line from ``fd`` (b"" at its end), read a byte at a time so nothing after it is taken."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line
