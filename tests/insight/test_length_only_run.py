"""The watch's "length tracks reward" fires only on growth beyond noise, on real runs (issue 57, item 3). The
audit's length-only run (a reward paying for length and nothing else) kept its completions at 35-38 tokens and got 6
stretches saying "completions grew from 36 to 36 tokens": the rule asked only that length and reward correlate and
that the later half of a window be longer at all, and a length-only reward correlates with length at every step.
Here the built-in model trains on tests/fixtures/length_reward.py's reward alone at the demo's shape, and its length stays
flat (30-39 tokens a step, and the old rule's condition holds in most windows); the less warmed-up sibling of the
built-in model, at a higher learning rate and a longer length limit, does grow its answers (39 to over 100 tokens).

Each test reads the stored rows back (the metrics and the sampled completions) and judges the length's growth
itself, with no code of trainer/insight but the window's size: in each window of ``2 * WINDOW`` consecutive steps,
the later half's mean length against the earlier half's, in tokens, in per cent, and in standard errors of that
difference read off the steps' own spread (sqrt(var(earlier) / 5 + var(later) / 5)). The product's alerts are read
the way the Monitor's banner, ``/alerts`` and ``grpo-studio alerts`` read them (app.actions.alerts)."""

from __future__ import annotations

import math
import re
import statistics

import pytest

from app import actions
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import FIXTURES, create_run, tiny_config
from trainer.insight.watch import WINDOW

LENGTH = f"{FIXTURES / 'length_reward.py'}:long_answers"
NAME = "length tracks reward"


def _train(model, **overrides) -> int:
    """A completed run of ``model`` paid by the length reward alone."""
    from trainer.job.worker import run_worker

    config = tiny_config(
        model_name_or_path=str(model), reward_funcs=[LENGTH], reward_weights=[1.0], save_steps=100, **overrides
    )
    run_id = create_run(config)
    assert run_worker(run_id).value == "completed"
    return run_id


@pytest.fixture(scope="module")
def flat_run(module_database, tiny_model_path) -> int:
    """The built-in model at the demo's shape (groups of 8, 8 prompts a step, its learning rate), paid for length
    only, 20 steps: 11 windows for the watch to judge (about 15 s on 2 cores)."""
    return _train(
        tiny_model_path,
        name="length-only",
        num_generations=8,
        per_device_train_batch_size=64,
        learning_rate=5e-4,
        max_steps=20,
    )


@pytest.fixture(scope="module")
def growing_run(module_database, format_learner_path) -> int:
    """The less warmed-up sibling, whose answers still vary, paid for length only at a learning rate of 5e-3 and a
    length limit of 128 tokens (the demo's 48 leaves room for 20 % growth at most), 16 steps (about 10 s)."""
    return _train(
        format_learner_path,
        name="length-grows",
        per_device_train_batch_size=16,  # 4 prompts x 4 completions
        learning_rate=5e-3,
        max_completion_length=128,
        max_steps=16,
    )


def _lengths(run_id: int) -> dict[int, float]:
    """The stored mean completion length (tokens) of each training step."""
    with get_sessionmaker().begin() as s:
        return {p.step: p.value for p in queries.metric_series(s, run_id, "completions/mean_length")}


def _growth(lengths: dict[int, float], last: int) -> tuple[float, float, float]:
    """The window of ``2 * WINDOW`` steps ending at ``last``: its earlier and later halves' mean lengths, and the
    standard error of their difference from the steps' own spread."""
    steps = sorted(s for s in lengths if s <= last)[-2 * WINDOW :]
    early, late = [lengths[s] for s in steps[:WINDOW]], [lengths[s] for s in steps[WINDOW:]]
    error = math.sqrt(statistics.variance(early) / WINDOW + statistics.variance(late) / WINDOW)
    return statistics.mean(early), statistics.mean(late), error


def _correlation(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.mean(xs), statistics.mean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.sqrt(
        sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys)
    )


@pytest.mark.slow
def test_the_length_only_reward_pays_each_sampled_answer_for_its_length_and_nothing_else(flat_run):
    """The scenario's premise, read off the stored samples: every answer's reward is its length in characters / 50,
    so the step's reward is its mean length and the two rise and fall together."""
    with get_sessionmaker().begin() as s:
        steps = queries.sample_steps(s, flat_run)
        assert steps == list(range(1, 21))
        for step in steps:
            samples = queries.samples_at(s, flat_run, step)
            assert len(samples) == 64
            for sample in samples:
                assert sample.rewards == {"long_answers": pytest.approx(len(sample.completion) / 50)}
                assert sample.total_reward == pytest.approx(len(sample.completion) / 50)


@pytest.mark.slow
def test_a_length_only_run_whose_length_stays_within_its_noise_gets_no_length_alert(flat_run):
    lengths = _lengths(flat_run)
    with get_sessionmaker().begin() as s:
        reward = {p.step: p.value for p in queries.metric_series(s, flat_run, "reward")}
    assert sorted(lengths) == sorted(reward) == list(range(1, 21))
    windows = {last: _growth(lengths, last) for last in range(2 * WINDOW, 21)}
    # the audit's scenario: in some window length and reward correlate and the later half is longer, which the old
    # rule (correlation >= 0.8 and any growth) flagged as "grew from 36 to 36"
    old_rule = [
        last
        for last, (before, after, _) in windows.items()
        if after > before
        and _correlation(
            [lengths[s] for s in range(last - 2 * WINDOW + 1, last + 1)],
            [reward[s] for s in range(last - 2 * WINDOW + 1, last + 1)],
        )
        >= 0.8
    ]
    assert old_rule, (lengths, reward)
    # and in no window did the length grow beyond its noise: by at most 2 standard errors of the difference of the
    # halves, or by less than 10 % of the earlier half
    for last, (before, after, error) in windows.items():
        assert after - before <= max(2 * error, 0.1 * before), (last, before, after, error, lengths)
    alerts = actions.alerts(flat_run)
    assert NAME not in {a["name"] for a in alerts}, alerts


@pytest.mark.slow
def test_a_length_only_run_whose_length_grows_gets_the_alert_with_the_growth_in_numbers(growing_run):
    lengths = _lengths(growing_run)
    alerts = [a for a in actions.alerts(growing_run) if a["name"] == NAME]
    assert alerts, (lengths, actions.alerts(growing_run))
    for alert in alerts:
        assert alert["source"] == "watch"
        # the figures of the stretch's latest window, recomputed from the rows: the growth it reports is real
        before, after, error = _growth(lengths, alert["last_step"])
        assert after - before > max(2 * error, 0.1 * before), (alert, lengths)
        expected = (
            f"completions grew from {before:.1f} to {after:.1f} tokens (+{100 * (after - before) / before:.0f} %, "
            f"{(after - before) / error:.1f} standard errors above its noise)"
        )
        assert alert["message"].startswith(expected), (alert["message"], expected)
        assert re.search(r"with the reward \(correlation (0\.[89]\d|1\.00)\)$", alert["message"]), alert["message"]
