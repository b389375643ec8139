"""A GRPO step with tools, in process (TRL's tests' style: a tiny model, small groups, 8-token completions): the
worker's trainer gets the calculator and the calculator environment, time-limited, and trains a step without error.
The built-in model's own chat template renders no tool call, so the model here is it with TRL's Qwen2.5 template."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from .helpers import tiny_config, tiny_with_tool_template


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory) -> Path:
    """builtin:tiny with a chat template that renders tool calls (tests.helpers.tiny_with_tool_template)."""
    return tiny_with_tool_template(tmp_path_factory.mktemp("tool-model") / "tiny-qwen-template")


@pytest.mark.slow
@pytest.mark.parametrize("settings", [{"tools": ["builtin:calculator"]}, {"environment": "builtin:calculator"}])
def test_a_step_trains_with_the_calculator(tool_model, tmp_path, settings):
    from trainer.job.worker import build_trainer

    config = tiny_config(
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
    trainer = build_trainer(config, tmp_path / "run", [], lambda line: None)
    assert [tool.__name__ for tool in trainer.tools] == ["calculator" if "tools" in settings else "calculate"]
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == 1 and math.isfinite(logged[0]["loss"])
    assert "tools/call_frequency" in logged[0]  # TRL's tool loop ran (trl 1.16.0 trainer/grpo_trainer.py:2312-2320)
