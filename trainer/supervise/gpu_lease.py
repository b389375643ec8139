"""One lease per GPU across every process grpo-studio starts (issue 26, item 4).

The dashboard's scheduler frees the Compare panel's model before it starts a worker, but nothing else was
coordinated: a CLI worker, an evaluation job, a probe or a second dashboard could each load onto a GPU that another
one holds, and two vLLM engines at a 0.6 share each refuse to start (vllm 0.32 v1/worker/utils.py:761-770). So every
process that puts a model on a GPU first takes that GPU's lease: an exclusive ``fcntl.flock`` on a file under the data
dir, ``gpu-leases/<host>-gpu<id>.lock``, whose contents name the holder (pid, what, since). A second user waits for a
bounded time (a worker, an evaluation job, a probe) or is refused at once (the dashboard's panel), and either way is
told in one sentence who holds the GPU.

Why flock: the kernel drops the lock when the holder's last file descriptor closes, however the process ended, so a
dead holder never keeps the lease (the stale-holder case needs no clean-up code). A process forked from the holder
(vLLM's engine core, say) inherits the descriptor and keeps the lease while it lives, which is right: it holds the
GPU memory. Descriptors are opened close-on-exec, so a program the holder *executes* does not inherit it.

The lease is taken on the GPU path only (its callers check that the model goes on CUDA): a CPU run takes none, so
nothing changes for it. The host name is in the file name because a Slurm cluster shares one data dir between nodes, and a Slurm job's id
too, because Slurm gives each job GPUs of its own (and may call them 0 in every job).
Where the file system cannot lock (some network mounts), the lease is skipped with a warning: not coordinating is
better than refusing every GPU user.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainer.supervise.processes import process_exists

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

LEASE_DIR = "gpu-leases"
WAIT_ENV = "GRPO_STUDIO_GPU_WAIT_S"
# How long a background user (a worker, an evaluation job, a probe) waits for a busy GPU by default: long enough for
# a Compare request or a probe to finish, short enough that a forgotten holder fails the run with its name.
DEFAULT_WAIT_S = 600.0


class GpuBusy(RuntimeError):
    """The GPU's lease is held by another process; the message names it in one sentence."""


@dataclass(frozen=True)
class Holder:
    """Who holds a GPU's lease, as its lock file says."""

    pid: int
    what: str
    since: float

    def describe(self) -> str:
        """E.g. "pid 4242 (run 7's worker) since 10:02:11"."""
        when = time.strftime("%H:%M:%S", time.localtime(self.since))
        if self.pid <= 0:
            return f"another process (since {when})"
        alive = "" if process_exists(self.pid) else "; that process has exited, so a process it started still holds it"
        return f"pid {self.pid} ({self.what}) since {when}{alive}"


def default_wait() -> float:
    """Seconds a background GPU user waits for the lease: ``GRPO_STUDIO_GPU_WAIT_S``, else :data:`DEFAULT_WAIT_S`."""
    try:
        return float(os.environ.get(WAIT_ENV, DEFAULT_WAIT_S))
    except ValueError:
        return DEFAULT_WAIT_S


def physical_gpu(index: int = 0) -> str:
    """The GPU that device ``index`` of this process is: the index-th entry of ``CUDA_VISIBLE_DEVICES`` when that
    is set (a vLLM server and its trainer see different GPUs as device 0), else ``index`` itself."""
    visible = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return visible[index] if index < len(visible) else str(index)


def lease_path(gpu: str, root: Path | None = None) -> Path:
    """The lock file of GPU ``gpu`` on this host, under the data dir (or ``root``)."""
    if root is None:
        from storage.db import data_dir

        root = data_dir()
    # Inside a Slurm job the GPUs are the job's own (Slurm allocated them, and may number them from 0 in every job):
    # its processes coordinate among themselves, never with another job's.
    job = os.environ.get("SLURM_JOB_ID")
    name = f"{socket.gethostname()}-{f'slurm{job}-' if job else ''}gpu{gpu}"
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in name)
    return Path(root) / LEASE_DIR / f"{safe}.lock"


# Leases this process holds: path -> [file descriptor, how many holders in this process]. flock locks belong to an
# open file description, so a second open() of the same file in this process would wait for itself.
_HELD: dict[Path, list[int]] = {}


def _read_holder(path: Path) -> Holder | None:
    try:
        data = json.loads(path.read_text() or "null")
        return Holder(int(data["pid"]), str(data["what"]), float(data["since"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None  # being written right now, or not ours


def holder(gpu: str = "0", root: Path | None = None) -> Holder | None:
    """Who else holds GPU ``gpu``'s lease right now; None when it is free or held by this process."""
    path = lease_path(gpu, root)
    if path in _HELD or not path.exists():
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder(path) or Holder(0, "another process", path.stat().st_mtime)
    except OSError:
        return None  # this file system cannot lock: nothing is coordinated
    else:
        return None
    finally:
        os.close(fd)


def busy_message(holder_: Holder, gpu: str) -> str:
    """The one sentence a refused or timed-out GPU user is told."""
    return (
        f"GPU {gpu} is in use by {holder_.describe()}; wait for it to finish or stop it "
        f"(its lease is {lease_path(gpu)})."
    )


class Lease:
    """A held GPU lease; :meth:`release` gives it back (also when used as a context manager)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def release(self) -> None:
        """Give the lease back (the last holder in this process closes the file, which unlocks it)."""
        if self.path is None or self.path not in _HELD:
            return
        entry = _HELD[self.path]
        entry[1] -= 1
        if entry[1] == 0:
            del _HELD[self.path]
            os.ftruncate(entry[0], 0)  # an empty file reads as "free" to anyone who looks without locking
            os.close(entry[0])
        self.path = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire(
    what: str,
    gpu: str = "0",
    *,
    wait_s: float = 0.0,
    root: Path | None = None,
    poll_s: float = 0.5,
    on_wait: Callable[[str], None] | None = None,
) -> Lease:
    """Take GPU ``gpu``'s lease for ``what`` ("run 7's worker"), waiting up to ``wait_s`` seconds while another
    process holds it (``on_wait`` is told once, with the holder's sentence); raises :class:`GpuBusy` after that."""
    path = lease_path(gpu, root)
    if path in _HELD:
        _HELD[path][1] += 1
        return Lease(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline, told = time.monotonic() + max(wait_s, 0.0), False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            sentence = busy_message(_read_holder(path) or Holder(0, "another process", time.time()), gpu)
            if time.monotonic() >= deadline:
                os.close(fd)
                raise GpuBusy(sentence) from None
            if on_wait is not None and not told:
                on_wait(f"waiting up to {wait_s:.0f} s for the GPU: {sentence}")
                told = True
            time.sleep(poll_s)
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EINVAL, errno.EOPNOTSUPP):
                os.close(fd)
                raise
            os.close(fd)
            log.warning("GPU lease skipped: %s cannot be locked (%s)", path, exc)
            return Lease(None)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": what, "since": time.time()}).encode(), 0)
    _HELD[path] = [fd, 1]
    return Lease(path)


@contextlib.contextmanager
def gpu_lease(what: str, gpu: str = "0", **kwargs) -> Iterator[Lease]:
    """:func:`acquire` as a context manager: the lease is given back on leaving the block."""
    lease = acquire(what, gpu, **kwargs)
    try:
        yield lease
    finally:
        lease.release()


def lease_for(device: str, what: str, on_wait: Callable[[str], None] | None = None, index: int = 0) -> Lease:
    """The lease of this process's GPU ``index`` when ``device`` is "cuda", waiting :func:`default_wait` seconds
    (the worker's, an evaluation job's and a probe's way in); a lease that holds nothing on any other device, so a
    CPU run is untouched."""
    if device != "cuda":
        return Lease(None)
    return acquire(what, physical_gpu(index), wait_s=default_wait(), on_wait=on_wait)


def gpu_visible() -> bool:
    """Whether an NVIDIA GPU is visible, judged without importing torch (the dashboard must start light)."""
    import glob
    import shutil

    return bool(glob.glob("/dev/nvidia[0-9]*")) or shutil.which("nvidia-smi") is not None


def gpu_busy(session: Session) -> str | None:
    """Why this machine's GPU can't take another model now, in one sentence, or None: a training run this data dir
    knows of holds it, or another process holds its lease (a CLI worker, an evaluation job, a probe, another
    dashboard). Always None without a visible GPU, so CPU machines are never told to wait."""
    # here, not at the top: the worker, the probe and the evaluation child import this module, and need no database
    from trainer.supervise.workers import active_runs

    if not gpu_visible():
        return None
    busy = active_runs(session)
    if busy:
        return (
            f"Run {busy[0].id} ({busy[0].name}) is training on the GPU right now; sampling here could run it "
            "out of memory. Try again when it has finished, or stop it."
        )
    gpu = physical_gpu(0)
    other = holder(gpu)
    return busy_message(other, gpu) if other else None
