"""What a sandbox is made of and whether this machine can make one: the limits and verdict types, the interpreter the
candidate runs with, and bubblewrap's command line (namespaces, read-only binds, the tmpfs, the seccomp filter). The
sandbox itself, and the probe that starts one for real, are in :mod:`trainer.scoring.sandbox`."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ALLOW_UNISOLATED_ENV = "GRPO_STUDIO_ALLOW_UNISOLATED_CODE"
NOBODY = 65534
HOW_TO_ENABLE = (
    "in Docker, start the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined "
    "(the default profiles block the user namespaces and mounts a sandbox needs; a seccomp profile that allows "
    "unshare and clone with CLONE_NEWUSER works too); on a host, allow unprivileged user namespaces "
    "(sysctl user.max_user_namespaces=15000 and, on Ubuntu 24.04, kernel.apparmor_restrict_unprivileged_userns=0)"
)


@dataclass(frozen=True)
class Limits:
    """What one sandboxed solution may use."""

    wall_seconds: float = 5.0  # the whole job: start, the module's code and every test
    test_seconds: float = 2.0  # one test's calls
    cpu_seconds: int = 5
    memory_mb: int = 512  # per process (RLIMIT_AS); see SECURITY.md for what that means for a whole job
    max_processes: int = 8
    max_file_mb: int = 16
    tmpfs_mb: int = 64  # all of /tmp, the job's only writable place
    open_files: int = 64
    max_reply_kb: int = 1024  # one answer, encoded


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


class SandboxUnavailable(RuntimeError):
    """Model-written code can't be isolated here and the operator has not accepted running it unisolated."""


def unisolated_allowed() -> bool:
    """Whether the operator accepted running model-written code without isolation (``--allow-unisolated-code``,
    which sets GRPO_STUDIO_ALLOW_UNISOLATED_CODE=1 for the server and the workers it starts)."""
    return os.environ.get(ALLOW_UNISOLATED_ENV, "").strip().lower() in ("1", "true", "yes")


def _bwrap() -> str | None:
    return shutil.which("bwrap")


def _readable_by_anyone(path: str, executable: bool = False) -> bool:
    """Whether ``nobody`` can read (and run) ``path``: every directory above it must be world-searchable (a pyenv
    under /root, mode 700, is not)."""
    real = Path(os.path.realpath(path))
    wanted = stat.S_IROTH | (stat.S_IXOTH if executable or real.is_dir() else 0)
    return os.stat(real).st_mode & wanted == wanted and all(os.stat(p).st_mode & stat.S_IXOTH for p in real.parents)


@lru_cache(maxsize=1)
def _interpreter() -> tuple[str, str]:
    """The Python that runs candidates, and its installation directory. Only the standard library is needed, so the
    system's Python serves when ours sits where ``nobody`` can't read it (a root-owned pyenv)."""
    ours = (os.path.realpath(getattr(sys, "_base_executable", sys.executable)), os.path.realpath(sys.base_prefix))
    for python, prefix in (ours, (os.path.realpath("/usr/bin/python3"), "/usr")):
        if os.path.isfile(python) and (
            os.geteuid() != 0 or (_readable_by_anyone(python, executable=True) and _readable_by_anyone(prefix))
        ):
            return python, prefix
    raise SandboxUnavailable(
        f"no Python that the sandbox's user (nobody) can read: {ours[0]} sits in a private directory and there is no "
        "/usr/bin/python3 (install python3, or run grpo-studio as an ordinary user)"
    )


def _bwrap_argv(bwrap: str, limits: Limits, python: str, prefix: str, seccomp_fd: int) -> list[str]:
    mounts = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):  # merged-/usr symlinks, or real directories
        if os.path.islink(top):
            mounts += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            mounts += ["--ro-bind", top, top]
    mounts += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    if not (prefix + "/").startswith("/usr/"):
        mounts += ["--ro-bind", prefix, prefix]
    if not python.startswith(prefix + "/") and not python.startswith("/usr/"):
        mounts += ["--ro-bind", python, python]
    return [
        bwrap,
        # --unshare-all only *tries* a user namespace; without one there is no isolation, so it must fail instead.
        "--unshare-all", "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY),
        "--die-with-parent", "--new-session",
        "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", "/tmp",
        *mounts,
        "--size", str(limits.tmpfs_mb * 2**20), "--tmpfs", "/tmp",
        # /dev is three harmless devices on a tiny tmpfs (bwrap's --dev tmpfs has no size limit and a writable shm).
        "--size", str(2**16), "--tmpfs", "/dev",
        "--dev-bind", "/dev/null", "/dev/null", "--dev-bind", "/dev/zero", "/dev/zero",
        "--dev-bind", "/dev/urandom", "/dev/urandom",
        "--remount-ro", "/dev", "--remount-ro", "/",
        "--chdir", "/tmp",
        "--seccomp", str(seccomp_fd),
        "--",
    ]  # fmt: skip
