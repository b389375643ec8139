"""A damaged checkpoint is found before a resume uses it (issue 23, item 3): files checked by format without
loading them, the newest intact checkpoint chosen with the reason logged, and one sentence when none is left. The
real truncated checkpoint under a resuming worker: tests/runs/test_faults.py."""

from __future__ import annotations

import json
import zipfile

import pytest

from storage import queries
from storage.db import get_sessionmaker
from trainer.job.checkpoint_check import checkpoint_problem, file_problem
from trainer.job.checkpoints import ResumeError, prepare_resume
from trainer.supervise.run_files import RunFiles


def _checkpoint(root, step: int):
    import torch  # here, not at collection (seconds before the suite's first test)
    from safetensors.torch import save_file

    path = RunFiles(root).checkpoints / f"checkpoint-{step}"
    path.mkdir(parents=True)
    save_file({"lora_A": torch.ones(4, 8), "lora_B": torch.zeros(8, 4)}, path / "adapter_model.safetensors")
    (path / "adapter_config.json").write_text("{}")
    torch.save({"state": {0: torch.ones(32)}}, path / "optimizer.pt")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


def _truncate(path, keep: int | None = None) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 if keep is None else keep])


def test_whole_files_pass_and_cut_ones_say_what_is_wrong(tmp_path):
    checkpoint = _checkpoint(tmp_path, 3)
    assert checkpoint_problem(checkpoint) is None
    weights = checkpoint / "adapter_model.safetensors"
    size = weights.stat().st_size
    _truncate(weights, size - 10)
    assert file_problem(weights) == f"adapter_model.safetensors is cut short ({size - 10} of {size} bytes)"
    _truncate(weights, 5)
    assert file_problem(weights) == "adapter_model.safetensors is cut short (5 bytes)"
    optimizer = checkpoint / "optimizer.pt"
    assert zipfile.is_zipfile(optimizer) and file_problem(optimizer) is None
    _truncate(optimizer)
    assert file_problem(optimizer) == "optimizer.pt is cut short or not a torch file"
    (checkpoint / "trainer_state.json").write_text("{")
    assert file_problem(checkpoint / "trainer_state.json").startswith("trainer_state.json can't be read")


def test_resume_falls_back_to_the_newest_intact_checkpoint_saying_which_and_why(tmp_path):
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "r", {}, 6).id
        for step in range(1, 7):
            queries.add_metric_rows(s, queries.metric_rows(run_id, step, {"reward": 1.0}, 1.0))
    for step in (2, 4, 6):
        _checkpoint(tmp_path, step)
    _truncate(RunFiles(tmp_path).checkpoints / "checkpoint-6" / "adapter_model.safetensors")
    lines = []
    chosen = prepare_resume(RunFiles(tmp_path), run_id, lines.append)
    assert chosen.name == "checkpoint-4"
    assert lines[0].startswith("resuming from checkpoint-4, the newest intact checkpoint: damaged checkpoint-6 ")
    assert "adapter_model.safetensors is cut short" in lines[0]
    assert [p.name for p in RunFiles(tmp_path).complete_checkpoints()] == ["checkpoint-2", "checkpoint-4"]
    assert (RunFiles(tmp_path).checkpoints / "checkpoint-6.damaged").is_dir()  # kept, out of the way
    # step 6 saved again by the resumed run and damaged again: set aside beside the first copy
    _truncate(_checkpoint(tmp_path, 6) / "optimizer.pt")
    assert prepare_resume(RunFiles(tmp_path), run_id, lines.append).name == "checkpoint-4"
    assert (RunFiles(tmp_path).checkpoints / "checkpoint-6.damaged.2").is_dir()
    with get_sessionmaker().begin() as s:
        assert [p.step for p in queries.metric_series(s, run_id, "reward")] == [1, 2, 3, 4]


def test_with_no_intact_checkpoint_resume_fails_in_one_sentence(tmp_path):
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "r", {}, 6).id
    for step in (2, 4):
        _truncate(_checkpoint(tmp_path, step) / "optimizer.pt")
    with pytest.raises(ResumeError) as raised:
        prepare_resume(RunFiles(tmp_path), run_id, lambda line: None)
    message = str(raised.value)
    assert message.startswith("no intact checkpoint to resume from: checkpoint-4 (optimizer.pt is cut short")
    assert "checkpoint-2 (" in message and "\n" not in message and message.endswith("start the run again as a new run")


def test_rows_an_earlier_worker_could_not_write_are_replayed_up_to_the_resume_step(tmp_path):
    """A worker whose grace ran out left pending-writes.jsonl; the resume writes its rows of steps up to the
    checkpoint (later ones are trained again) and its log lines, once."""
    from trainer.job.db_writer import DbWriter
    from trainer.job.held_rows import set_aside

    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "r", {}, 6).id
    files = RunFiles(tmp_path)
    for step in (2, 4):
        _checkpoint(tmp_path, step)
    lines = [
        json.dumps(["metrics", queries.metric_rows(run_id, step, {"reward": step / 10}, 1.0)]) for step in (3, 4, 5)
    ]
    files.pending_writes.write_text("\n".join(lines + [json.dumps(["log", ["held line", "INFO"]])]) + "\n")
    set_aside(files.pending_writes, files.previous_pending_writes)
    writer = DbWriter(run_id, flush_interval=0.05, spill_path=files.pending_writes)
    said = []
    assert prepare_resume(files, run_id, said.append, writer=writer).name == "checkpoint-4"
    writer.close()
    with get_sessionmaker().begin() as s:
        assert [(p.step, p.value) for p in queries.metric_series(s, run_id, "reward")] == [(3, 0.3), (4, 0.4)]
        assert [line.message for line in queries.log_tail(s, run_id)] == ["held line"]
    assert "wrote 2 rows an earlier worker of this run could not" in said[0]
    assert not files.previous_pending_writes.exists()
