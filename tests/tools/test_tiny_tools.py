"""builtin:tiny-tools, the built-in model's tool-calling variant (trainer/loading/tiny_tools.py), and its task
builtin:arithmetic3: its template renders a tool call that TRL's parser reads back, the review accepts tools on it
(and still refuses them on builtin:tiny), the shipped files are what the recipe makes, and the task's held-out
problems are none of its training ones. Nothing here trains."""

from __future__ import annotations

import json

import pytest

from tests.helpers import tiny_config
from trainer import review
from trainer.config.access import Access
from trainer.loading.data import arithmetic3_problems
from trainer.loading.tiny import INFO_FILE
from trainer.loading.tiny_tools import DEFAULT_TOOL_SPEC, SHIPPED_TOOLS, recipe_digest, shipped_tool_model

CALL = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "123 + 456"}}}


@pytest.fixture(scope="module")
def tokenizer():
    from trainer.loading.backend import load_tokenizer

    return load_tokenizer(str(SHIPPED_TOOLS))


def _calculator_config(**changes):
    settings = dict(
        model_name_or_path="builtin:tiny-tools",
        dataset_name="builtin:arithmetic3",
        tools=["builtin:calculator"],
        reward_funcs=["correctness"],
    )
    return tiny_config(**{**settings, **changes})


def test_the_template_writes_a_tool_call_and_its_answer_compactly(tokenizer):
    from trainer.tools.builtin import calculator

    messages = [
        {"role": "user", "content": "What is 123 + 456?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "name": "calculator", "content": "579"},
    ]
    text = tokenizer.apply_chat_template(messages, tools=[calculator], tokenize=False)
    assert text == (
        "<|im_start|>system\n\nTools: calculator(expression)<|im_end|>\n"
        "<|im_start|>user\nWhat is 123 + 456?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "123 + 456"}}\n'
        "</tool_call><|im_end|>\n"
        "<|im_start|>tool\n579<|im_end|>\n"
    )
    # the whole tools block is one short line: the prompt of the demo fits its 128-token max_prompt_length
    prompt = tokenizer.apply_chat_template(
        [{"role": "system", "content": tiny_config().system_prompt}, messages[0]],
        tools=[calculator],
        add_generation_prompt=True,
        return_dict=False,
    )
    assert len(prompt) < 64


def test_trl_reads_the_tool_call_back(tokenizer):
    from trl.chat_template_utils import parse_response, supports_tool_calling

    from trainer.tools.builtin import calculator

    asked = [{"role": "user", "content": "What is 123 + 456?"}]
    prompt = tokenizer.apply_chat_template(asked, tools=[calculator], add_generation_prompt=True, return_dict=False)
    whole = tokenizer.apply_chat_template(
        asked + [{"role": "assistant", "content": "", "tool_calls": [CALL]}], tools=[calculator], return_dict=False
    )
    turn = whole[len(prompt) : whole.index(tokenizer.eos_token_id, len(prompt)) + 1]
    parsed = parse_response(tokenizer, turn, prefix=prompt, tools=[calculator])
    assert parsed["tool_calls"] == [CALL] and parsed["content"] == ""
    assert supports_tool_calling(tokenizer)


def test_the_template_keeps_its_prefixes_so_trl_uses_it_as_it_is(tokenizer):
    from trl.chat_template_utils import is_chat_template_prefix_preserving

    assert is_chat_template_prefix_preserving(tokenizer)


def test_the_review_accepts_the_calculator_on_the_tool_model():
    access = Access(any_path=True, allow_custom_rewards=True)
    assert review.check(_calculator_config().to_dict(), access).problems == []


def test_the_review_still_refuses_tools_on_builtin_tiny_and_names_the_tool_model():
    access = Access(any_path=True, allow_custom_rewards=True)
    config = tiny_config(tools=["builtin:calculator"])
    [problem] = review.check(config.to_dict(), access).problems
    assert "builtin:tiny: its chat template does not render a tool call" in problem
    assert problem.endswith("(offline: builtin:tiny-tools)")


def test_the_review_refuses_a_template_whose_calls_trl_reads_otherwise(tmp_path):
    """A copy of the tool model whose template writes the call's name where the parser expects JSON: TRL would take
    every call for text and never run the tool, so the review says so."""
    import shutil

    from trainer.loading.tiny_tools import CHAT_TEMPLATE

    copy = tmp_path / "misread"
    shutil.copytree(SHIPPED_TOOLS, copy)
    broken = CHAT_TEMPLATE.replace('{"name": ', "call ")
    (copy / "chat_template.jinja").write_text(broken)
    access = Access(any_path=True, allow_custom_rewards=True)
    problems = review.check(_calculator_config(model_name_or_path=str(copy)).to_dict(), access).problems
    assert len(problems) == 1
    assert "TRL cannot read back a tool call its chat template writes" in problems[0]
    assert "wrote calculator({'expression': '1'}), read no call" in problems[0]


def test_builtin_tiny_tools_is_the_shipped_model_with_no_build(tmp_path, monkeypatch):
    from trainer.loading.backend import model_path

    monkeypatch.setenv("GRPO_STUDIO_HOME", str(tmp_path))  # an empty data dir: nothing cached, nothing built
    assert model_path(_calculator_config()) == str(SHIPPED_TOOLS) == str(shipped_tool_model())
    assert not (tmp_path / "models").exists()


def test_the_shipped_tool_model_was_made_by_the_recipe_as_it_stands():
    info = json.loads((SHIPPED_TOOLS / INFO_FILE).read_text())
    assert info["spec"] == DEFAULT_TOOL_SPEC.__dict__
    assert info["recipe_digest"] == recipe_digest(), (
        "builtin:tiny-tools's recipe changed since the shipped files were built: rebuild them with "
        "`python -m trainer.loading.tiny_tools trainer/loading/builtin_tiny_tools` (and rerun bench/tool_demo.py)"
    )


def test_arithmetic3_is_three_digit_and_its_heldout_problems_are_never_trained_on():
    train, test = arithmetic3_problems("train"), arithmetic3_problems("test")
    assert len(test) == 200 and len(train) == 4800
    assert not {p.question for p in train} & {p.question for p in test}
    first = test[0].question.removeprefix("What is ").removesuffix("?").split()
    assert len(first[0]) == len(first[2]) == 3 and first[1] in "+-"
    assert all(int(p.answer) >= 0 for p in train + test)


@pytest.mark.slow
def test_a_replayed_warm_up_starts_as_the_shipped_tool_build_did():
    from trainer.loading.tiny_tools import first_warm_up_losses

    info = json.loads((SHIPPED_TOOLS / INFO_FILE).read_text())
    replayed = first_warm_up_losses()
    assert replayed == pytest.approx(info["first_losses"], abs=1e-4)
    assert replayed[-1] < replayed[0]  # and it learns: the loss falls over the first steps
