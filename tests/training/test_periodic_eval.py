"""Held-out evaluation while training (``eval_steps``) and rows kept out of training (``heldout_fraction``)."""

from __future__ import annotations

import json
import random

import pytest

from tests.helpers import create_run, tiny_config
from trainer.config import RunConfig
from trainer.evaluation.evaluate import heldout_problems
from trainer.loading.data import build_dataset, split_heldout


def write_rows(path, rows) -> None:
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows))


def test_heldout_fraction_keeps_rows_out_of_training_and_evaluates_on_exactly_them(tmp_path):
    rows = [(f"What is {i} + 1?", str(i + 1)) for i in range(400)]
    path = tmp_path / "d.jsonl"
    write_rows(path, rows)
    config = RunConfig(dataset_name=str(path), heldout_fraction=0.25)
    trained = set(build_dataset(config)["question"])
    held = {p.question for p in heldout_problems(config, 1000)}
    assert not trained & held and trained | held == {q for q, _ in rows}
    assert 60 < len(held) < 140  # about a quarter

    random.Random(0).shuffle(rows)
    write_rows(path, rows)
    assert {p.question for p in heldout_problems(config, 1000)} == held  # fixed by the text, not the row order
    assert set(build_dataset(RunConfig(dataset_name=str(path)))["question"]) == trained | held  # 0: nothing kept out


def test_split_heldout_with_zero_keeps_everything():
    from trainer.loading.data import arithmetic_problems

    problems = arithmetic_problems("train")
    assert split_heldout(problems, 0.0) == (problems, [])


@pytest.mark.slow
def test_heldout_metrics_are_stored_from_the_base_every_n_steps(tiny_model_path):
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.job.worker import run_worker

    config = tiny_config(name="periodic", eval_steps=2, max_steps=5)
    run_id = create_run(config)
    assert run_worker(run_id).value == "completed"
    with get_sessionmaker().begin() as s:
        correct = queries.metric_series(s, run_id, "heldout/correct")
        keys = set(queries.metric_keys(s, run_id))
    assert [p.step for p in correct] == [0, 2, 4, 5]  # the base, every 2 steps, the last step
    assert all(0.0 <= p.value <= 1.0 for p in correct)
    assert correct[0].value > 0.5  # the built-in model before any update: most held-out answers right
    # step 0 is the base model (lora_B starts at zero): its share of right greedy answers on the first EVAL_PROBLEMS
    # held-out problems, recounted here from a freshly loaded base, is the stored value
    assert correct[0].value == pytest.approx(base_greedy_correct(tiny_model_path, config), abs=0.011)
    assert {"heldout/format", "heldout/mean_length", "heldout/rewards/correctness"} <= keys


def base_greedy_correct(tiny_model_path, config) -> float:
    """The built-in base model's greedy correctness on the problems the periodic curve scores."""
    from transformers import AutoModelForCausalLM

    from trainer.evaluation.evaluate import generate
    from trainer.evaluation.periodic_eval import EVAL_PROBLEMS
    from trainer.loading.backend import load_tokenizer
    from trainer.loading.data import make_prompt
    from trainer.loading.tiny import tiny_threads
    from trainer.scoring.rewards import correctness_reward

    problems = heldout_problems(config, EVAL_PROBLEMS)
    prompts = [make_prompt(p.question, config.system_prompt) for p in problems]
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    with tiny_threads():  # the worker's thread setting, so the sums run in the same order
        completions = generate(model, load_tokenizer(str(tiny_model_path)), prompts, config.max_completion_length)
    right = correctness_reward(prompts, completions, answer=[p.answer for p in problems])
    return sum(1 for r in right if r) / len(problems)


@pytest.mark.slow
def test_evaluating_while_training_does_not_change_training(tiny_model_path):
    """The same seed with and without eval_steps gives the same rewards at every step (evaluation puts the random
    state and the training mode back)."""
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.job.worker import run_worker

    ids = [create_run(tiny_config(name=f"same-{n}", eval_steps=n, max_steps=4)) for n in (0, 1)]
    assert [run_worker(i).value for i in ids] == ["completed", "completed"]
    with get_sessionmaker().begin() as s:
        plain, evaluated = ([p.value for p in queries.metric_series(s, i, "reward")] for i in ids)
        assert not queries.metric_series(s, ids[0], "heldout/correct")
    assert len(plain) == 4 and plain == pytest.approx(evaluated, abs=1e-6)
