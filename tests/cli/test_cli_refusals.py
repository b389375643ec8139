"""The command line's first-hour mistakes answered in one sentence, checked before anything is announced: a preset's
name mistyped, an evaluation of a run that doesn't exist, a bad step cap (issue 37, items 3 and 9)."""

from __future__ import annotations

import pytest

from app import actions
from app.actions.runs import MAX_STEPS_ENV
from app.cli.main import main
from tests.helpers import tiny_config

PRESETS = "gsm8k-llama3b, gsm8k-qwen2.5-0.5b, gsm8k-qwen2.5-1.5b, smollm2-135m, tiny-calculator, tiny-offline"


@pytest.mark.parametrize("command", ["run", "probe"])
def test_a_mistyped_preset_names_the_presets_and_the_nearest(command, capsys):
    assert main([command, "tiny-ofline"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"grpo-studio: tiny-ofline: no such file or preset; did you mean tiny-offline? the presets are {PRESETS} "
        "(grpo-studio presets)\n"
    )


def test_a_name_like_no_preset_lists_them_without_a_guess(capsys):
    assert main(["run", "my-experiment"]) == 2
    assert capsys.readouterr().err == (
        f"grpo-studio: my-experiment: no such file or preset; the presets are {PRESETS} (grpo-studio presets)\n"
    )


def test_eval_of_a_missing_run_refuses_before_announcing(capsys):
    assert main(["eval", "99"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "grpo-studio: no run with id 99\n"


def test_the_step_cap_shortens_every_validated_config_and_says_so(monkeypatch):
    """GRPO_STUDIO_MAX_STEPS (what the docs' blocks run under) caps max_steps with a note; a bad value is refused."""
    config = tiny_config(max_steps=40, save_steps=2)
    monkeypatch.setenv(MAX_STEPS_ENV, "3")
    checked = actions.validate(config.to_dict(), actions.OPERATOR)
    assert checked.problems == [] and checked.config.max_steps == 3
    assert checked.notes == ["max_steps 40 capped at 3 by GRPO_STUDIO_MAX_STEPS"]
    monkeypatch.setenv(MAX_STEPS_ENV, "many")
    assert actions.validate(config.to_dict(), actions.OPERATOR).problems == [
        "GRPO_STUDIO_MAX_STEPS='many': expected a whole number of steps, at least 1"
    ]
