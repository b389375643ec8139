"""The pre-launch probe (trainer/probe/): the tiny model sampled and scored with a run's own settings and rewards,
and the verdict the CLI turns into its exit code."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from app.cli.main import main
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import FIXTURES, tiny_config
from trainer.probe.job import WASTED_EXIT, probe_in_child
from trainer.probe.report import ProbeReport, histogram
from trainer.probe.sampling import run_probe

REWARDS = FIXTURES / "probe_rewards.py"


def _config_file(tmp_path, **overrides) -> Path:
    path = tmp_path / "run.yaml"
    tiny_config(**overrides).save(path)
    return path


# The built-in model is sure of the problems without a carry (about half): at temperature 1.0 a group of 4 on them
# always agrees, which puts a 4-completion probe right at the 50 % zero-std line. At 1.3 its groups disagree, as a
# healthy run's do (the shipped demo, 8 completions a group at 1.0, probes at 25 %).
HEALTHY = {"temperature": 1.3}


@pytest.mark.slow
def test_healthy_config_gets_verdict_ok_and_exit_0(tmp_path, tiny_model_path, capsys):
    assert main(["probe", str(_config_file(tmp_path, **HEALTHY))]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Verdict: ✅ ok")
    assert "8 prompts × 4 completions of builtin:tiny on cpu" in out
    for reward in ("correctness", "strict_format", "xmlcount"):
        assert f"- {reward} (weight 1): mean" in out


@pytest.mark.slow
def test_report_of_a_healthy_config(tiny_model_path):
    report = run_probe(tiny_config(**HEALTHY), prompts=6)
    assert (report.prompts, report.group_size, len(report.samples)) == (6, 4, 24)
    assert report.verdict == "ok", report.risks
    assert report.zero_std_share < 0.5 and math.isclose(report.signal_share, 1 - report.zero_std_share)
    assert [r.name for r in report.rewards] == ["correctness", "strict_format", "xmlcount"]
    assert all(sum(count for _, count in r.histogram) == 24 for r in report.rewards)
    assert 0 < report.mean_length <= report.max_completion_length == tiny_config().max_completion_length
    assert report.seconds_per_group > 0 and report.seconds_per_run == pytest.approx(report.seconds_per_step * 4)
    assert report.peak_memory_gb is None  # CPU: measured on CUDA only
    # advantages as GRPO computes them: zero-sum within each group
    for g in range(6):
        group = [s["advantage"] for s in report.samples if s["group_index"] == g]
        assert abs(sum(group)) < 1e-6
    assert ProbeReport.from_dict(report.to_dict()) == report  # what the dashboard's probe job hands back


@pytest.mark.slow
def test_unearnable_reward_is_named_and_exits_3(tmp_path, tiny_model_path, capsys):
    path = _config_file(tmp_path, reward_funcs=[f"{REWARDS}:unearnable"])
    assert main(["probe", str(path)]) == WASTED_EXIT == 3
    out = capsys.readouterr().out
    assert out.startswith("Verdict: ❌ the run would learn nothing")
    assert "100% of groups have identical rewards: GRPO learns nothing from them" in out
    assert "the model never earns unearnable: add soft_format / xmlcount for partial credit" in out


@pytest.mark.slow
def test_nan_and_truncation_are_risks_with_their_fix(tiny_model_path):
    config = tiny_config(reward_funcs=["xmlcount", f"{REWARDS}:sometimes_nan"], max_completion_length=6)
    report = run_probe(config, prompts=4)
    messages = [r.message for r in report.risks]
    assert report.verdict == "risky"
    assert "reward sometimes_nan returned NaN on 4 of 16 completions" in messages
    assert "100% of completions hit the length limit (6 tokens)" in messages
    assert report.truncated_share == 1.0 and report.mean_length == 6
    assert all(s["rewards"]["sometimes_nan"] is None for s in report.samples[::4])  # NaN stored as "no score"


@pytest.mark.slow
def test_dashboard_probe_runs_in_a_child_and_its_samples_become_step_0(tiny_model_path):
    from app.web.pages import new_run
    from trainer.config.access import Access

    config = tiny_config(name="probed")
    text, probed = new_run.probe(Access(), new_run.form_values(config))
    assert text.startswith("Verdict:") and probed["config"] == config.to_dict()
    message = new_run.launch_probed(Access(), probed, new_run.form_values(config))
    assert "The probe's samples are its step 0." in message
    with get_sessionmaker().begin() as s:
        run = queries.list_runs(s)[0]
        assert queries.sample_steps(s, run.id) == [0]
        assert len(queries.samples_at(s, run.id, 0)) == 8 * 4


def test_histogram_bins_many_values_and_lists_few():
    assert histogram([0.0, 0.5, 0.5]) == [("0", 1), ("0.5", 2)]
    binned = histogram([i / 100 for i in range(100)], bins=10)
    assert len(binned) == 10 and sum(c for _, c in binned) == 100 and binned[0] == ("0", 10)


@pytest.mark.slow
def test_probe_job_reports_a_failure_in_plain_words():
    from trainer.probe.job import ProbeError

    with pytest.raises(ProbeError, match="the probe failed"):
        probe_in_child(tiny_config(dataset_name="/nonexistent/data.jsonl"))


@pytest.mark.slow
def test_a_sweeps_probes_run_in_one_child_in_order_and_a_failure_names_its_member(tiny_model_path):
    from trainer.probe.job import ProbeError, probe_each_in_child

    # top_p 0.01 keeps only the likeliest token: every answer of a group is the same, so that probe says "wasted"
    healthy, same = tiny_config(name="healthy"), tiny_config(name="same", top_p=0.01)
    reports = probe_each_in_child([healthy, same, healthy])
    assert [r.verdict for r in reports] == ["ok", "wasted", "ok"]
    # one config probed twice in one child: the same samples and scores (each probe loads the model afresh)
    assert reports[0].samples == reports[2].samples and reports[0].rewards == reports[2].rewards
    with pytest.raises(ProbeError, match="the probe failed") as failed:
        probe_each_in_child([healthy, tiny_config(dataset_name="/nonexistent/data.jsonl")], prompts=2)
    assert failed.value.index == 1  # the second config's probe failed, after the first's report


def test_gpu_memory_is_reported_with_the_training_estimate():
    """The CUDA-only part of the report, from measured values as a GPU probe hands them over (no GPU needed)."""
    from trainer.probe.report import Measured, build_report

    config = tiny_config(num_generations=2, max_steps=10)
    measured = Measured(
        config=config,
        prompts=["1+1", "2+2"],
        answers=["2", "4"],
        completions=["a", "b", "c", "d"],
        scores={"correctness": [2.0, 0.0, 0.0, 0.0], "strict_format": [0.5] * 4, "xmlcount": [0.5] * 4},
        errors={},
        lengths=[10, 32, 5, 32],
        truncated=[False, True, False, True],
        seconds_per_group=2.0,
        forward_seconds_per_group=0.5,
        device="cuda",
        peak_memory_gb=10.0,
        adapter_gb=0.5,
    )
    report = build_report(measured)
    assert (report.zero_std_share, report.truncated_share, report.training_memory_gb) == (0.5, 0.5, 12.0)
    # 8 completions per step = 4 prompts: each 2 s of generation + (3 + 1 for beta > 0) x 0.5 s of forward passes
    assert report.seconds_per_step == 4 * (2.0 + 4 * 0.5) and report.seconds_per_run == 10 * report.seconds_per_step
    assert report.verdict == "risky"  # half the groups without signal, half the completions cut
    assert "GPU memory: 10.0 GB peak while probing; training needs about 12.0 GB" in report.to_text()
