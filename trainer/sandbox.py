"""Running untrusted code (a model's answer to a coding prompt) against unit tests, in a sandbox process.

Layers, each covering what another can miss:

- a separate process in its own session, killed with its whole process group at the wall-clock limit;
- resource limits: CPU seconds, address space (memory), file size, and a process count;
- when we run as root (containers, CI): the child drops to the ``nobody`` user, so the process limit applies (root
  is exempt from RLIMIT_NPROC) and it can't write outside its throw-away working directory; and it gets a network
  namespace of its own (no interfaces up), so no connection can leave it;
- a scrubbed environment (no tokens, keys or proxies inherited), ``python -I`` (no user site, no PYTHON* variables);
- inside, an audit hook refuses sockets, subprocesses and writes outside the working directory, for when the OS
  layers are unavailable (not root, no namespaces).

The verdict is the fraction of tests passed; a syntax error, a timeout or a crash scores 0.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNET = 0x40000000
NOBODY = 65534

RUNNER = r"""
import json, os, sys
work = os.getcwd()

def guard(event, args):
    if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo", "subprocess.Popen",
                 "os.system", "os.exec", "os.posix_spawn", "os.fork", "os.forkpty", "pty.spawn", "ctypes.dlopen"):
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "open" and len(args) > 1 and isinstance(args[0], (str, bytes)):
        mode, path = args[1], os.fsdecode(args[0])
        writing = isinstance(mode, str) and any(c in mode for c in "wax+")
        if writing and not os.path.abspath(path).startswith(work + os.sep):
            raise PermissionError(f"sandbox: writing {path} is not allowed")

spec = json.load(open("job.json"))
sys.addaudithook(guard)
result = {"passed": 0, "total": len(spec["tests"]), "status": "ok", "errors": []}
namespace = {"__name__": "__solution__"}
try:
    exec(compile(spec["code"], "solution.py", "exec"), namespace)
except SyntaxError as exc:
    result["status"] = "syntax_error"; result["errors"].append(str(exc))
except BaseException as exc:
    result["status"] = "error"; result["errors"].append(f"{type(exc).__name__}: {exc}")
else:
    for test in spec["tests"]:
        try:
            exec(compile(test, "test.py", "exec"), dict(namespace))
            result["passed"] += 1
        except BaseException as exc:
            result["errors"].append(f"{type(exc).__name__}: {exc}"[:200])
sys.stdout.write("\n@@RESULT@@" + json.dumps(result) + "\n")
"""


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use."""

    wall_seconds: float = 5.0
    cpu_seconds: int = 5
    memory_mb: int = 512
    max_processes: int = 16
    max_file_mb: int = 16


@dataclass(frozen=True)
class Verdict:
    """Outcome of running one solution: tests passed of total, and why it stopped."""

    passed: int
    total: int
    status: str  # ok | syntax_error | error | timeout | crashed
    detail: str = ""

    @property
    def score(self) -> float:
        """Fraction of tests passed; 0 for anything that didn't run to the end."""
        return self.passed / self.total if self.total and self.status in ("ok", "error") else 0.0


def _preexec(limits: Limits, isolate: bool):
    def setup() -> None:
        import resource

        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        memory = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        size = limits.max_file_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if isolate:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.unshare(CLONE_NEWNET)  # best effort: without it the audit hook still refuses sockets
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))

    return setup


def _world_executable(path: str) -> bool:
    """Whether a user with no rights of its own (``nobody``) can run ``path``: every directory on the way must be
    world-searchable (a pyenv under /root, mode 700, is not)."""
    real = Path(os.path.realpath(path))
    return all(os.stat(p).st_mode & 0o001 for p in [*real.parents, real])


def sandbox_python() -> tuple[str, bool]:
    """The interpreter for sandboxed code and whether it can run as ``nobody``. Only the standard library is needed,
    so the system python serves when ours sits in a private directory."""
    if os.geteuid() != 0:
        return sys.executable, False
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate) and _world_executable(candidate):
            return candidate, True
    return sys.executable, False


def run_tests(code: str, tests: list[str], limits: Limits = Limits()) -> Verdict:
    """Run ``code`` then each test snippet (plain asserts) in a fresh sandbox; returns the verdict."""
    python, isolate = sandbox_python()
    work = Path(tempfile.mkdtemp(prefix="grpo-sandbox-"))
    try:
        (work / "job.json").write_text(json.dumps({"code": code, "tests": tests}))
        (work / "runner.py").write_text(RUNNER)
        if isolate:
            os.chown(work, NOBODY, NOBODY)
            for f in work.iterdir():
                os.chown(f, NOBODY, NOBODY)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
        process = subprocess.Popen(
            [python, "-I", "runner.py"],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=_preexec(limits, isolate),
        )
        try:
            out, err = process.communicate(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.communicate()
            return Verdict(0, len(tests), "timeout", f"over {limits.wall_seconds:g} s")
        finally:
            _kill_group(process.pid)  # anything it left behind in its group goes too
        text = out.decode("utf-8", "replace")
        if process.returncode in (-signal.SIGXCPU, -signal.SIGKILL) and "@@RESULT@@" not in text:
            return Verdict(0, len(tests), "timeout", f"over {limits.cpu_seconds} CPU seconds")
        if "@@RESULT@@" not in text:
            return Verdict(0, len(tests), "crashed", err.decode("utf-8", "replace")[-500:])
        result = json.loads(text.rsplit("@@RESULT@@", 1)[1])
        return Verdict(result["passed"], result["total"], result["status"], "; ".join(result["errors"])[:500])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_many(jobs: list[tuple[str, list[str]]], limits: Limits = Limits(), workers: int | None = None) -> list[Verdict]:
    """Run several solutions in parallel with a bounded pool (one group's completions at once)."""
    workers = workers or max(1, min(8, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: run_tests(job[0], job[1], limits), jobs))
