"""A run's directory (trainer.supervise.run_files) and the life-cycle verbs the launcher, the Runs page and the worker use
(storage.queries): requeue, drop what an interrupted attempt logged, the stored status."""

from __future__ import annotations

import zipfile

import pytest
from sqlalchemy import text
from sqlalchemy.exc import StatementError

from storage import queries
from storage.db import get_sessionmaker
from storage.models import Run, RunStatus
from trainer.export.adapter import zip_adapter
from trainer.supervise.run_files import RunFiles


def _checkpoint(files: RunFiles, step: int, *, adapter: bool = True, complete: bool = True) -> None:
    d = files.checkpoints / f"checkpoint-{step}"
    d.mkdir(parents=True)
    if adapter:
        (d / "adapter_config.json").write_text("{}")
    if complete:
        (d / "trainer_state.json").write_text("{}")


def test_saved_adapters_are_final_then_each_checkpoint_in_step_order(tmp_path):
    files = RunFiles(tmp_path)
    assert files.saved_adapters() == {}
    for step in (10, 2):  # step 10 sorts after step 2, not before it as text would
        _checkpoint(files, step)
    _checkpoint(files, 4, adapter=False)  # a checkpoint without an adapter offers nothing to compare
    files.adapter.mkdir()
    (files.adapter / "adapter_config.json").write_text("{}")
    assert files.saved_adapters() == {
        "final": files.adapter,
        "step 2": files.checkpoints / "checkpoint-2",
        "step 10": files.checkpoints / "checkpoint-10",
    }


def test_log_tail_is_the_last_lines_and_empty_without_a_log(tmp_path):
    files = RunFiles(tmp_path)
    assert files.log_tail() == ""
    files.log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert files.log_tail(3) == "line 97\nline 98\nline 99"


def test_the_adapter_zip_holds_the_adapter_files(tmp_path):
    files = RunFiles(tmp_path / "run")
    files.adapter.mkdir(parents=True)
    (files.adapter / "adapter_config.json").write_text("{}")
    archive = zip_adapter(files.adapter, tmp_path / "out")
    assert archive == tmp_path / "out.zip"
    assert zipfile.ZipFile(archive).namelist() == ["adapter_config.json"]


def test_status_is_stored_as_its_plain_string_and_read_back_as_a_member():
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "r", {}).id
    with get_sessionmaker().begin() as s:
        assert s.execute(text("select status from runs where id = :id"), {"id": run_id}).scalar() == "queued"
        assert queries.get_run(s, run_id).status is RunStatus.QUEUED
    with pytest.raises(StatementError, match="not among the defined enum values"), get_sessionmaker().begin() as s:
        s.add(Run(name="bad", config={}, status="paused"))


def test_requeue_clears_the_previous_attempt():
    with get_sessionmaker().begin() as s:
        run = queries.create_run(s, "r", {})
        queries.worker_launched(s, run, 4242, "99", "/tmp/run")
        queries.mark_running(s, run, 4242, "/tmp/run", "99")
        queries.finish_run(s, run, RunStatus.FAILED, "boom")
        assert run.status.resumable
        queries.requeue_run(s, run)
        assert (run.status, run.pid, run.pid_started, run.error, run.finished_at) == (
            RunStatus.QUEUED,
            None,
            None,
            None,
            None,
        )
        assert run.output_dir == "/tmp/run" and run.started_at is not None  # the resume continues in the same place


def test_drop_steps_after_removes_what_an_interrupted_attempt_logged_after_the_checkpoint():
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "r", {}).id
        for step in range(1, 6):
            queries.add_metric_rows(s, queries.metric_rows(run_id, step, {"reward": step / 10}, 0.0))
            queries.add_sample_rows(
                s, [{"run_id": run_id, "step": step, "prompt": "p", "completion": "c", "rewards": {}}]
            )
        queries.set_progress(s, run_id, 5)
    with get_sessionmaker().begin() as s:
        queries.drop_steps_after(s, run_id, 3)
    with get_sessionmaker().begin() as s:
        assert [p.step for p in queries.metric_series(s, run_id, "reward")] == [1, 2, 3]
        assert queries.sample_steps(s, run_id) == [1, 2, 3]
        assert queries.get_run(s, run_id).current_step == 3


def test_an_exported_adapter_names_its_base_portably_and_says_what_it_is(tmp_path):
    """PEFT records the base by the local path it loaded (the built-in model's directory); the shared copy names it
    as the config does, and its card gives base, data set, rewards with weights, GRPO settings and held-out."""
    import json

    from tests.helpers import create_run, tiny_config
    from trainer.export.adapter import shareable_adapter

    config = tiny_config(reward_funcs=["correctness", "int"], reward_weights=[2.0, 0.5])
    run_id = create_run(config)
    with get_sessionmaker().begin() as s:
        queries.add_metric_rows(s, queries.metric_rows(run_id, 0, {"heldout/correct": 0.755}, 1.0))
        queries.add_metric_rows(s, queries.metric_rows(run_id, 10, {"heldout/correct": 0.98}, 2.0))
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    local = str(tmp_path / "models" / "tiny-96-3-4")
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": local, "r": 8}))
    (adapter / "README.md").write_text("---\nbase_model: " + local + "\n---\n# Model Card for Model ID\n")
    shared = shareable_adapter(run_id, config, adapter, tmp_path / "shared")
    settings = json.loads((shared / "adapter_config.json").read_text())
    assert settings == {"base_model_name_or_path": "builtin:tiny", "r": 8}
    card = (shared / "README.md").read_text()
    assert local not in card and "Model Card for Model ID" not in card
    for expected in (
        "base model: `builtin:tiny`",
        "data set: `builtin:arithmetic`",
        "correctness × 2, int × 0.5",
        f"{config.num_generations} completions per prompt, KL weight β {config.beta:g}",
        "75.5% → 98.0% greedy correctness (step 0 → 10)",
        "grpo-studio 0.1.0",
    ):
        assert expected in card, expected
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == local  # untouched
