"""RunConfig: defaults, validation messages, file round trips and the TRL conversion."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from trainer import review
from trainer.config import SYSTEM_PROMPT, ConfigError, RunConfig
from trainer.review import load_and_validate


def test_defaults_are_the_reference_recipe_stated_explicitly():
    c = RunConfig()
    assert review.problems(c) == []
    assert (c.beta, c.loss_type, c.num_generations, c.learning_rate) == (0.04, "grpo", 8, 5e-6)
    assert (c.max_prompt_length, c.max_completion_length, c.max_steps) == (256, 200, 250)
    assert (c.warmup_ratio, c.max_grad_norm, c.lora_r, c.lora_alpha) == (0.1, 0.1, 32, 64)
    assert c.lora_target_modules == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert (c.load_in_4bit, c.use_vllm, c.vllm_gpu_memory_utilization, c.max_seq_length) == (True, True, 0.6, 1024)
    assert c.system_prompt == SYSTEM_PROMPT
    assert c.reward_funcs == ["xmlcount", "soft_format", "strict_format", "int", "correctness"]


def test_every_field_has_help_group_and_range_metadata():
    for f in dataclasses.fields(RunConfig):
        assert f.metadata["help"].strip(), f.name
        assert f.metadata["group"] in ("model", "data", "rewards", "grpo", "lora", "generation", "advanced", "cluster")
    ranged = {f.name: f.metadata for f in dataclasses.fields(RunConfig)}
    assert ranged["num_generations"]["min"] == 2
    # TRL's newer loss types where the installed TRL has them (issue 38; TRL 1.16 here has all four)
    assert ranged["loss_type"]["choices"] == ("grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_generations": 1}, "group size 1: GRPO needs at least 2 completions per prompt"),
        ({"num_generations": 3}, "8 completions per step is not divisible by the group size 3"),
        ({"beta": -0.1}, "beta -0.1: expected a value from 0 to 10"),
        ({"learning_rate": 0.0}, "learning_rate 0: expected a value from 1e-09 to 1"),
        ({"loss_type": "ppo"}, "loss_type 'ppo': expected one of grpo, dapo, dr_grpo, bnpo"),
        ({"reward_funcs": ["nonsense"]}, "unknown reward function 'nonsense'"),
        ({"reward_funcs": []}, "reward_funcs is empty"),
        ({"reward_weights": [1.0, 2.0]}, "2 reward weights for 5 reward functions"),
        ({"model_name_or_path": "./no/such/dir"}, "model './no/such/dir': no such directory"),
        ({"model_name_or_path": "builtin:huge"}, "the built-in models are builtin:tiny, builtin:tiny-tools"),
        ({"dataset_name": "missing.jsonl"}, "dataset 'missing.jsonl': no such file"),
        ({"dataset_name": "builtin:poetry"}, "built-in data sets are builtin:arithmetic"),
        ({"max_completion_length": 1000}, "exceeds max_seq_length 1024"),
        ({"lora_target_modules": []}, "lora_target_modules is empty"),
        ({"name": "  "}, "name is empty"),
        ({"top_p": 0.0}, "top_p 0: expected a value from 0.01 to 1"),
    ],
)
def test_each_invalid_value_has_its_own_message(change, message):
    problems = review.problems(RunConfig(**change))
    assert any(message in p for p in problems), problems


def test_all_problems_are_reported_at_once():
    problems = review.problems(RunConfig(num_generations=1, beta=-1.0, loss_type="x", reward_funcs=["nope"], lora_r=0))
    assert len(problems) == 5, problems


def test_yaml_round_trip(tmp_path):
    original = RunConfig(name="round trip", beta=0.02, reward_funcs=["int", "correctness"], reward_weights=[0.5, 2.0])
    path = tmp_path / "c.yaml"
    original.save(path)
    loaded, notes = RunConfig.load(path)
    assert loaded == original and notes == []
    # a flat mapping of field names, nothing nested
    assert all(not isinstance(v, dict) for v in yaml.safe_load(path.read_text()).values())


def test_json_round_trip(tmp_path):
    original = RunConfig(name="json", num_generations=4, per_device_train_batch_size=4)
    path = tmp_path / "c.json"
    original.save(path)
    assert RunConfig.load(path) == (original, [])


def test_trl_recipe_file_mostly_loads(tmp_path):
    """A TRL/open-r1 style recipe: known keys are taken (5e-6 without a dot is a string to PyYAML), others noted."""
    path = tmp_path / "recipe.yaml"
    path.write_text(
        "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nlearning_rate: 5e-6\nbeta: 0.02\nnum_generations: 8\n"
        "bf16: true\noutput_dir: data/out\nlora_target_modules: q_proj, v_proj\n"
    )
    config, notes = RunConfig.load(path)
    assert config.model_name_or_path == "Qwen/Qwen2.5-0.5B-Instruct"
    assert config.learning_rate == 5e-6 and config.beta == 0.02
    assert config.lora_target_modules == ["q_proj", "v_proj"]
    assert notes == ["ignored unknown setting 'bf16'", "ignored unknown setting 'output_dir'"]


def test_a_stored_config_is_read_back_whichever_version_stored_it():
    """Issue 60.2: RunConfig.from_stored, the one reader of a run's stored config, ignores a key that is no setting,
    gives a missing setting RunConfig's default and a value that no longer reads as its type that default too."""
    config = RunConfig.from_stored({"lora_r": 8, "a_retired_setting": 1, "beta": "high"})
    assert config.lora_r == 8 and config.beta == RunConfig().beta
    assert RunConfig.from_stored(None) == RunConfig() == RunConfig.from_stored({})
    assert RunConfig.from_stored(RunConfig(lora_r=4, name="stored").to_dict()) == RunConfig(lora_r=4, name="stored")


def test_wrong_types_are_listed_together():
    with pytest.raises(ConfigError) as err:
        RunConfig.from_dict({"num_generations": "eight", "beta": [1], "use_vllm": "maybe", "max_steps": 2.5})
    assert len(err.value.problems) == 4
    assert "num_generations: expected a whole number, got 'eight'" in err.value.problems


def test_to_trl_states_grpo_studio_defaults_on_installed_trl(tmp_path):
    from trainer.job.trl_args import to_trl

    args = to_trl(RunConfig(), str(tmp_path))
    g = args.grpo
    assert (g.beta, g.loss_type, g.num_generations, g.epsilon) == (0.04, "grpo", 8, 0.2)
    assert (g.learning_rate, g.max_completion_length, g.max_grad_norm) == (5e-6, 200, 0.1)
    assert g.reward_weights == [1.0] * 5
    assert args.lora.r == 32 and args.lora.lora_alpha == 64
    assert set(args.lora.target_modules) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    if hasattr(g, "max_prompt_length"):
        assert g.max_prompt_length == 256 and not args.prompt_truncation_needed
    else:
        assert args.prompt_truncation_needed and "cuts prompts to 256 tokens" in args.notes[0]


# Every setting marked ``trl`` in RunConfig's metadata, each changed from its default (and still valid together).
CHANGED_FOR_TRL = {
    "num_generations": 4,
    "beta": 0.02,
    "epsilon": 0.3,
    "loss_type": "dapo",
    "epsilon_high": 0.28,
    "mask_truncated_completions": True,
    "top_entropy_quantile": 0.2,
    "scale_rewards": "batch",
    "learning_rate": 1e-5,
    "max_steps": 7,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 2,
    "warmup_ratio": 0.2,
    "lr_scheduler_type": "linear",
    "max_grad_norm": 0.5,
    "num_iterations": 2,
    "steps_per_generation": 3,  # 4 completions × 3 = 12, whole groups of 4
    "seed": 3,
    "logging_steps": 2,
    "save_steps": 5,
    "max_prompt_length": 100,
    "max_completion_length": 50,
    "temperature": 0.7,
    "top_p": 0.9,
    "vllm_gpu_memory_utilization": 0.3,
    "vllm_importance_sampling_correction": False,
    "vllm_importance_sampling_mode": "token_mask",
    "vllm_importance_sampling_clip_max": 2.0,
    "gradient_checkpointing": False,
    "max_seq_length": 512,
}


def test_settings_marked_for_trl_reach_grpo_config(tmp_path):
    """Each field flagged ``trl`` arrives in the installed GRPOConfig under its TRL name, when that TRL has it."""
    from trl import GRPOConfig

    from trainer.job.trl_args import to_trl

    flagged = {f.name: f.metadata["trl"] for f in dataclasses.fields(RunConfig) if f.metadata["trl"]}
    assert set(flagged) == set(CHANGED_FOR_TRL)
    config = RunConfig(**CHANGED_FOR_TRL)
    assert review.problems(config) == []
    grpo = to_trl(config, str(tmp_path)).grpo
    accepted = {f.name for f in dataclasses.fields(GRPOConfig)}
    arrived = {name: (name if trl is True else trl) for name, trl in flagged.items()}
    assert arrived["max_seq_length"] == "vllm_max_model_length"
    for name, trl_name in arrived.items():
        if trl_name in accepted:
            assert getattr(grpo, trl_name) == CHANGED_FOR_TRL[name], name


def test_settings_named_as_in_grpo_config_are_marked_for_trl():
    """A new RunConfig field that TRL also has is passed to TRL unless it is one of the few decided elsewhere."""
    from trl import GRPOConfig

    decided_elsewhere = {
        "use_vllm": "the backend decides (vLLM installed, a GPU)",
        "reward_weights": "passed as RunConfig.weights(), 1.0 each when empty",
        "vllm_mode": "passed with the server's address in server mode (trl_args.vllm_server_kwargs)",
        "eval_steps": "grpo-studio's own held-out evaluation (trainer.evaluation.periodic_eval), not TRL's eval loop",
        "report_to": "passed as the list, or 'none' when empty (trl_args.grpo_kwargs)",
    }
    accepted = {f.name for f in dataclasses.fields(GRPOConfig)}
    unmarked = {f.name for f in dataclasses.fields(RunConfig) if f.name in accepted and not f.metadata["trl"]}
    assert unmarked == set(decided_elsewhere)


def test_peft_gets_the_lora_settings(tmp_path):
    from trainer.job.trl_args import to_trl
    from trainer.loading.backend import lora_kwargs

    config = RunConfig(lora_r=16, lora_alpha=8, lora_dropout=0.1, lora_target_modules=["q_proj", "v_proj"])
    lora = to_trl(config, str(tmp_path)).lora
    assert lora_kwargs(config) == {
        "r": 16,
        "lora_alpha": 8,
        "lora_dropout": 0.1,
        "target_modules": ["q_proj", "v_proj"],
        "bias": "none",
    }
    assert (lora.r, lora.lora_alpha, lora.lora_dropout, lora.bias) == (16, 8, 0.1, "none")
    assert set(lora.target_modules) == {"q_proj", "v_proj"} and lora.task_type == "CAUSAL_LM"


def test_invalid_config_file_exits_nonzero_and_starts_nothing(tmp_path):
    from storage import queries
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as s:
        before = len(queries.list_runs(s))
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_generations: 1\nbeta: -2\nreward_funcs: [nope]\n")
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "run", str(bad)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 2
    assert "group size 1" in result.stderr and "beta -2" in result.stderr and "'nope'" in result.stderr
    with get_sessionmaker().begin() as s:
        assert len(queries.list_runs(s)) == before


def test_load_and_validate_raises_with_every_problem(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("num_generations: 1\nmax_steps: 0\n")
    with pytest.raises(ConfigError) as err:
        load_and_validate(path)
    assert len(err.value.problems) == 2
