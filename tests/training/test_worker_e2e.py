"""End to end: a worker *process* trains a builtin:tiny run and everything lands in the database and on disk."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import run_row, wait_for
from trainer.supervise.run_files import RunFiles
from trainer.supervise.workers import is_alive

pytestmark = pytest.mark.slow

REWARDS = ["correctness", "strict_format", "xmlcount"]


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def finished_run(trained_run, tiny_model_path):
    """The session's shared 6-step builtin:tiny run, trained by a detached worker process (tests/conftest.py)."""
    run_id, _, before = trained_run
    return run_id, before, tiny_model_path / "model.safetensors"


def test_run_completes_with_progress_and_backend(finished_run):
    run_id, _, _ = finished_run
    run = run_row(run_id)
    assert run.status == "completed", run.error
    assert (run.current_step, run.total_steps) == (6, 6)
    assert run.started_at <= run.finished_at
    assert run.backend.startswith("plain transformers + PEFT on cpu") and "no GPU" in run.backend
    wait_for(lambda: not is_alive(run_row(run_id)), 60, "the worker process to exit")


def test_every_step_has_the_grpo_metrics(finished_run):
    run_id, _, _ = finished_run
    with get_sessionmaker().begin() as s:
        keys = queries.metric_keys(s, run_id)
        series = {k: queries.metric_series(s, run_id, k) for k in keys}
    wanted = ["reward", "reward_std", "kl", "loss", "frac_reward_zero_std"] + [f"rewards/{r}/mean" for r in REWARDS]
    for key in wanted:
        assert [p.step for p in series[key]] == [1, 2, 3, 4, 5, 6], key
    # values are sane, not just present: the reward is within what the three rewards can sum to
    assert all(0.0 <= p.value <= 2.0 + 0.5 + 0.5 for p in series["reward"])
    assert all(p.value >= 0 for p in series["kl"] + series["reward_std"])
    # KL(policy || reference), where the reference is the base (the adapter off): exactly 0 at step 1, before any
    # update (PEFT starts lora_B at zero), then above 0 once the adapter has moved. The estimator is >= 0 by
    # construction; these fail for a reference that is the policy itself, or one that is not the base.
    kl = [p.value for p in series["kl"]]
    assert kl[0] == pytest.approx(0.0, abs=1e-7) and all(v > 1e-6 for v in kl[1:]), kl
    assert all(0.0 <= p.value <= 1.0 for p in series["frac_reward_zero_std"])
    # the warmed-up model writes the format: strict_format averages well above zero
    assert sum(p.value for p in series["rewards/strict_format/mean"]) / 6 > 0.25
    assert any(k.startswith("clip_ratio/") for k in keys) and "completions/mean_length" in keys
    # the zero-std groups split into all-high and all-low (issue 12) add up to TRL's own share, step by step
    split = [h.value + low.value for h, low in zip(series["zero_std/all_high"], series["zero_std/all_low"])]
    assert split == pytest.approx([p.value for p in series["frac_reward_zero_std"]], abs=1e-6)


def test_samples_carry_per_reward_scores_and_advantages(finished_run):
    run_id, _, _ = finished_run
    with get_sessionmaker().begin() as s:
        assert queries.sample_steps(s, run_id) == [1, 2, 3, 4, 5, 6]
        samples = queries.samples_at(s, run_id, 6)
    assert len(samples) == 8  # 2 prompts x 4 completions
    for sample in samples:
        assert set(sample.rewards) == set(REWARDS)
        assert sample.total_reward == pytest.approx(sum(sample.rewards.values()))
        assert sample.prompt.startswith("What is ") and sample.reference_answer.lstrip("-").isdigit()
        assert sample.advantage is not None
    # advantages are group-relative: they sum to ~0 within each group of 4
    for group in (0, 1):
        members = [x.advantage for x in samples if x.group_index == group]
        assert len(members) == 4 and abs(sum(members)) < 1e-3
    # and they are TRL's (docs/grpo.md): (r - group mean) / (Bessel-corrected group std + 1e-4), recomputed for
    # every stored group of every step from its rewards; all-zero or wrongly scaled advantages fail here
    with get_sessionmaker().begin() as s:
        every = [x for step in range(1, 7) for x in queries.samples_at(s, run_id, step)]
    groups: dict[tuple[int, int], list] = {}
    for x in every:
        groups.setdefault((x.step, x.group_index), []).append(x)
    assert len(groups) == 12 and all(len(g) == 4 for g in groups.values())
    for members in groups.values():
        rewards = torch.tensor([x.total_reward for x in members], dtype=torch.float64)
        expected = (rewards - rewards.mean()) / (rewards.std(correction=1) + 1e-4)
        assert [x.advantage for x in members] == pytest.approx(expected.tolist(), abs=1e-4)
    assert any(abs(x.advantage) > 0.1 for x in every)  # some groups disagreed: the check is not on zeros only


def test_adapter_changed_and_base_weights_did_not(finished_run, tiny_model_path):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    run_id, before, base_weights = finished_run
    adapter_dir = RunFiles(Path(run_row(run_id).output_dir)).adapter
    from storage.db import data_dir

    assert adapter_dir.parent.parent == data_dir() / "runs"  # the run's files under the data dir
    assert (adapter_dir / "adapter_model.safetensors").is_file()
    assert _digest(base_weights) == before
    tensors = load_file(adapter_dir / "adapter_model.safetensors")
    lora_b = [t for name, t in tensors.items() if "lora_B" in name]
    assert lora_b and all(not name.startswith("model.embed") for name in tensors)
    # PEFT starts every lora_B at zero: non-zero values mean training moved the adapter
    assert max(t.abs().max().item() for t in lora_b) > 0
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    reference = {k: v.clone() for k, v in base.state_dict().items()}
    tuned = PeftModel.from_pretrained(base, adapter_dir)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        with tuned.disable_adapter():
            off = tuned(ids).logits
        on = tuned(ids).logits
        fresh = AutoModelForCausalLM.from_pretrained(tiny_model_path)(ids).logits
    assert torch.allclose(off, fresh) and not torch.allclose(on, fresh)
    for name, value in tuned.get_base_model().state_dict().items():
        key = name.replace(".base_layer", "")
        if "lora_" not in name and key in reference:
            assert torch.equal(value, reference[key]), name
