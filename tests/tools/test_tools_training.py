"""A GRPO step with tools, in process (TRL's tests' style: a tiny model, small groups, 8-token completions): the
worker's trainer gets the calculator and the calculator environment, time-limited, and trains a step without error.
The built-in model's own chat template renders no tool call, so the model here is it with TRL's Qwen2.5 template."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.helpers import tiny_config, tiny_with_tool_template


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory) -> Path:
    """builtin:tiny with a chat template that renders tool calls (tests.helpers.tiny_with_tool_template)."""
    return tiny_with_tool_template(tmp_path_factory.mktemp("tool-model") / "tiny-qwen-template")


def one_step(tool_model: Path, **settings):
    """One GRPO step of the smallest shape on ``tool_model``, with ``settings`` (the tools) on top."""
    return tiny_config(
        model_name_or_path=str(tool_model),
        num_generations=2,  # the smallest group
        per_device_train_batch_size=4,  # 2 prompts x 2 completions
        max_completion_length=8,  # TRL's tests' length: enough to start a tool call, short enough to be quick
        max_prompt_length=2048,  # the Qwen2.5 template's tool block is some 800 of the tiny tokenizer's tokens
        max_seq_length=4096,
        max_steps=1,
        save_steps=100,  # no checkpoint: nothing here reads one
        measured_kl_steps=0,
        token_samples_per_step=0,
        **settings,
    )


@pytest.mark.slow
@pytest.mark.parametrize("settings", [{"tools": ["builtin:calculator"]}, {"environment": "builtin:calculator"}])
def test_a_step_trains_with_the_calculator(tool_model, tmp_path, settings):
    from trainer.job.worker import build_trainer

    config = one_step(tool_model, **settings)
    trainer = build_trainer(config, tmp_path / "run", [], lambda line: None)
    assert [tool.__name__ for tool in trainer.tools] == ["calculator" if "tools" in settings else "calculate"]
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == 1 and math.isfinite(logged[0]["loss"])
    assert "tools/call_frequency" in logged[0]  # TRL's tool loop ran (trl 1.16.0 trainer/grpo_trainer.py:2312-2320)


@pytest.mark.slow
def test_a_hung_tool_ends_its_turn_with_the_error_not_the_step(tool_model, tmp_path, monkeypatch):
    """Every completion calls a tool that never returns; the step still trains, each call answered within the
    limit. The tiny model never writes a tool call itself, so TRL's parser is made to read one in each first-pass
    completion (and none after the tool's answer), which runs TRL's own tool loop (trl 1.16.0
    trainer/grpo_trainer.py:1945-2000) on the worker's wrapped tool."""
    import trl.trainer.grpo_trainer as grpo_trainer

    from trainer.job.worker import build_trainer

    path = tmp_path / "slow_tools.py"
    path.write_text(
        "import time\n\n\ndef hang(seconds: float) -> str:\n"
        '    """Sleep.\n\n    Args:\n        seconds: How long.\n    """\n'
        "    time.sleep(seconds)\n    return 'woke'\n"
    )
    answers = []
    parsed = {"calls": 0}

    def parse(tokenizer, ids, prefix=None, tools=None):
        parsed["calls"] += 1
        if parsed["calls"] <= 4:  # the batch's four first-pass completions
            call = {"type": "function", "function": {"name": "hang", "arguments": {"seconds": 3600}}}
            return {"role": "assistant", "content": "", "tool_calls": [call]}
        return {"role": "assistant", "content": "done"}

    monkeypatch.setattr(grpo_trainer, "parse_response", parse)
    config = one_step(tool_model, tools=[f"{path}:hang"], tool_timeout_s=0.2)  # four hung calls: under a second
    trainer = build_trainer(config, tmp_path / "run", [], lambda line: None)
    tool = trainer.tools[0]

    def spied(**kwargs):
        answers.append(tool(**kwargs))
        return answers[-1]

    spied.__name__ = "hang"
    monkeypatch.setattr(trainer, "_standalone_tools", [spied])
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == 1 and math.isfinite(logged[0]["loss"])
    assert answers == ["error: the tool took longer than 0.2 s"] * 4
    assert logged[0]["tools/call_frequency"] > 0 and logged[0]["tools/failure_frequency"] == 0


@pytest.mark.slow
def test_a_step_with_the_calculator_stores_its_rollouts_turn_by_turn(tool_model, tmp_path, monkeypatch):
    """A real step with the built-in calculator, through the worker's callback: the stored samples have the call with
    its arguments, the calculator's own answer (or its error, for a call that raises) and the final answer as turns,
    ``/samples`` returns them, and the error rate is logged. The tiny model never writes a tool call itself, so TRL's parser reads one in each
    first-pass completion and a final answer after the tool's (trl 1.16.0
    trainer/grpo_trainer.py:1945-2191 runs on the worker's wrapped calculator)."""
    import threading
    from types import SimpleNamespace

    import trl.trainer.grpo_trainer as grpo_trainer

    from app.web.api import endpoints
    from storage import queries
    from storage.db import get_sessionmaker
    from tests.helpers import create_run
    from tests.tools.test_tool_turns import Writer
    from trainer.config.access import Access
    from trainer.job.callback import make_callback
    from trainer.job.worker import build_trainer

    parsed = {"calls": 0}
    expressions = ["12+3", "12+3", "1/0", "1/0"]  # one group's calls answered, the other's raise in the calculator

    def parse(tokenizer, ids, prefix=None, tools=None):
        parsed["calls"] += 1
        if parsed["calls"] <= 4:  # the batch's four first-pass completions
            arguments = {"expression": expressions[parsed["calls"] - 1]}
            call = {"type": "function", "function": {"name": "calculator", "arguments": arguments}}
            return {"role": "assistant", "content": "", "tool_calls": [call]}
        return {"role": "assistant", "content": "<answer>15</answer>"}

    monkeypatch.setattr(grpo_trainer, "parse_response", parse)
    config = one_step(tool_model, tools=["builtin:calculator"], logging_steps=1)
    run_id = create_run(config)
    callback = make_callback(run_id, Writer(), SimpleNamespace(requested=False, event=threading.Event()), config)
    trainer = build_trainer(config, tmp_path / "run", [callback], lambda line: None)
    callback.trainer = trainer
    # The tiny model never ends a turn, so its first one fills max_new_tokens (8, fixed when the trainer was made,
    # trl 1.16.0 trainer/grpo_trainer.py:1156) and any tool answer would push the completion past a budget of 8:
    # TRL would drop it (trainer/grpo_trainer.py:2043-2070). A larger budget keeps the answer and the next turn.
    trainer.max_completion_length = 256  # the tiny tokenizer spells an error answer out in some 50 tokens
    # TRL also drops a tool answer that takes the sequence to the model's max_position_embeddings (512 here), which
    # the Qwen2.5 template's tool block alone passes (some 800 tokens: docs/tools.md). The tiny model's rotary
    # positions run past 512 (every step here already does), so only TRL's ceiling is raised.
    trainer.model.config.max_position_embeddings = 4096
    trainer.train()
    with get_sessionmaker().begin() as s:
        stored = [row.turns for row in queries.samples_at(s, run_id, 1)]
        rate = queries.last_metric(s, run_id, "tools/error_rate")
    assert len(stored) == 4
    answers = {"12+3": "15", "1/0": "error: ZeroDivisionError: division by zero"}  # the wrapper's answer to a raise
    for expression, turns in zip(expressions, stored):
        call = {"role": "tool_call", "content": "", "name": "calculator", "arguments": {"expression": expression}}
        assert turns[:2] == [call, {"role": "tool", "content": answers[expression], "name": "calculator"}]
        assert turns[-1] == {"role": "assistant", "content": "<answer>15</answer>"}
    assert rate == 0.5  # two of the four answers were errors; the step trained on regardless
    sampled = endpoints(Access())["samples"](run_id, None, 200)["samples"]
    assert [s["turns"] for s in sampled] == stored
