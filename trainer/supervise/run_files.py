"""A run's directory, in one place. Every other module asks a :class:`RunFiles` where a run's things are::

    runs/<id>-<random>/            the run's root (Run.output_dir); the worker's working directory too
        worker.log                 the worker process's stdout and stderr (the launcher opens it)
        checkpoints/checkpoint-N/  TRL's checkpoints; trainer_state.json is written last, so a checkpoint without
                                   it was cut short by a kill and can't be resumed from
        adapter/                   the LoRA adapter saved when the run completes or stops
        slurm-job.sh               the batch script of a run on the Slurm executor (trainer.supervise.slurm)
        .shared-marker             a token the dashboard writes for the job to find (is the data dir shared?)
        .shared-seen               written by the job's worker when it found it
        vllm-server.log            the output of the run's vLLM server (vllm_mode server, trainer.supervise.vllm_server)
        pending-writes.jsonl       rows the worker holds while the database does not answer (trainer.job.held_rows)
        pending-writes.previous.jsonl   what an earlier worker of the run could not write; replayed on resume

Paths and file operations only: no database access and no torch (the dashboard imports this at start-up).
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from storage.db import data_dir

# transformers' PREFIX_CHECKPOINT_DIR, written out: importing transformers here would put torch in the dashboard.
CHECKPOINT_PREFIX = "checkpoint-"


class InRun:
    """A path under a run's root, named once: a read-only attribute of :class:`RunFiles`."""

    def __init__(self, name: str, doc: str) -> None:
        self.name, self.__doc__ = name, doc

    def __get__(self, files: RunFiles | None, owner: type | None = None) -> Path:
        return self if files is None else files.root / self.name  # type: ignore[return-value]


@dataclass(frozen=True)
class RunFiles:
    """Where one run's log, checkpoints and adapter live, under ``root``."""

    root: Path

    @classmethod
    def new(cls, run_id: int) -> RunFiles:
        """A new directory for a run: ``runs/<id>-<random>`` under the data dir. The suffix keeps two databases that
        share a data dir (``$DATABASE_URL`` elsewhere) from resuming each other's checkpoints. Not created yet."""
        return cls(data_dir() / "runs" / f"{run_id}-{secrets.token_hex(4)}")

    @classmethod
    def of(cls, output_dir: str | Path | None, run_id: int) -> RunFiles:
        """The run's directory as recorded on its row, or a new one when none is recorded yet."""
        return cls(Path(output_dir)) if output_dir else cls.new(run_id)

    # The module docstring's tree, one path each; ``RunFiles(root).log`` is ``root / "worker.log"``.
    log = InRun("worker.log", "The worker process's output.")
    checkpoints = InRun("checkpoints", "TRL's output directory: it saves ``checkpoint-N`` directories here.")
    adapter = InRun("adapter", "The final LoRA adapter.")
    slurm_script = InRun("slurm-job.sh", "The Slurm job script (readable: the same job can be submitted by hand).")
    shared_marker = InRun(".shared-marker", "The dashboard's token for the Slurm job to find.")
    node_marker = InRun(".shared-seen", "The job's answer: it found the token, so the data dir is shared.")
    vllm_log = InRun("vllm-server.log", "The output of the run's vLLM server.")
    pending_writes = InRun("pending-writes.jsonl", "Rows held while the database does not answer.")
    previous_pending_writes = InRun("pending-writes.previous.jsonl", "An earlier worker's unwritten rows.")

    def create(self) -> RunFiles:
        """Make the root directory (and its parents) if missing; returns self."""
        self.root.mkdir(parents=True, exist_ok=True)
        return self

    def checkpoint_dirs(self) -> list[Path]:
        """Every ``checkpoint-N`` directory, complete or not, in step order."""
        if not self.checkpoints.is_dir():
            return []
        found = [p for p in self.checkpoints.glob(CHECKPOINT_PREFIX + "*") if p.name.split("-")[-1].isdigit()]
        return sorted(found, key=checkpoint_step)

    def complete_checkpoints(self) -> list[Path]:
        """The checkpoints that can be resumed (or forked) from, in step order. One a killed worker left without
        ``trainer_state.json`` is skipped (and removed by :meth:`prune_partial_checkpoints`)."""
        return [p for p in self.checkpoint_dirs() if (p / "trainer_state.json").is_file()]

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint, or None."""
        complete = self.complete_checkpoints()
        return complete[-1] if complete else None

    def prune_partial_checkpoints(self) -> list[str]:
        """Delete checkpoint directories that a killed worker left half-written; returns their names."""
        removed = []
        for p in self.checkpoint_dirs():
            if not (p / "trainer_state.json").is_file():
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p.name)
        return removed

    def saved_adapters(self) -> dict[str, Path]:
        """The adapters the run has saved, by the names the dashboard and CLI use: "final" (the adapter directory)
        and "step N" for each checkpoint that holds one."""
        found = {}
        if (self.adapter / "adapter_config.json").is_file():
            found["final"] = self.adapter
        for p in self.checkpoint_dirs():
            if (p / "adapter_config.json").is_file():
                found[f"step {checkpoint_step(p)}"] = p
        return found

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the worker log ("" when there is none); reads at most its last 64 KiB."""
        if not self.log.is_file():
            return ""
        with open(self.log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - 64 * 1024, 0))
            text = f.read().decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def remove(self) -> None:
        """Delete the directory with everything in it (the run is being deleted)."""
        shutil.rmtree(self.root, ignore_errors=True)


def checkpoint_step(checkpoint: Path) -> int:
    """The step a ``checkpoint-N`` directory was saved at."""
    return int(checkpoint.name.split("-")[-1])
