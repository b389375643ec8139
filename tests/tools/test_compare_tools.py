"""A tool run's Compare sides and its sampled held-out answers call the run's tools (issue 42 item 2), in process on
the calculator demo's model (builtin:tiny-tools, shipped prebuilt: nothing trains here). Every call a side makes is
answered with what the calculator computes, recomputed here from the call's own arguments; an adapter that has not
trained (PEFT starts LoRA's B at zero) samples exactly the base's rollouts from the same seed, calls and all."""

from __future__ import annotations

import dataclasses
import re

import pytest

from trainer.presets import PRESET_DIR, load_preset

QUESTION = "What is 482 + 317?"
REFERENCE = "799"
ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S)


@pytest.fixture(scope="module")
def tool_run(tmp_path_factory):
    """The calculator preset's config and an adapter on its model that has not trained."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainer.loading.backend import model_path

    config = load_preset(PRESET_DIR / "tiny-calculator.yaml")
    base = AutoModelForCausalLM.from_pretrained(model_path(config))
    adapter = tmp_path_factory.mktemp("tool-adapter") / "untrained"
    get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"])).save_pretrained(adapter)
    return config, adapter


@pytest.fixture(scope="module")
def compared(tool_run):
    """Twelve sampled answers a side to one three-digit sum."""
    from trainer.evaluation.compare import ModelCache, compare
    from trainer.loading.data import make_prompt

    config, adapter = tool_run
    messages = make_prompt(QUESTION, config.system_prompt)
    return compare(config, adapter, messages, REFERENCE, n=12, seed=1, cache=ModelCache())


def _calls_and_answers(turns: list[dict]) -> list[tuple[dict, dict]]:
    """Each tool call of an answer with the tool answer that follows it (calls of one message answer in order)."""
    calls = [t for t in turns if t["role"] == "tool_call"]
    answers = [t for t in turns if t["role"] == "tool"]
    assert len(answers) == len(calls), turns  # every call answered
    return list(zip(calls, answers))


def test_both_sides_of_a_tool_run_call_the_calculator_and_read_its_answers(compared):
    from trainer.tools.builtin import calculator

    pairs = [
        pair for side in (compared.base, compared.tuned) for turns in side.turns for pair in _calls_and_answers(turns)
    ]
    assert pairs, "no side called the calculator in 24 sampled answers (the warm-up calls in about one in five)"
    for call, answer in pairs:
        assert call["name"] == "calculator" and answer["name"] == "calculator"
        try:
            expected = calculator(**call["arguments"])
        except (ValueError, ArithmeticError, TypeError):  # the time limit answers a raise with its error
            assert answer["content"].startswith("error:"), (call, answer)
        else:
            assert answer["content"] == expected, (call, answer)


def test_a_tool_runs_sides_are_scored_on_their_final_answers(compared):
    """Correct counts recomputed from each answer's last assistant message (the one after the calculator's answer)."""
    for side in (compared.base, compared.tuned):
        assert len(side.turns) == len(side.completions) == len(side.totals) == 12
        for turns, text in zip(side.turns, side.completions):
            said = [t["content"] for t in turns if t["role"] == "assistant" and t["content"]]
            assert text == (said[-1] if said else "")
        mine = sum(1 for text in side.completions if (m := ANSWER.search(text)) and m.group(1) == REFERENCE)
        assert side.correct == mine
        assert side.mean_reward == pytest.approx(sum(side.totals) / 12)  # the preset's one reward, correctness


def test_an_untrained_adapter_draws_the_bases_rollouts_from_the_same_seed(compared):
    assert compared.base.turns == compared.tuned.turns and compared.identical == 12
    assert compared.kl is None  # not measured on rollouts: their tool answers are not the model's tokens


def test_the_panel_shows_each_call_and_the_calculators_answer_and_says_the_tools_were_used(compared):
    from app.web.pages.compare import _rows
    from trainer.evaluation.compare import WITH_TOOLS

    assert compared.notes == [WITH_TOOLS]
    rows = _rows(compared.base)
    called = [turns for turns in compared.base.turns if any(t["role"] == "tool_call" for t in turns)]
    shown = [row[1] for row in rows if "→ calculator(" in row[1]]
    assert len(shown) == len(called)
    for text, turns in zip(shown, called):
        answer = next(t for t in turns if t["role"] == "tool")
        assert f"← {answer['content']}" in text.splitlines()


def test_sampled_heldout_answers_of_a_tool_run_call_the_tools_and_give_a_pass_at_1(tool_run):
    """pass@1 of a tool run is its sampled answers with the calls run; the greedy figures are those without it."""
    from transformers import AutoModelForCausalLM

    from trainer.evaluation.evaluate import heldout_problems, side_metrics
    from trainer.loading.backend import load_tokenizer, model_path

    config, _ = tool_run
    config = dataclasses.replace(config, max_completion_length=64)
    model = AutoModelForCausalLM.from_pretrained(model_path(config)).eval()
    tokenizer = load_tokenizer(model_path(config))
    problems = heldout_problems(config, 4)
    greedy_only = side_metrics(config, model, tokenizer, problems, samples=0, seed=0)
    sampled = side_metrics(config, model, tokenizer, problems, samples=2, seed=0)
    again = side_metrics(config, model, tokenizer, problems, samples=2, seed=0)
    assert greedy_only["pass_at_1"] is None
    assert sampled["pass_at_1"] is not None and 0 <= sampled["pass_at_1"] <= 1
    assert sampled["pass_at_1"] == again["pass_at_1"]  # seeded: the same draws each time
    assert {k: v for k, v in sampled.items() if k != "pass_at_1"} == {
        k: v for k, v in greedy_only.items() if k != "pass_at_1"
    }
