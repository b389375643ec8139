"""Each loss type's defaults, refusals and chart notes, read from TRL's own code: cispo caps each token's importance
weight at epsilon_high itself (trl 1.16 grpo_trainer.py:3109-3110), so the 0 that means "as epsilon" elsewhere would
cut every update five-fold there (issue 57: grad_norm 0.011332 against 0.056659 with epsilon_high 5 at step 1)."""

from __future__ import annotations

import dataclasses

import pytest

from app.web.widgets.chart_notes import chart_notes
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config
from trainer.config import RunConfig
from trainer.job.trl_args import to_trl


def test_cispo_at_the_default_gets_scalerls_cap_and_other_loss_types_keep_trls_default(tmp_path):
    cispo = to_trl(RunConfig(loss_type="cispo", beta=0.04), str(tmp_path), cpu=True).grpo
    assert cispo.epsilon_high == 5.0
    grpo = to_trl(RunConfig(), str(tmp_path), cpu=True).grpo
    assert grpo.epsilon_high is None  # TRL reads None as epsilon (grpo_trainer.py:946)
    dapo = to_trl(RunConfig(loss_type="dapo", epsilon_high=0.28), str(tmp_path), cpu=True).grpo
    assert dapo.epsilon_high == 0.28


@pytest.mark.parametrize("cap", [0.2, 0.28, 1.0])
def test_a_cispo_cap_at_or_below_one_is_refused_saying_what_it_does(cap):
    (problem,) = [p for p in RunConfig(loss_type="cispo", epsilon_high=cap).field_problems() if "cispo" in p]
    assert problem.startswith(f"epsilon_high {cap:g} with loss_type cispo caps each token's importance weight")
    assert "expected above 1 (ScaleRL: 5.0), or 0 for 5.0" in problem
    assert not [p for p in RunConfig(loss_type="dapo", epsilon_high=cap).field_problems() if "epsilon_high" in p]


def test_the_clip_and_loss_charts_say_what_each_loss_type_makes_of_them():
    grpo = chart_notes({"loss_type": "grpo"})
    assert "loss" not in grpo and grpo["clip_ratio"].startswith("num_iterations = 1")  # ~0 is normal: no note
    cispo = chart_notes({"loss_type": "cispo"})
    assert cispo["clip_ratio"].startswith("cispo caps each token's importance weight at epsilon_high = 5;")
    assert "the cap never acts" in cispo["clip_ratio"] and "not ~0" in cispo["loss"]
    # a run stored with a cap below 1: its chart reads high, and says why
    low = chart_notes({"loss_type": "cispo", "epsilon_high": 0.2})["clip_ratio"]
    assert "below 1: even a token the update did not change is capped" in low
    for loss_type in ("dapo", "bnpo", "dr_grpo", "luspo"):
        assert "longer answers weigh more" in chart_notes({"loss_type": loss_type})["loss"] or loss_type == "luspo"
    assert "sapo" not in {k for k, v in chart_notes({"loss_type": "sapo"}).items() if k == "loss"}


@pytest.mark.slow
def test_cispo_at_the_default_updates_as_much_as_at_scalerls_cap(fresh_db, tiny_model_path):
    """The audit's scenario: the same seed, cispo with epsilon_high 0 (now ScaleRL's 5.0) and with 5; step 1's
    gradient norms are the same (before, 0 gave a fifth of it), and no token was capped on-policy."""
    from trainer.job.worker import run_worker

    norms, capped = {}, {}
    for cap in (0.0, 5.0):
        config = dataclasses.replace(
            tiny_config(), name=f"cispo-{cap:g}", loss_type="cispo", epsilon_high=cap, max_steps=1, max_grad_norm=1e6
        )
        run_id = create_run(config)
        assert run_worker(run_id).value == "completed"
        with get_sessionmaker().begin() as s:
            norms[cap] = queries.metric_series(s, run_id, "grad_norm")[0].value
            capped[cap] = queries.metric_series(s, run_id, "cispo_clip_ratio")[0].value
    assert norms[0.0] == pytest.approx(norms[5.0], rel=1e-4), norms
    assert norms[0.0] > 0 and capped == {0.0: 0.0, 5.0: 0.0}
