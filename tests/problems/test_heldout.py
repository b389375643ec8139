"""Nothing of builtin:arithmetic's held-out split reaches training: not the built-in model's tokenizer, not its
warm-up, not the prompts GRPO samples from. Prompts are compared by hash, so a question that reaches training in
any wording the split also uses is caught."""

from __future__ import annotations

import hashlib
import re

import pytest

from trainer.loading.data import arithmetic_problems

QUESTION = re.compile(r"What is \d+ [+-] \d+\?")


def digest(question: str) -> str:
    """The identity of a question, whitespace-normalised."""
    return hashlib.sha256(" ".join(question.split()).encode()).hexdigest()


HELDOUT = {digest(p.question) for p in arithmetic_problems("test")}
TRAIN = {digest(p.question) for p in arithmetic_problems("train")}


def questions_in(text: str) -> list[str]:
    """Every arithmetic question written in ``text``."""
    return QUESTION.findall(text)


def test_the_splits_are_disjoint_and_cover_the_task():
    assert len(HELDOUT) == 200 and not HELDOUT & TRAIN
    # the task, written out from its definition: a + b and a - b (a >= b) for operands 0..30, each problem once
    task = {digest(f"What is {a} + {b}?") for a in range(31) for b in range(31)}
    task |= {digest(f"What is {a} - {b}?") for a in range(31) for b in range(a + 1)}
    assert HELDOUT | TRAIN == task
    assert len(arithmetic_problems("train")) + len(arithmetic_problems("test")) == len(task) == 1457  # no repeats


def test_tokenizer_corpus_holds_no_heldout_question():
    from trainer.loading.tiny import tokenizer_corpus

    found = [q for text in tokenizer_corpus() for q in questions_in(text)]
    assert len(found) == len(TRAIN)
    assert {digest(q) for q in found} == TRAIN


def test_warm_up_examples_are_the_training_split():
    from trainer.loading.tiny import build_tokenizer, warm_up_examples, warm_up_problems

    assert {digest(p.question) for p in warm_up_problems()} == TRAIN
    tokenizer = build_tokenizer()
    prompts = [tokenizer.decode(prompt) for prompt, _, _ in warm_up_examples(tokenizer)]
    assert {digest(q) for text in prompts for q in questions_in(text)} == TRAIN


def test_warm_up_feeds_the_model_training_prompts_only(tmp_path, monkeypatch):
    """Every sequence the warm-up passes to the model, read back from the model's own input."""
    from transformers import Qwen2ForCausalLM

    from trainer.loading.tiny import TinySpec, build_tiny_model, build_tokenizer

    fed: list[list[int]] = []
    forward = Qwen2ForCausalLM.forward

    def recording(self, input_ids=None, **kwargs):
        fed.extend(input_ids.tolist())
        return forward(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(Qwen2ForCausalLM, "forward", recording)
    # 4 steps of a hidden-size-16 model: only the data path is under test, not what the model learns
    build_tiny_model(tmp_path, TinySpec(hidden_size=16, intermediate_size=32, num_heads=2, sft_steps=4))
    tokenizer = build_tokenizer()
    questions = [q for ids in fed for q in questions_in(tokenizer.decode(ids))]
    assert len(questions) == 4 * TinySpec().sft_batch_size
    assert {digest(q) for q in questions} <= TRAIN
    assert not {digest(q) for q in questions} & HELDOUT


def test_grpo_data_set_of_the_demo_is_the_training_split():
    from trainer.loading.data import build_dataset
    from trainer.presets import tiny_demo

    dataset = build_dataset(tiny_demo())
    assert {digest(q) for q in dataset["question"]} == TRAIN
    assert {digest(m[-1]["content"]) for m in dataset["prompt"]} == TRAIN


@pytest.mark.slow
def test_prompts_grpo_trained_on_are_training_prompts(tiny_model_path):
    """A real worker run: the prompts of every stored completion group are training questions, none held out."""
    from storage import queries
    from storage.db import get_sessionmaker
    from tests.helpers import create_run, tiny_config
    from trainer.job.worker import run_worker

    run_id = create_run(tiny_config(name="heldout-isolation", max_steps=3, save_steps=100))
    assert run_worker(run_id).value == "completed"
    with get_sessionmaker().begin() as s:
        prompts = [
            row.prompt for step in queries.sample_steps(s, run_id) for row in queries.samples_at(s, run_id, step)
        ]
    questions = [q for text in prompts for q in questions_in(text)]
    assert len(questions) == 3 * tiny_config().per_device_train_batch_size  # every completion of every step
    assert {digest(q) for q in questions} <= TRAIN
    assert not {digest(q) for q in questions} & HELDOUT
