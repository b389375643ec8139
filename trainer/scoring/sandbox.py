"""Running untrusted code (a model's answer to a coding prompt) against unit tests.

GRPO optimises whatever the reward pays for, so this has to hold against the model, not only against accidents. Two
separations do the work:

- **The verdict never shares an interpreter with the candidate.** The worker parses each test and evaluates it
  itself (:mod:`trainer.scoring.judge`); the sandbox only receives "call ``f`` with these arguments" and returns the value as
  plain data (:mod:`trainer.scoring.sandbox_server`), through a pipe the worker reads with a deadline and a size cap. A
  forged result line, a patched ``json``, an always-equal object or a rewritten ``__main__`` can only change the
  values reported for the candidate's own calls, which it decides anyway. A malformed, missing or oversized answer
  fails that test; nothing the candidate sends raises out of here.
- **The candidate runs in a bubblewrap sandbox** (one per completion, serving all of its tests): fresh user, PID,
  mount, network, IPC and UTS namespaces; a read-only view of /usr and the Python installation and nothing else of the
  host (no /etc, /home, /proc, database or run files); an empty, size-capped tmpfs at /tmp as the only writable
  place; no environment; a seccomp filter (:mod:`trainer.scoring.seccomp`); rlimits on CPU time, memory per process,
  processes, file size and open files. As root, the sandbox is started as ``nobody``, because a process whose host
  user is root ignores the process limit. When the job ends, for any reason, its process group is killed; the
  sandbox's PID 1 goes with it, and the kernel then kills everything left in its PID namespace, ``setsid`` daemons
  included (``--die-with-parent`` does the same if the worker itself dies).

Where the sandbox can't be built (no bwrap; Docker's default seccomp and AppArmor profiles block user namespaces and
mounts), ``code_tests`` is refused at config validation with what to do (:func:`code_tests_refusal`), unless the
operator opted in with ``--allow-unisolated-code``; then the same protocol runs in a plain child process with the
rlimits only, and a warning says so. SECURITY.md says what this promises and what it does not.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

from trainer.scoring import seccomp
from trainer.scoring.isolation import (  # noqa: F401 - Limits, Verdict, SandboxUnavailable are this module's API too
    ALLOW_UNISOLATED_ENV,
    HOW_TO_ENABLE,
    NOBODY,
    Limits,
    SandboxUnavailable,
    Verdict,
    _bwrap,
    _bwrap_argv,
    _interpreter,
    _readable_by_anyone,
    unisolated_allowed,
)
from trainer.scoring.judge import CandidateError, Unsupported, judge, plan
from trainer.scoring.sandbox_server import Budget, WireError, decode, encode, frame

log = logging.getLogger(__name__)

SERVER_SOURCE = (Path(__file__).with_name("sandbox_server.py")).read_text()


class _Gone(Exception):
    """The sandbox stopped answering: over a time limit, exited, or broke the protocol. Ends the job."""

    def __init__(self, status: str, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


# --- whether isolation is available ---------------------------------------------------------------------------------
_probed: tuple[float, str | None] | None = None  # (when, what isolation_problem found)


def isolation_problem() -> str | None:
    """Why the sandbox can't be built on this machine, with what to do; None when it can. Found by sandboxing a
    one-line solution for real; a success holds for the process, a failure is probed again after 30 s (someone may
    have installed bubblewrap meanwhile)."""
    global _probed
    if _probed is None or (_probed[1] is not None and time.monotonic() - _probed[0] > 30):
        _probed = (time.monotonic(), _probe())
    return _probed[1]


def _probe() -> str | None:
    if not seccomp.supported():
        return f"there is no seccomp filter for this machine's architecture ({os.uname().machine})"
    if _bwrap() is None:
        return (
            "bubblewrap is not installed (apt-get install bubblewrap on Debian and Ubuntu, dnf install bubblewrap "
            "on Fedora)"
        )
    try:
        _interpreter()
    except SandboxUnavailable as exc:
        return str(exc)
    verdict = _run("def probe():\n    return 1\n", ["assert probe() == 1"], Limits(), isolated=True)
    if verdict.score != 1.0:
        return f"bubblewrap could not start a sandbox here ({verdict.detail.strip()[:300]}); {HOW_TO_ENABLE}"
    return None


def code_tests_refusal() -> str | None:
    """Why config validation must refuse the ``code_tests`` reward here, or None when it may run."""
    problem = isolation_problem()
    if problem is None or unisolated_allowed():
        return None
    return (
        f"code_tests runs model-written code, which can't be isolated here: {problem}. To run it without isolation "
        f"anyway, accept the risk with --allow-unisolated-code (or {ALLOW_UNISOLATED_ENV}=1)"
    )


def _isolated_or_refuse() -> bool:
    """True to isolate, False where the operator accepted running unisolated; raises SandboxUnavailable otherwise."""
    if isolation_problem() is None:
        return True
    refusal = code_tests_refusal()
    if refusal:
        raise SandboxUnavailable(refusal)
    _warn_unisolated()
    return False


@lru_cache(maxsize=1)
def _warn_unisolated() -> None:
    log.warning(
        "code_tests: running model-written code WITHOUT isolation (%s): %s", ALLOW_UNISOLATED_ENV, isolation_problem()
    )


# --- one sandbox ----------------------------------------------------------------------------------------------------
class _Sandbox:
    """One candidate's sandbox process and the two pipes of the protocol; every read and write has a deadline."""

    def __init__(self, limits: Limits, isolated: bool):
        self.limits = limits
        self.max_reply = limits.max_reply_kb * 1024 + 4096  # room for the envelope and an error message
        python, prefix = _interpreter()
        request_end, self._requests = os.pipe()
        self._replies, reply_end = os.pipe()
        passed = [request_end, reply_end]
        server = [
            python, "-I", "-S", "-c", SERVER_SOURCE, str(request_end), str(reply_end), str(self.max_reply),
            str(limits.cpu_seconds), str(limits.memory_mb * 2**20), str(limits.max_processes),
            str(limits.max_file_mb * 2**20), str(limits.open_files),
        ]  # fmt: skip
        self._workdir = None
        if isolated:
            filter_end, filter_write = os.pipe()
            os.write(filter_write, seccomp.program())  # a few hundred bytes: fits the pipe's buffer
            os.close(filter_write)
            passed.append(filter_end)
            argv, cwd = _bwrap_argv(_bwrap() or "bwrap", limits, python, prefix, filter_end) + server, "/"
        else:
            self._workdir = tempfile.mkdtemp(prefix="grpo-sandbox-")
            argv, cwd = server, self._workdir
        as_nobody = os.geteuid() == 0
        if as_nobody and self._workdir:
            os.chown(self._workdir, NOBODY, NOBODY)
        try:
            self.process = subprocess.Popen(
                argv,
                cwd=cwd,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": self._workdir or "/"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=passed,
                start_new_session=True,
                **({"user": NOBODY, "group": NOBODY, "extra_groups": []} if as_nobody else {}),
            )
        except BaseException:
            os.close(self._requests)
            os.close(self._replies)
            raise
        finally:
            for fd in passed:
                os.close(fd)
        for fd in (self._requests, self._replies, self.process.stderr.fileno()):
            os.set_blocking(fd, False)
        self._buffer = bytearray()

    def __enter__(self) -> _Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, message: dict, deadline: float) -> None:
        """Write one request frame, giving up at ``deadline`` (a candidate that stops reading can't block us)."""
        data = memoryview(frame(message))
        while data:
            self._wait(self._requests, select.POLLOUT, deadline)
            try:
                data = data[os.write(self._requests, data) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise self._gone() from None

    def receive(self, deadline: float) -> dict:
        """Read one reply frame. A frame that isn't a JSON object reads as an error reply; an oversized one, the end
        of the pipe or the deadline end the job (_Gone)."""
        while True:
            if len(self._buffer) >= 4:
                size = int.from_bytes(self._buffer[:4], "big")
                if size > self.max_reply:
                    raise _Gone("crashed", f"an answer of {size} bytes, over the {self.max_reply}-byte limit")
                if len(self._buffer) >= 4 + size:
                    body = bytes(self._buffer[4 : 4 + size])
                    del self._buffer[: 4 + size]
                    try:
                        message = json.loads(body)
                    except (ValueError, RecursionError) as exc:
                        return {"error": f"malformed answer: {type(exc).__name__}"}
                    return message if isinstance(message, dict) else {"error": "malformed answer: not an object"}
            self._wait(self._replies, select.POLLIN, deadline)
            try:
                chunk = os.read(self._replies, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                raise self._gone()
            self._buffer += chunk

    def call(self, name: str, args: list, kwargs: dict, deadline: float):
        """The candidate's ``name(*args, **kwargs)``, decoded; CandidateError if it raised or answered nonsense."""
        self.send({"call": name, "args": encode(args), "kwargs": encode(kwargs)}, deadline)
        reply = self.receive(deadline)
        if "value" in reply:
            try:
                return decode(reply["value"], budget=Budget(deadline))
            except (WireError, RecursionError) as exc:
                raise CandidateError(f"{name}() answered something that isn't plain data: {exc}") from None
        raise CandidateError(f"{name}() failed: {str(reply.get('error', 'malformed answer'))[:200]}")

    def _wait(self, fd: int, event: int, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        poller = select.poll()
        poller.register(fd, event)
        if remaining <= 0 or not poller.poll(remaining * 1000):
            raise _Gone(
                "timeout", f"over {self.limits.test_seconds:g} s for a test or {self.limits.wall_seconds:g} s in all"
            )

    def _gone(self) -> _Gone:
        """Why the sandbox stopped answering: a CPU-time kill reads as a timeout, anything else as a crash."""
        try:
            code = self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        # bwrap reports a signalled child as 128 + the signal; a plain child as the negative signal.
        if code in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL):
            return _Gone("timeout", f"over {self.limits.cpu_seconds} CPU seconds")
        return _Gone("crashed", f"exit status {code}; {self._stderr()}".strip("; "))

    def _stderr(self) -> str:
        """What bwrap or Python said before the server closed stderr (the candidate can't write there)."""
        try:
            return os.read(self.process.stderr.fileno(), 2000).decode("utf-8", "replace").strip()
        except (BlockingIOError, OSError, ValueError):
            return ""

    def close(self) -> None:
        """Kill the job's process group (the sandbox's PID 1 with it, which ends its whole PID namespace) and
        release everything; never waits without a limit."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.warning("code_tests: sandbox process %d did not exit after SIGKILL", self.process.pid)
        for fd in (self._requests, self._replies):
            os.close(fd)
        self.process.stderr.close()
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)


# --- judging a solution ---------------------------------------------------------------------------------------------
def run_tests(code: str, tests: list[str], limits: Limits = Limits()) -> Verdict:
    """Run ``code`` in a fresh sandbox and judge each test (see :mod:`trainer.scoring.judge`) against it; returns the
    verdict. Raises SandboxUnavailable where isolation is impossible and the operator hasn't accepted the risk."""
    return _run(code, tests, limits, _isolated_or_refuse())


def _run(code: str, tests: list[str], limits: Limits, isolated: bool) -> Verdict:
    plans: list = []
    for test in tests:
        try:
            plans.append(plan(test))
        except Unsupported as exc:
            plans.append(exc)
    total, passed, notes = len(tests), 0, []
    deadline = time.monotonic() + limits.wall_seconds
    try:
        box = _Sandbox(limits, isolated)
    except OSError as exc:  # e.g. no process slot left on the host
        return Verdict(0, total, "crashed", f"could not start the sandbox: {exc}")
    try:
        with box:
            box.send({"code": code}, deadline)
            reply = box.receive(deadline)
            if "ready" not in reply:
                status = "syntax_error" if reply.get("kind") == "syntax_error" else "error"
                return Verdict(0, total, status, str(reply.get("error", "malformed answer"))[:500])
            for number, test_plan in enumerate(plans, 1):
                if isinstance(test_plan, Unsupported):
                    notes.append(f"test {number} not judged: {test_plan}")
                    continue
                test_deadline = min(deadline, time.monotonic() + limits.test_seconds)
                answers: list[str] = []

                def call(name: str, args: list, kwargs: dict, answers=answers, test_deadline=test_deadline):
                    value = box.call(name, args, kwargs, test_deadline)
                    answers.append(f"{name}() returned {value!r}"[:200])
                    return value

                try:
                    judge(test_plan, call)
                    passed += 1
                except _Gone:
                    raise
                except Exception as exc:  # a failed assert, a candidate error, a TypeError on odd data
                    notes.append(f"test {number}: {type(exc).__name__}: {exc} {'; '.join(answers)}"[:300])
    except _Gone as gone:
        return Verdict(0, total, gone.status, gone.detail[:500])
    return Verdict(passed, total, "ok", " | ".join(notes)[:1000])


def run_many(jobs: list[tuple[str, list[str]]], limits: Limits = Limits(), workers: int | None = None) -> list[Verdict]:
    """Run several solutions at once (one group's completions). Most of a job's time is spent waiting on its
    sandbox, so there are more threads than cores."""
    if not jobs:
        return []
    isolated = _isolated_or_refuse()
    workers = workers or min(16, max(4, 2 * (os.cpu_count() or 1)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: _run(job[0], job[1], limits, isolated), jobs))
