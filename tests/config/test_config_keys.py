"""A mistyped setting is refused with the name it was meant to be, in every entry (a YAML file on the command line,
the dashboard's Import, the API's /validate and /launch, a fork's --set), while the keys of other tools' recipes that
grpo-studio knowingly ignores stay notes; docs/configs.md lists those keys."""

from __future__ import annotations

import dataclasses
import re

import gradio as gr
import pytest
import yaml

from app.cli.main import main
from app.web import api
from app.web.pages import new_run
from tests.conftest import ROOT
from tests.helpers import tiny_config
from trainer.config import ConfigError, RunConfig
from trainer.config.access import Access
from trainer.config.keys import ALIASES, RECIPE_KEYS, meant_setting
from trainer.supervise.fork import ForkError, forked_config

SETTINGS = [f.name for f in dataclasses.fields(RunConfig)]
TYPO = "learning_rte is not a setting: did you mean learning_rate?"


def _problems(mapping: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        RunConfig.from_dict(mapping)
    return err.value.problems


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("learning_rte", "learning_rate"),  # a letter dropped
        ("learnign_rate", "learning_rate"),  # two swapped
        ("lerning_rat", "learning_rate"),  # two edits in a long name
        ("Learning-Rate", "learning_rate"),  # case and dashes
        ("bta", "beta"),
        ("num_generation", "num_generations"),
        ("lr", "learning_rate"),  # aliases
        ("kl_coef", "beta"),
        ("max_new_tokens", "max_completion_length"),
    ],
)
def test_a_key_close_to_a_setting_is_refused_naming_it(key, meant):
    assert _problems({key: 1}) == [f"{key} is not a setting: did you mean {meant}?"]


def test_keys_of_other_recipes_and_unlike_keys_stay_notes():
    """bf16, output_dir and top_k (one letter from top_p) are other tools' settings; my_comment is like none."""
    config, notes = RunConfig.from_dict({"bf16": True, "output_dir": "o", "top_k": 5, "my_comment": "x", "beta": 0.1})
    assert config.beta == 0.1 and config.top_p == RunConfig().top_p
    assert notes == [
        "ignored unknown setting 'bf16'",
        "ignored unknown setting 'my_comment'",
        "ignored unknown setting 'output_dir'",
        "ignored unknown setting 'top_k'",
    ]


def test_a_typo_is_listed_with_the_other_problems_and_no_guess_between_two():
    problems = _problems({"learning_rte": 1, "beta": "high", "max_steps": 0})
    assert TYPO in problems and "beta: expected a number, got 'high'" in problems
    assert any(p.startswith("max_steps 0") for p in problems)
    assert meant_setting("sa_steps", SETTINGS) is None  # two edits from save_steps and from max_steps alike


def test_the_tables_agree_with_the_settings_and_the_docs():
    """Recipe keys and aliases are not settings (else they'd be stale), every alias names a setting, and
    docs/configs.md lists exactly the recipe keys the code ignores."""
    assert not RECIPE_KEYS & set(SETTINGS) and not set(ALIASES) & set(SETTINGS)
    assert set(ALIASES.values()) <= set(SETTINGS)
    docs = (ROOT / "docs" / "configs.md").read_text()
    section = docs.split("Ignored recipe keys:", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"`([a-z0-9_]+)`", section)) == RECIPE_KEYS


def test_the_command_line_refuses_a_typo_in_a_yaml_file_and_starts_nothing(tmp_path, capsys):
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(tiny_config(name="typo").to_dict() | {"learning_rte": 5.0e-4}))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"grpo-studio: {path}: invalid run config:\n  - {TYPO}\n" == err
    assert main(["runs"]) == 0 and "No runs yet" in capsys.readouterr().out


def test_the_dashboards_import_refuses_a_typo(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("learning_rte: 5.0e-4\n")
    with pytest.raises(gr.Error, match=re.escape(TYPO)):
        new_run.import_yaml(str(path))


def test_the_api_refuses_a_typo_in_validate_and_launch():
    endpoints = api.endpoints(Access())
    text = yaml.safe_dump(tiny_config(name="typo").to_dict() | {"learning_rat": 1e-5, "bf16": True})
    checked = endpoints["validate"](text)
    assert checked["problems"] == ["learning_rat is not a setting: did you mean learning_rate?"]
    launched = endpoints["launch"](text)
    assert launched["run_id"] is None and launched["problems"] == checked["problems"]
    assert endpoints["runs"]() == []


def test_a_forks_setting_typo_names_the_setting():
    with pytest.raises(ForkError, match=re.escape("betta: no such setting; did you mean beta?")):
        forked_config(tiny_config().to_dict(), {"betta": "0.1"}, step=1)


def test_a_file_of_junk_keys_is_noted_and_only_its_first_keys_are_looked_at(monkeypatch):
    """50,000 unknown keys (a hostile upload): at most MAX_CHECKED are compared with the settings (each comparison
    costs edit distances in the dashboard's process), all are noted, 20 of them named."""
    from trainer.config import keys as config_keys

    looked_at = []
    real = config_keys.meant_setting
    monkeypatch.setattr(
        config_keys, "meant_setting", lambda key, settings: looked_at.append(key) or real(key, settings)
    )
    config, notes = RunConfig.from_dict({f"k{i:05d}": 1 for i in range(50_000)} | {"beta": 0.1})
    assert config.beta == 0.1 and len(notes) == 21 and notes[-1] == "... and 49980 more unknown settings"
    assert len(looked_at) == config_keys.MAX_CHECKED
