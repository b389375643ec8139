"""A failed run's error is the sentence a user needs first, and the traceback is one ``grpo-studio logs RUN_ID``
away (issue 23, item 6)."""

from __future__ import annotations

from pathlib import Path

from app.cli.main import main
from storage import queries
from storage.db import get_sessionmaker
from storage.models import RunStatus
from trainer.job.checkpoints import ResumeError
from trainer.job.diskspace import DiskFullError
from trainer.job.worker import failure_sentence
from trainer.supervise.run_files import RunFiles


def test_known_failures_are_their_sentence_and_others_point_at_the_log(tmp_path):
    files = RunFiles(tmp_path)
    assert failure_sentence(ResumeError("no intact checkpoint to resume from: x"), files, 7) == (
        "no intact checkpoint to resume from: x"
    )
    assert failure_sentence(DiskFullError("disk full: 3 MB free in /d"), files, 7) == "disk full: 3 MB free in /d"
    assert failure_sentence(KeyError("reward"), files, 7) == (
        "KeyError: 'reward' (the traceback is in the run's log: grpo-studio logs 7)"
    )
    gone = RunFiles(tmp_path / "deleted")
    sentence = failure_sentence(FileNotFoundError(2, "No such file or directory"), gone, 7)
    assert sentence == (
        f"the run directory {gone.root} was deleted while the run trained, with its checkpoints: start the run "
        "again as a new run"
    )


def test_logs_prints_the_runs_lines_with_the_traceback_and_follow_stops_when_it_has_ended(capsys):
    with get_sessionmaker().begin() as s:
        run = queries.create_run(s, "r", {}, 2)
        queries.add_log(s, run.id, "model path: plain transformers")
        queries.add_log(s, run.id, 'failed: KeyError: x\nTraceback (most recent call last):\n  File "w.py"', "ERROR")
        queries.finish_run(s, run, RunStatus.FAILED, "KeyError: x")
        run_id = run.id
    assert main(["logs", str(run_id), "--follow"]) == 0  # returns: the run has ended
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("INFO    model path: plain transformers")
    assert out[1].endswith("ERROR   failed: KeyError: x") and out[2] == "Traceback (most recent call last):"
    assert main(["logs", "999"]) == 2


def test_a_checkpoint_estimate_is_the_adapter_and_adams_moments_not_a_flat_64_mb():
    """Issue 23, item 5: trainable weights x 3 (adapter, exp_avg, exp_avg_sq) plus the small files, with margins; the
    frozen base weights count for nothing."""
    import torch

    from trainer.job.diskspace import MARGIN_BYTES, SIZE_MARGIN, SMALL_FILES_BYTES, checkpoint_estimate, checkpoint_fits

    model = torch.nn.Sequential(torch.nn.Linear(1000, 1000), torch.nn.Linear(100, 10))
    model[0].requires_grad_(False)  # the base: 4 MB that no checkpoint of a LoRA run holds
    trainable = (100 * 10 + 10) * 4
    assert checkpoint_estimate(model) == 3 * trainable + SMALL_FILES_BYTES
    fits, needed = checkpoint_fits(Path("/"), None, checkpoint_estimate(model))
    assert needed == int((3 * trainable + SMALL_FILES_BYTES) * SIZE_MARGIN) + MARGIN_BYTES
    assert needed < 6 << 20  # the tiny model's 0.6 MB checkpoints fit on the 24 MB disk of the issue
