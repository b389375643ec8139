"""Forking a run (trainer/supervise/fork.py): a new run from a checkpoint of the shared demo run, with other settings."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import run_row
from trainer.config.access import Access
from trainer.supervise.fork import ForkError, checkpoint_steps, fork_run, parse_settings
from trainer.supervise.run_files import RunFiles

pytestmark = pytest.mark.slow


def _tree_digest(root) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def _series(run_id: int, key: str) -> dict[int, float]:
    with get_sessionmaker().begin() as s:
        return {p.step: p.value for p in queries.metric_series(s, run_id, key)}


def _logits(base_path, adapter_dir):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_path), str(adapter_dir))
    ids = torch.tensor([[1, 5, 9, 14, 3, 7]])
    with torch.no_grad():
        return model(ids).logits


def test_fork_continues_from_the_parents_checkpoint_with_its_own_settings(trained_run, tiny_model_path):
    from trainer.job.worker import run_worker

    parent_id, config, _ = trained_run
    parent = run_row(parent_id)
    assert parent.status == "completed", parent.error
    assert checkpoint_steps(parent_id) == [3, 6]  # save_steps 3 of 6
    parent_files = RunFiles(Path(parent.output_dir))
    before = _tree_digest(parent_files.root)
    parent_metrics = _series(parent_id, "kl")

    fork_id = fork_run(parent_id, 3, parse_settings(["beta=0.2", "learning_rate=0.001", "max_steps=5"]))
    fork = run_row(fork_id)
    assert (fork.parent_run_id, fork.parent_step, fork.current_step, fork.total_steps) == (parent_id, 3, 3, 5)
    assert (fork.config["beta"], fork.config["learning_rate"]) == (0.2, 0.001)
    assert fork.config["lora_r"] == config.lora_r

    # step 0 of the fork is the parent's step 3: the same adapter, hence the same logits (and not the base's)
    start = RunFiles(Path(fork.output_dir)).complete_checkpoints()[0]
    assert start.name == "checkpoint-3"
    forked, original = _logits(tiny_model_path, start), _logits(tiny_model_path, parent_files.checkpoints / start.name)
    assert forked.equal(original)
    assert not forked.equal(_logits(tiny_model_path, parent_files.checkpoints / "checkpoint-6"))

    assert run_worker(fork_id) == "completed", run_row(fork_id).error
    kl = _series(fork_id, "kl")
    assert sorted(kl) == [4, 5]  # the parent's axis, from parent step + 1
    # the trainer started from the trained adapter: a fresh run's first KL is exactly 0, the fork's is not
    assert parent_metrics[1] == 0.0 and kl[4] > 0.0
    # the fork's own learning rate, not the one the checkpoint's scheduler carried (5e-3, cosine over 6 steps)
    assert max(_series(fork_id, "learning_rate").values()) <= 0.001 < _series(parent_id, "learning_rate")[4]
    with get_sessionmaker().begin() as s:
        assert "forked from run" in queries.log_tail(s, fork_id)[0].message

    # the parent is untouched: files, row and metrics
    assert _tree_digest(parent_files.root) == before
    assert run_row(parent_id).current_step == 6 and _series(parent_id, "kl") == parent_metrics


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["lora_r=4"], "lora_r can't change in a fork: the adapter's matrices have the parent's rank"),
        (["lora_target_modules=q_proj"], "lora_target_modules can't change in a fork"),
        (["model_name_or_path=other/model"], "model_name_or_path can't change in a fork"),
        (["betta=0.1"], "betta: no such setting"),
        (["beta=-1"], "beta -1"),
        (["max_steps=3"], "max_steps 3 is not past the fork's step 3"),
    ],
)
def test_fork_refuses_settings_with_the_reason(trained_run, settings, message):
    parent_id, _, _ = trained_run
    with pytest.raises(ForkError, match=message.replace("(", r"\(")):
        fork_run(parent_id, 3, parse_settings(settings))


def test_fork_needs_a_saved_checkpoint(trained_run):
    parent_id, _, _ = trained_run
    with pytest.raises(ForkError, match=r"no saved checkpoint at step 4 \(saved at steps: 3, 6\)"):
        fork_run(parent_id, 4, {})
    with pytest.raises(ForkError, match="expected key=value"):
        parse_settings(["beta"])


def test_runs_page_forks_and_the_monitor_draws_the_fork_over_its_parent(trained_run):
    from app.web.pages import monitor, runs

    parent_id, _, _ = trained_run
    assert runs.fork_steps(parent_id)["choices"] == [3, 6]
    message = runs.fork(Access(), parent_id, 6, "max_steps=8\ntemperature=0.7")
    fork_id = int(message.split()[1])
    assert message.endswith("Its steps continue from 7, and the Monitor draws it over its parent.")
    try:
        view = monitor.refresh(fork_id, [], 0.0, "step", None, {})
        assert set(view.caches) == {fork_id, parent_id}  # the parent is overlaid without being picked
        assert f"Forked from run {parent_id} at step 6" in view.header
        reward = view.figures[0]["value"]
        assert any(trace.name.startswith(f"{parent_id}: ") for trace in reward.data)
        assert (reward.layout.shapes[0].x0, reward.layout.annotations[0].text) == (6, f"forked from run {parent_id}")
    finally:
        with get_sessionmaker().begin() as s:
            output_dir = queries.get_run(s, fork_id).output_dir
            queries.delete_run(s, fork_id)  # the session database's other tests see only what they made
        RunFiles(Path(output_dir)).remove()


def test_a_fork_from_the_dashboard_obeys_its_access_rules(trained_run, tmp_path):
    """The fork's changed settings pass the same rules as the New run form: custom reward code is neither imported
    nor accepted without --allow-custom-rewards, and a data set outside the allowed directories is refused with the
    same words whether or not it exists (issue 22: a fork imported an uploaded .py in the dashboard and its worker)."""
    import gradio as gr

    from app.web.pages import runs

    parent_id, _, _ = trained_run
    marker = tmp_path / "imported"
    evil = tmp_path / "evil.py"
    evil.write_text(
        f"open({str(marker)!r}, 'w').close()\ndef f(completions, **kw):\n    return [0.0] * len(completions)\n"
    )
    secret = tmp_path / "secret.csv"
    secret.write_text("question,answer\nthe password is hunter2,1\n")
    with get_sessionmaker().begin() as s:
        before = len(queries.list_runs(s))
    for change, expected in (
        (f"reward_funcs=correctness,{evil}:f", "--allow-custom-rewards"),
        (f"dataset_name={secret}", "local paths are limited to"),
        (f"dataset_name={tmp_path / 'missing.csv'}", "local paths are limited to"),
        ("dataset_name=text", "owner/name"),
    ):
        with pytest.raises(gr.Error, match=re.escape(expected)):
            runs.fork(Access(), parent_id, 6, f"max_steps=8\n{change}")
    assert not marker.exists()
    with get_sessionmaker().begin() as s:
        assert len(queries.list_runs(s)) == before  # nothing queued
