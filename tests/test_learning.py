"""GRPO through grpo-studio's worker actually learns: with a fixed seed and a reward the built-in model can learn,
the mean reward of the last steps clearly exceeds that of the first."""

from __future__ import annotations

import pytest

from storage import queries
from storage.db import get_sessionmaker
from trainer.job.worker import run_worker

from .conftest import ROOT
from .helpers import create_run, tiny_config

pytestmark = pytest.mark.slow


def test_reward_rises_over_a_short_run(format_learner_path):
    # the less warmed-up sibling: its completions still vary (entropy ~1.3 vs ~0.06), which gives GRPO's group
    # statistics something to rank within 20 steps
    config = tiny_config(
        name="learning",
        model_name_or_path=str(format_learner_path),
        reward_funcs=[f"{ROOT / 'tests' / 'brevity_reward.py'}:brevity"],
        per_device_train_batch_size=16,  # 4 prompts x 4 completions
        learning_rate=3e-3,  # large for LoRA, right for a 100k-parameter model and a 20-step test
        max_steps=20,
        save_steps=100,
    )
    run_id = create_run(config)
    assert run_worker(run_id).value == "completed"
    with get_sessionmaker().begin() as s:
        rewards = [p.value for p in queries.metric_series(s, run_id, "reward")]
        assert [p.step for p in queries.metric_series(s, run_id, "rewards/brevity/mean")] == list(range(1, 21))
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > first + 0.2, (first, last, rewards)
