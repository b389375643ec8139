"""A run's tool process: every call of a run's tools and of its environment's methods runs in one child process
that the training process kills at the call's limit, or at once when the run is asked to stop (issue 58.2).

Why a process, after a thread per call (this module's predecessor): Python cannot stop a thread, and
``asyncio.wait_for`` cannot interrupt an ``async`` tool that blocks its event loop (``time.sleep`` inside
``async def``): such a tool hung a run at step 0 for good, deaf to Stop, and a sync tool that hung left one thread
per call behind (32 to 54 threads in 3 steps). A process can be killed whatever it is doing: at the limit its whole
process group gets SIGKILL, its threads and the processes it started die with it, and the next call starts a fresh
one. The training process waits for an answer without a thread of its own (polling the reply pipe in slices of
:data:`POLL_S`), so a call costs no thread, and a stop heard between two slices ends the wait at once.

What the old design said against a process, and how this one answers it:

- *state*: an environment's methods change its own state (a game's board, a counter). The instances live in the
  child, one per rollout as TRL makes them; the training process holds a stand-in per instance
  (trainer.tools.limits.make_stand_in) whose tool methods, ``reset``, ``get_reward`` and attributes are forwarded,
  so a reward that reads ``environments[i].calls`` reads the child's value.
- *forking the training process is unsafe* (CUDA, the database writer's threads): the child is a fresh interpreter
  (``subprocess``, no fork of this one's state), importing the standard library and the run's tool modules only.
- *a fresh interpreter per call costs a second*: it is started once per run (lazily, at the first call) and again
  only after a kill; a call is a round trip on two pipes.

A kill loses every instance the child held: a later call on one of them answers that its state was lost (the next
``reset``, at the next rollout, makes it afresh), its ``get_reward`` is None (not applicable, which TRL skips) and
reading one of its attributes raises AttributeError saying so.

What bounds a call (SECURITY.md): its wall-clock limit (``tool_timeout_s``), the child's address space
(:data:`MEMORY_MB`), the size of one answer (:data:`MAX_REPLY_BYTES`) and the run's Stop. The child runs the user's
code as the worker's user, unsandboxed: the limit is against a tool that is slow, stuck or greedy, and a tool whose
code the operator does not trust is refused without ``--allow-custom-rewards``.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

POLL_S = 0.1  # how often a waiting call looks at the run's stop request
START_S = 60.0  # the child's start, the user's imports included (a tool module importing numpy takes a second)
MEMORY_MB = 4096  # the child's address space: a tool that needs more gets MemoryError as its answer
MAX_REPLY_BYTES = 16 * 1024 * 1024  # one answer, pickled: a tool's answer is read by the model, not a data set
STOPPED = "error: the run is stopping, so the tool was not called to its end"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]

_LIVE: weakref.WeakSet[ToolProcess] = weakref.WeakSet()


class Raised(Exception):
    """A call that did not return a value: its text is the answer (``error: Type: message``); ``ended``: it did not
    end by itself (past its limit, the run stopping, the process gone), so the child was killed."""

    def __init__(self, text: str, ended: bool = False) -> None:
        super().__init__(text)
        self.ended = ended


class Lost(Exception):
    """A forwarded call on an environment instance whose state died with a killed tool process."""


class ToolProcess:
    """The child process that runs one run's ``tools`` (their specs) and ``environment`` (a class's spec), each call
    bounded by ``timeout_s``; ``stop`` (the run's stop request, a threading.Event) ends a waiting call at once."""

    def __init__(
        self,
        tools: list[str],
        environment: str,
        timeout_s: float,
        stop: threading.Event | None = None,
        memory_mb: int = MEMORY_MB,
    ) -> None:
        self.specs = {"tools": list(tools), "environment": environment}
        self.timeout_s = timeout_s
        self.stop = stop
        self.memory_mb = memory_mb
        self.generation = 0  # counts the children started: an instance made in an earlier one is lost
        self.pid: int | None = None
        self._process: subprocess.Popen | None = None
        self._requests: Connection | None = None
        self._replies: Connection | None = None
        self._lock = threading.Lock()  # one request at a time on the pipes
        self._next_instance = 0
        self._drops: list[int] = []
        _LIVE.add(self)

    # --- the calls ---------------------------------------------------------------------------------------------
    def call(self, message: tuple, expect_generation: int | None = None) -> Any:
        """Send ``message`` (trainer.tools.child's protocol) and return the child's value. Raises Raised for a call
        that raised there, or that ran past the limit, or was cut by the run's stop (``ended``: the child was
        killed); Lost when ``expect_generation`` (an instance's) is not the child's now."""
        with self._lock:
            if self.stop is not None and self.stop.is_set():
                raise Raised(STOPPED, ended=True)
            self._ensure_started()
            if expect_generation is not None and expect_generation != self.generation:
                raise Lost(message[0])
            drops, self._drops = self._drops, []
            try:
                self._requests.send((drops, message))
            except (pickle.PicklingError, TypeError, AttributeError) as exc:  # arguments pickle can't carry
                raise Raised(f"error: the call's arguments could not be sent to the tool: {exc}") from None
            except OSError:  # the child ended between two calls
                code = self._process.poll() if self._process is not None else None
                self._kill()
                raise Raised(f"error: the tool's process ended (exit status {code})", ended=True) from None
            limit = self.timeout_s
            kind, value = self._receive(time.monotonic() + limit, f"the tool took longer than {limit:g} s")
        if kind != "ok":
            raise Raised(value, ended=kind == "ended")
        return value

    def new_instance(self) -> tuple[int, int]:
        """A new environment instance in the child: its id and the child's generation it lives in."""
        with self._lock:
            self._next_instance += 1
            instance = self._next_instance
        self.call(("new", instance))
        return instance, self.generation

    def drop(self, instance: int) -> None:
        """Forget an instance the training process no longer holds (sent with the next request)."""
        self._drops.append(instance)

    def close(self) -> None:
        """End the child (its pipes closed, then killed if it is still running a call)."""
        with self._lock:
            self._kill()

    # --- the child ---------------------------------------------------------------------------------------------
    def _ensure_started(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        self._kill()
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        command = [
            sys.executable,
            "-m",
            "trainer.tools.child",
            str(requests_read),
            str(replies_write),
            json.dumps(self.specs),
            str(self.memory_mb),
        ]
        env = os.environ | {
            "PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        }
        try:
            # its own session: a kill at the limit reaches the processes it started, and the run's SIGTERM to the
            # worker's group does not (the wait below hears the stop and kills it itself)
            self._process = subprocess.Popen(
                command,
                pass_fds=(requests_read, replies_write),
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr.fileno() if _has_fileno(sys.stderr) else None,
                start_new_session=True,
                env=env,
                close_fds=True,
            )
        finally:
            os.close(requests_read)
            os.close(replies_write)
        self.pid = self._process.pid
        self.generation += 1
        self._requests = Connection(requests_write, readable=False)
        self._replies = Connection(replies_read, writable=False)
        kind, value = self._receive(time.monotonic() + max(START_S, self.timeout_s), "the tools did not load")
        if kind != "ok":
            self._kill()
            raise Raised(value, ended=kind == "ended")
        log.info("tool process %d started (%s)", self.pid, ", ".join(self._names()))

    def _names(self) -> list[str]:
        return [*self.specs["tools"], *([self.specs["environment"]] if self.specs["environment"] else [])]

    def _receive(self, deadline: float, late: str) -> tuple[str, Any]:
        """The child's reply, ("ok", value) or ("raised", error), or ("ended", why) after killing it: past
        ``deadline`` (``late`` says what), the run stopping, the child ending, or a reply over
        :data:`MAX_REPLY_BYTES`."""
        while True:
            if self.stop is not None and self.stop.is_set():
                self._kill()
                return "ended", STOPPED
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                return "ended", f"error: {late}"
            try:
                if not self._replies.poll(min(POLL_S, left)):
                    continue
                return pickle.loads(self._replies.recv_bytes(MAX_REPLY_BYTES))
            except (EOFError, OSError) as exc:  # ended, or an answer over the size limit
                code = self._process.poll() if self._process is not None else None
                self._kill()
                if isinstance(exc, EOFError):
                    return "ended", f"error: the tool's process ended (exit status {code})"
                return "ended", f"error: the tool's answer is larger than {MAX_REPLY_BYTES // 2**20} MiB"

    def _kill(self) -> None:
        """SIGKILL the child's process group and close the pipes (nothing when no child runs)."""
        for end in (self._requests, self._replies):
            if end is not None:
                end.close()
        self._requests = self._replies = None
        process, self._process = self._process, None
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


@atexit.register
def _close_all() -> None:
    """No tool process outlives the training process's normal exit (a killed one's die by PR_SET_PDEATHSIG)."""
    for process in list(_LIVE):
        process.close()
