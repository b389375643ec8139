"""GRPO through grpo-studio's worker actually learns: with a fixed seed and a reward the built-in model can learn,
the mean reward of the last steps clearly exceeds that of the first."""

from __future__ import annotations

import pytest

from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import FIXTURES, create_run, tiny_config
from trainer.job.worker import run_worker

pytestmark = pytest.mark.slow


def test_reward_rises_over_a_short_run(format_learner_path):
    # the less warmed-up sibling: its completions still vary (entropy ~1.3 vs ~0.06), which gives GRPO's group
    # statistics something to rank within 20 steps
    config = tiny_config(
        name="learning",
        model_name_or_path=str(format_learner_path),
        reward_funcs=[f"{FIXTURES / 'brevity_reward.py'}:brevity"],
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


def test_grpo_sharpens_the_demo_model_on_problems_it_trains_on(tiny_model_path, tmp_path):
    """The learning signal points the right way: trained with the correctness reward alone on eight training problems
    with a carry, on which the built-in model is undecided (it forgets the carry about half the time), the model's
    sampled answers to exactly those problems become right far more often. A reward it can certainly earn, by
    sharpening what it already half knows."""
    import json

    from trainer.config import SYSTEM_PROMPT
    from trainer.evaluation.evaluate import generate
    from trainer.job.worker import build_trainer
    from trainer.loading.data import arithmetic_problems, arithmetic_solution, make_prompt
    from trainer.scoring.rewards import correctness_reward

    carries = [
        p for p in arithmetic_problems("train") if arithmetic_solution(p, forget_carry=True) != arithmetic_solution(p)
    ]
    problems = carries[:8]
    data = tmp_path / "carries.jsonl"
    data.write_text("".join(json.dumps({"question": p.question, "answer": p.answer}) + "\n" for p in problems))
    config = tiny_config(
        name="sharpen",
        dataset_name=str(data),
        reward_funcs=["correctness"],
        num_generations=8,
        per_device_train_batch_size=32,  # 4 prompts x 8 completions
        learning_rate=5e-4,  # the demo preset's
        max_steps=30,
        save_steps=100,
    )
    trainer = build_trainer(config, tmp_path / "run", [], lambda _: None)
    model, tokenizer = trainer.model, trainer.processing_class
    prompts = [make_prompt(p.question, SYSTEM_PROMPT) for p in problems for _ in range(16)]
    answers = [p.answer for p in problems for _ in range(16)]

    def sampled_correctness() -> float:
        drawn = generate(model, tokenizer, prompts, config.max_completion_length, temperature=1.0, seed=0)
        return sum(1 for r in correctness_reward(prompts, drawn, answer=answers) if r) / len(drawn)

    before = sampled_correctness()
    trainer.train()
    after = sampled_correctness()
    assert 0.2 < before < 0.8, before  # undecided: room to learn in both directions
    assert after > before + 0.25, (before, after)  # measured: 0.48 -> 0.87 (GRPO seeds 7, 1, 2)


def test_the_demo_preset_beats_its_base_on_heldout_problems(tiny_model_path):
    """The offline demo's claim (README): GRPO on the training problems lifts correctness on held-out ones. The
    preset as it ships, but 30 steps instead of 100 (the curve is flat after ~20: 0.79, 0.88, 0.96, 0.96 at steps
    0-30, 35 s on 2 quiet cores), scored by the periodic curve: the base at step 0, the trained model at the last
    step, both on the same 100 held-out problems."""
    import dataclasses

    from trainer.presets import tiny_demo

    config = dataclasses.replace(tiny_demo(), name="demo-gain", max_steps=30, eval_steps=30, save_steps=1000)
    run_id = create_run(config)
    assert run_worker(run_id).value == "completed"
    with get_sessionmaker().begin() as s:
        correct = [(p.step, p.value) for p in queries.metric_series(s, run_id, "heldout/correct")]
    assert [step for step, _ in correct] == [0, 30]
    (_, base), (_, trained) = correct
    assert trained > base + 0.10, correct  # measured: 0.79 -> 0.96 (seed 42)
