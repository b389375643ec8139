"""A collapse gets one diagnosis naming its likely cause (issue 57, item 2). The audit's run, reproduced here on the
built-in model: the offline demo at a learning rate of 5e-2, whose text turned to byte soup and then to lines of
spaces, held-out 79 → 0 %, KL 0 → 7.2 nats per token in 4 steps. Before, three alerts blamed the task ("too hard",
"raise max_completion_length"); now one diagnosis names the learning rate and beta, and the task-difficulty advice
is held back because held-out shows the model could do the task before it broke. The literal series pin each
threshold; the real run checks them against what the model actually writes."""

from __future__ import annotations

import dataclasses

import pytest

from app import actions
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config
from trainer.insight.alerts import TASK_ADVICE, alert_list
from trainer.insight.collapse import (
    ENTROPY_JUMP,
    JUMP_STEPS,
    KL_JUMP,
    REPEATING_KEY,
    UNUSUAL_KEY,
    alphabet,
    collapses,
    loops,
    text_signs,
)
from trainer.insight.health import health_alerts

HONEST = "<reasoning>\n10 - 2 = 8\n3 - 1 = 2\n30 - 12 = 28\n</reasoning>\n<answer>\n28\n</answer>"  # the demo's own


def _series(**columns):
    return {
        key.replace("__", "/"): [(step, value) for step, value in enumerate(values, 1)]
        for key, values in columns.items()
    }


# --- the text's signs -----------------------------------------------------------------------------------------------
def test_a_loop_is_a_unit_said_four_times_over_a_quarter_of_the_answer():
    assert not loops(HONEST) and not loops("")
    assert loops(" " * 48) and loops("55545\n54358 - 39" + " + +" * 12)  # the collapsed run's steps 8-10 and 6
    assert not loops(HONEST + " +" * 4)  # four copies of " +", 8 of 84 characters: under a quarter
    assert loops("I think that " * 5)  # a phrase said over and over


def test_characters_outside_the_bases_alphabet_or_no_text_at_all_are_unusual():
    known = alphabet(["What is 12 + 30?", HONEST])
    assert "\ufffd" not in known and "\x10" not in alphabet(["a\x10b"])
    assert text_signs([HONEST, HONEST], known) == {REPEATING_KEY: 0.0, UNUSUAL_KEY: 0.0}
    soup = "{�\\�Rp\x7f��"  # 9 characters from the collapsed run's step 7, none of them the base's
    signs = text_signs([HONEST, soup], known)
    assert len(soup) == 9 and signs[UNUSUAL_KEY] == pytest.approx(9 / (len(HONEST) + 9)) and signs[REPEATING_KEY] == 0.0
    assert text_signs([], known) == {}


# --- the judgement on literal series --------------------------------------------------------------------------------
def test_a_kl_jump_within_a_few_steps_is_a_collapse_and_the_same_rise_spread_over_many_steps_is_not():
    jump = collapses(_series(kl=[0.0, 0.0, 0.8, 2.5, 7.2, 8.2], learning_rate=[0.0, 0.05, 0.048, 0.044, 0.038, 0.03]))
    assert [(c.first_step, c.last_step, c.holds_now, c.learning_rate) for c in jump] == [(4, 6, True, 0.05)]
    assert jump[0].evidence == ("KL rose from 0 (step 1) to 8.2 nats per token by step 6",)
    # the same 1.2 nats over 30 steps: a drift (the health banner's "KL climbing fast"), no collapse
    assert collapses(_series(kl=[0.04 * i for i in range(31)])) == []
    # a jump of just under KL_JUMP within JUMP_STEPS steps is none either
    assert collapses(_series(kl=[0.0] * 3 + [KL_JUMP * 0.99] * 3)) == []
    assert JUMP_STEPS == 5 and ENTROPY_JUMP == 1.0


def test_a_collapse_clears_when_kl_and_the_text_are_back_and_a_new_one_is_a_new_stretch():
    series = _series(
        entropy=[0.02, 0.02, 1.5, 1.6, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03],
        text__repeating=[0.0] * 10 + [0.9, 0.0],
    )
    assert [(c.first_step, c.last_step, c.holds_now) for c in collapses(series)] == [(3, 4, False), (11, 11, False)]


def _collapsed_series(heldout_before: float) -> dict:
    """Twelve steps: held-out at ``heldout_before`` at step 0, KL jumping at step 4, then every group all wrong and
    every answer cut at the length limit (what the audit's run logged)."""
    series = _series(
        kl=[0.0, 0.0, 0.8, 2.5, 7.2, 8.2, 6.3, 9.7, 9.3, 9.6, 9.6, 9.6],
        frac_reward_zero_std=[0.25, 0.75] + [1.0] * 10,
        zero_std__all_high=[0.25, 0.75] + [0.0] * 10,
        zero_std__all_low=[0.0, 0.0] + [1.0] * 10,
        completions__clipped_ratio=[0.0, 0.0] + [1.0] * 10,
        reward_std=[1.0, 0.4] + [0.0] * 10,
        text__repeating=[0.0] * 7 + [1.0] * 5,
    )
    series["heldout/correct"] = [(0, heldout_before), (5, 0.0), (10, 0.0)]
    return series


def test_after_a_collapse_of_a_model_that_could_do_the_task_the_task_advice_is_held_back():
    series = _collapsed_series(0.79)
    raw = {a.name for a in health_alerts(series)}
    assert {"zero_std", "length_limit"} <= raw  # the signs themselves still read so
    listed = alert_list(series)
    assert not {a.name for a in listed} & TASK_ADVICE
    (collapse,) = [a for a in listed if a.name == "collapse"]
    assert "held-out was 79% at step 0, so the task is not too hard" in collapse.message
    assert "held-out falls" in {a.name for a in listed}  # right, and kept


def test_a_collapse_of_a_model_that_never_did_the_task_keeps_the_task_advice():
    listed = alert_list(_collapsed_series(0.0))
    assert "collapse" in {a.name for a in listed} and "zero_std" in {a.name for a in listed}
    (collapse,) = [a for a in listed if a.name == "collapse"]
    assert "not too hard" not in collapse.message


# --- the audit's run ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def collapsed_run(module_database, tiny_model_path):
    """The offline demo at a learning rate of 5e-2, 10 steps, held-out at steps 0, 5 and 10 (about 20 s on 2 cores)."""
    from trainer.job.worker import run_worker
    from trainer.presets import tiny_demo

    config = dataclasses.replace(
        tiny_demo(), name="lr-5e-2", learning_rate=5e-2, max_steps=10, eval_steps=5, save_steps=100
    )
    run_id = create_run(config)
    assert run_worker(run_id).value == "completed"
    with get_sessionmaker().begin() as s:
        series = {k: [(st, v) for st, v, _ in points] for k, points in queries.metrics_since(s, run_id).items()}
    return run_id, series


@pytest.mark.slow
def test_the_audits_collapse_gets_one_diagnosis_naming_the_learning_rate_and_no_task_advice(collapsed_run):
    run_id, series = collapsed_run
    kl, heldout = dict(series["kl"]), dict(series["heldout/correct"])
    # the audit's scenario, read off the stored rows: KL up by more than a nat within JUMP_STEPS steps, held-out
    # from 79 % to 0
    assert any(kl[s] - min(kl[t] for t in kl if 0 < s - t <= JUMP_STEPS) >= KL_JUMP for s in kl if s > 1), kl
    assert heldout[0] == pytest.approx(0.79) and heldout[10] == 0.0
    listed = actions.run_alerts(run_id)
    (collapse,) = [a for a in listed if a.name == "collapse"]
    assert collapse.first_step <= 5 and collapse.holds_now
    assert "the policy collapsed at a learning rate of 0.05" in collapse.message
    assert "held-out was 79% at step 0, so the task is not too hard" in collapse.message
    assert collapse.hint.startswith("likely cause: too high a learning rate, or too small a beta")
    words = " ".join(a.message + " " + a.hint for a in listed)
    assert "too hard, no learning signal" not in words and "raise max_completion_length" not in words
    assert "held-out falls" in {a.name for a in listed}
    # the health signs the suppression held back are there in the rows
    assert {"zero_std", "length_limit"} <= {a.name for a in health_alerts(series)}


@pytest.mark.slow
def test_the_worker_logs_the_texts_signs_and_the_collapsed_text_shows_them(collapsed_run):
    run_id, series = collapsed_run
    repeating, unusual = dict(series[REPEATING_KEY]), dict(series[UNUSUAL_KEY])
    assert sorted(repeating) == sorted(unusual) == list(range(1, 11))
    assert repeating[1] == unusual[1] == 0.0  # the base's own answers
    # Which sign the wreck shows when depends on the CPU's float rounding (a learning rate of 5e-2 is chaotic): on an
    # Intel core with AVX-512 the text looped from step 8 to 10; on an AMD EPYC it looped at steps 6-7 (0.53, 1.0)
    # and turned to byte soup from step 8 (unusual 0.41). Either way half a step's answers loop at some step, and
    # some step's text is at least 5 % characters the base never writes.
    peak = max(repeating, key=repeating.get)
    assert repeating[peak] >= 0.5 and peak > 2 and max(unusual.values()) >= 0.05, (repeating, unusual)
    # recomputed from the stored completions of that step
    with get_sessionmaker().begin() as s:
        texts = [row.completion for row in queries.samples_at(s, run_id, peak)]
    assert repeating[peak] == pytest.approx(sum(map(loops, texts)) / len(texts))


# --- a healthy small run ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_run(module_database, tiny_model_path):
    """The suite's own small run shape (2 prompts x 4 answers a step, learning rate 1e-3), 20 healthy steps: its first
    step writes too few answers to hold every character the task uses (about 15 s on 2 cores)."""
    from trainer.job.worker import run_worker

    config = tiny_config(model_name_or_path=str(tiny_model_path), name="small", max_steps=20, save_steps=100)
    run_id = create_run(config)
    assert run_worker(run_id).value == "completed"
    return run_id


def _shares(completions: list[str], known: set[str]) -> float:
    chars = "".join(completions)
    return sum(1 for c in chars if c not in known) / len(chars)


@pytest.mark.slow
def test_a_healthy_small_run_whose_first_step_missed_some_digits_is_not_called_collapsed(small_run):
    with get_sessionmaker().begin() as s:
        steps = {step: queries.samples_at(s, small_run, step) for step in range(1, 21)}
        unusual = {p.step: p.value for p in queries.metric_series(s, small_run, UNUSUAL_KEY)}
    first = steps[1]
    first_step_only = {c for row in first for c in row.prompt + row.completion}
    # the fault, recomputed from the stored rows: against the first step's characters alone (the alphabet before),
    # the healthy answers of some later step had 5 % or more "unusual" characters (digits and "-" it had not written)
    before = {step: _shares([r.completion for r in rows], first_step_only) for step, rows in steps.items()}
    assert max(before.values()) >= 0.05, before
    # against every character of the run's stored questions and its first answers, none is unusual at any step
    task = first_step_only | {c for rows in steps.values() for r in rows for c in r.prompt}
    assert all(_shares([r.completion for r in rows], task) < 0.05 for rows in steps.values())
    assert sorted(unusual) == list(range(1, 21)) and max(unusual.values()) < 0.05, unusual
    assert "collapse" not in {a.name for a in actions.run_alerts(small_run)}


def test_the_tasks_texts_are_its_prompts_whole_and_its_reference_answers_and_nothing_for_a_stream():
    from datasets import Dataset

    from trainer.job.callback import task_texts

    system = {"role": "system", "content": "Answer in <answer> tags."}
    rows = [
        {"prompt": [system, {"role": "user", "content": f"What is {a} - 5?"}], "answer": str(a - 5)} for a in (6, 9)
    ]
    assert task_texts(Dataset.from_list(rows)) == [
        "Answer in <answer> tags.\nWhat is 6 - 5?",
        "Answer in <answer> tags.\nWhat is 9 - 5?",
        "1",
        "4",
    ]
    assert task_texts(Dataset.from_list(rows), limit=1) == ["Answer in <answer> tags.\nWhat is 6 - 5?", "1"]
    assert task_texts(iter(rows)) == [] and task_texts(None) == []
