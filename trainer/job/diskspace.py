"""A full disk must end a run as "failed: disk full", never leave it "running" with a cut log.

Two parts:

- before each checkpoint, the worker checks the free space of the run directory against what a checkpoint of this
  run will hold and stops training cleanly when it would not fit, with "disk full: N MB free in DIR". Before the
  first checkpoint that is estimated from the model (issue 23, item 5: a flat 64 MB refused 0.6 MB checkpoints on a
  24 MB disk): the trainable weights (the adapter), AdamW's two moment buffers of the same size, and the tokenizer
  (Trainer saves it in every checkpoint), with a margin; after it, the larger of that and the last checkpoint's
  real size;
- a small reserve file, written when the worker starts, is deleted before the worker writes its final status, so
  that SQLite has room for that last transaction (and the log for its last lines) even when the disk filled up
  under the worker for some other reason.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

RESERVE_BYTES = 8 << 20  # room for the final status transaction, its WAL pages and the last log lines
MARGIN_BYTES = 4 << 20  # kept free beyond a checkpoint: SQLite's WAL (up to ~4 MB before it checkpoints), the logs
SIZE_MARGIN = 1.25  # on the checkpoint's own size: JSON states, scheduler and RNG files, file-system blocks
SMALL_FILES_BYTES = 1 << 20  # trainer_state.json, scheduler.pt, rng_state.pth, training_args.bin, configs
RESERVE_NAME = ".disk-reserve"


class DiskFullError(OSError):
    """Training stopped because the run's disk is (nearly) full; the message is the run's error."""


def free_bytes(path: Path) -> int:
    """Bytes available to this user on the file system holding ``path``."""
    return shutil.disk_usage(path).free


def full_message(directory: Path, needed: int | None = None) -> str:
    """The run's error for a full disk: how much is free, where, and what to do."""
    free = free_bytes(directory) if directory.exists() else 0
    need = f"; the next checkpoint needs about {needed / 1e6:.0f} MB" if needed else ""
    return f"disk full: {free / 1e6:.0f} MB free in {directory}{need}. Free some space, then resume the run."


def is_disk_full(exc: BaseException) -> bool:
    """Whether an exception (or one it was raised from) says the disk is full: ENOSPC/EDQUOT, SQLite's "database or
    disk is full", or torch's failed write of a checkpoint."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFullError):
            return True
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(exc).lower()
        if "disk is full" in text or "no space left" in text or "file write failed" in text:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def directory_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def checkpoint_estimate(model, tokenizer=None) -> int:
    """Bytes a checkpoint of this run will hold, from the model: the trainable weights once (the adapter) and twice
    more for AdamW's ``exp_avg`` and ``exp_avg_sq`` (same shapes and dtype), the tokenizer's files, the small ones."""
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return 3 * trainable + tokenizer_bytes(tokenizer) + SMALL_FILES_BYTES


def tokenizer_bytes(tokenizer) -> int:
    """About what ``save_pretrained`` writes for a tokenizer: a fast tokenizer's tokenizer.json (the bulk of it)."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(
        getattr(tokenizer, "tokenizer", None), "backend_tokenizer", None
    )
    try:
        return len(backend.to_str().encode()) if backend is not None else 0
    except Exception:  # noqa: BLE001 - an estimate: a tokenizer that can't say is counted in the margin
        return 0


def checkpoint_fits(output_dir: Path, last_checkpoint: Path | None, estimate: int = 0) -> tuple[bool, int]:
    """Whether the next checkpoint fits on the run's disk, and the bytes it is expected to need: the larger of the
    ``estimate`` (:func:`checkpoint_estimate`) and the last checkpoint's size, with the margins."""
    size = max(estimate, directory_bytes(last_checkpoint) if last_checkpoint else 0)
    needed = int(size * SIZE_MARGIN) + MARGIN_BYTES
    return free_bytes(output_dir) >= needed, needed


class DiskReserve:
    """A file of ``RESERVE_BYTES`` in the run directory, given back just before the final status is written."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / RESERVE_NAME
        try:
            with open(self.path, "wb") as f:
                # real blocks, not a sparse file: zeros written out
                chunk = b"\0" * (1 << 20)
                for _ in range(RESERVE_BYTES // len(chunk)):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
        except OSError:  # already too full for the reserve: nothing to give back later
            self.release()

    def release(self) -> None:
        """Delete the reserve file (idempotent)."""
        try:
            self.path.unlink()
        except OSError:
            pass


class RunDirectoryGone(FileNotFoundError):
    """The run directory was deleted under the running worker; the message is the run's error."""


def gone_message(directory: Path) -> str:
    """The run's error when its directory was deleted while it trained."""
    return (
        f"the run directory {directory} was deleted while the run trained, with its checkpoints: start the run again "
        "as a new run"
    )


def directory_identity(directory: Path) -> tuple[int, int] | None:
    """(device, inode) of a directory, or None when it is gone: a directory deleted and made again by a later write
    (transformers creates the checkpoint path it saves to) is not the run's directory any more."""
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def make_disk_guard(output_dir: Path, last_checkpoint):
    """A TrainerCallback that, when the trainer is about to save a checkpoint that would not fit, skips the save and
    stops training; its ``problem`` then holds the run's error. ``last_checkpoint()`` gives the newest checkpoint.
    It also stops a run whose directory was deleted under it (``gone`` set): one stat per step."""
    from transformers import TrainerCallback

    identity = directory_identity(output_dir)

    class DiskGuard(TrainerCallback):
        problem: str | None = None
        gone = False
        estimate: int | None = None  # of one checkpoint, from the model: computed at the first save

        def on_step_end(self, args, state, control, **kwargs):
            if directory_identity(output_dir) != identity:
                self.problem, self.gone = gone_message(output_dir), True
                control.should_save = False
                control.should_training_stop = True
                return control
            # DefaultFlowCallback, registered before this one, has just decided whether this step saves
            if control.should_save:
                if self.estimate is None:
                    model = kwargs.get("model")
                    tokenizer = kwargs.get("processing_class")
                    self.estimate = checkpoint_estimate(model, tokenizer) if model is not None else 0
                fits, needed = checkpoint_fits(output_dir, last_checkpoint(), self.estimate)
                if not fits:
                    self.problem = full_message(output_dir, needed)
                    control.should_save = False
                    control.should_training_stop = True
            return control

    return DiskGuard()
