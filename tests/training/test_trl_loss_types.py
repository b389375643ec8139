"""TRL's loss types and GRPO settings beyond the reference recipe's (issue 38, item 7): each new loss type trains 3
steps of the built-in model in this process, as TRL's own tests train (GRPOTrainer built here, a group of 2, 8-token
completions) and logs its keys; and a config asking for what the installed TRL lacks is refused naming its version."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.helpers import tiny_config
from trainer import trl_features
from trainer.config import RunConfig

TRL115 = ROOT / ".ci-cache" / "trl115"
# what each loss type logs beside TRL's common keys (trl 1.16.0 grpo_trainer.py:3274-3288)
OWN_KEYS = {
    "cispo": "cispo_clip_ratio",
    "sapo": None,  # a soft gate: no clip to count
    "luspo": "clip_ratio/region_mean",
    "vespo": "vespo/phi_seq_mean",
}


@pytest.fixture(scope="module")
def train_three_steps(tmp_path_factory, tiny_model_path):
    """Train ``loss_type`` for 3 steps in this process; TRL's log history. Shrunk as TRL's tests are: a group of 2
    (the smallest with an advantage), 2 prompts a step, 8-token completions; num_iterations 2, so the ratio moves and
    the clip, the gate and the weights have something to act on; epsilon_high 5.0 as the ScaleRL paper sets cispo's
    ε_max (trl grpo_config.py's help)."""
    from trainer.job.worker import build_trainer

    def train(loss_type: str) -> list[dict]:
        config = tiny_config(
            name=f"loss-{loss_type}",
            loss_type=loss_type,
            beta=0.0,
            num_generations=2,
            per_device_train_batch_size=4,
            max_completion_length=8,
            max_steps=3,
            num_iterations=2,
            epsilon_high=5.0 if loss_type == "cispo" else 0.0,
            save_steps=100,  # no checkpoint: nothing here reads one
            measured_kl_steps=0,
            token_samples_per_step=0,
        )
        trainer = build_trainer(config, tmp_path_factory.mktemp(loss_type), [], lambda line: None)
        assert trainer.args.loss_type == loss_type
        trainer.train()
        return [entry for entry in trainer.state.log_history if "loss" in entry]

    return train


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", sorted(OWN_KEYS))
def test_each_new_loss_type_trains_three_steps_and_logs_its_keys(train_three_steps, loss_type):
    logged = train_three_steps(loss_type)
    assert [entry["step"] for entry in logged] == [1, 2, 3]
    assert all(math.isfinite(entry["loss"]) for entry in logged)
    if OWN_KEYS[loss_type]:
        values = [entry[OWN_KEYS[loss_type]] for entry in logged]
        assert all(math.isfinite(v) and v >= 0 for v in values), values


def test_the_form_offers_the_loss_types_the_installed_trl_has():
    choices = {f.name: f.metadata["choices"] for f in dataclasses.fields(RunConfig)}
    assert choices["loss_type"] == trl_features.installed().loss_types
    assert set(trl_features.NEW_LOSS_TYPES) <= set(choices["loss_type"])  # TRL 1.16, installed here
    assert set(trl_features.KNOBS) <= trl_features.installed().fields


def test_a_setting_the_installed_trl_lacks_is_refused_naming_its_version(monkeypatch):
    """A TRL without sapo or epsilon_high (its grpo_config.py declares neither): asking for them is refused with the
    installed version; leaving them at their defaults is fine."""
    old = trl_features.read_features(
        '    loss_type: str = field(default="dapo", metadata={"help": "\'grpo\', \'dapo\'"})\n'
        "    epsilon: float = field(default=0.2)\n",
        "1.14.0",
    )
    assert old.loss_types == trl_features.BASE_LOSS_TYPES and old.fields == {"loss_type", "epsilon"}
    monkeypatch.setattr(trl_features, "installed", lambda: old)
    problems = RunConfig(loss_type="sapo", epsilon_high=0.28, mask_truncated_completions=True).field_problems()
    assert problems == [
        "loss_type 'sapo' needs a newer TRL: the installed TRL 1.14.0 lacks it (TRL 1.15 and 1.16 have it)",
        "epsilon_high needs a newer TRL: the installed TRL 1.14.0 lacks it (TRL 1.15 and 1.16 have it)",
        "mask_truncated_completions needs a newer TRL: the installed TRL 1.14.0 lacks it (TRL 1.15 and 1.16 have it)",
    ]
    assert RunConfig().field_problems() == []
    assert RunConfig(loss_type="nope").field_problems() == [
        "loss_type 'nope': expected one of grpo, dapo, dr_grpo, bnpo, cispo, sapo, luspo, vespo"
    ]


def test_the_new_settings_reach_grpo_config(tmp_path):
    from trainer.job.trl_args import to_trl

    config = RunConfig(
        loss_type="luspo",
        epsilon_high=0.28,
        mask_truncated_completions=True,
        top_entropy_quantile=0.2,
        vllm_importance_sampling_correction=False,
        vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=2.0,
    )
    grpo = to_trl(config, str(tmp_path)).grpo
    assert (grpo.loss_type, grpo.importance_sampling_level, grpo.epsilon_high) == ("luspo", "sequence", 0.28)
    assert (grpo.mask_truncated_completions, grpo.top_entropy_quantile) == (True, 0.2)
    assert (grpo.vllm_importance_sampling_correction, grpo.vllm_importance_sampling_mode) == (False, "token_truncate")
    assert grpo.vllm_importance_sampling_clip_max == 2.0
    assert to_trl(RunConfig(), str(tmp_path)).grpo.epsilon_high is None  # 0: as epsilon, TRL's default


@pytest.mark.slow
@pytest.mark.skipif(not (TRL115 / "trl").is_dir(), reason="TRL 1.15 is not installed in .ci-cache/trl115")
def test_trl_115_offers_the_same_and_takes_them():
    """The GPU path's TRL (Unsloth allows trl <= 1.15.0): the same choices, and GRPOConfig takes the settings."""
    code = (
        "import trl; from trainer import trl_features; from trainer.config import RunConfig;"
        "from trainer.job.trl_args import to_trl;"
        "g = to_trl(RunConfig(loss_type='vespo', epsilon_high=0.28, top_entropy_quantile=0.5), '/tmp/x').grpo;"
        "f = trl_features.installed();"
        "print(trl.__version__, f.version, ','.join(f.loss_types), g.loss_type, g.epsilon_high, g.top_entropy_quantile)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TRL115), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-6:] == [
        "1.15.0",
        "1.15.0",
        "grpo,dapo,dr_grpo,bnpo,cispo,sapo,luspo,vespo",
        "vespo",
        "0.28",
        "0.5",
    ]
