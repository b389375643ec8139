"""The verdicts a user trusts the dashboard for (issue 34), on stored rows that reproduce the audit's scenarios: the
honest demo (held-out 79 → 97 % and then at its ceiling while the sampled reward still climbs; 18 held-out problems
wrong at step 0 and right at the end; every training prompt visited once; 72 % of groups all right), a run paying
only for length (held-out up to 98 % and then down to 90 % over 40 steps under a flat reward), and a reward switched
on mid-run. The rows go into the test's SQLite through storage's own writers and are read back through the same
actions the Monitor, the API and the CLI call; each expected verdict is computed here from the rows, independently
of trainer/insight."""

from __future__ import annotations

import inspect
import math

import pytest

from app import actions
from app.cli.prompts import alerts_text
from storage import learning, queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config
from trainer.insight.learning_map import ALWAYS, LEARNING, LEARNT, NEVER, SEEN_ONCE
from trainer.insight.report import learning_report

PROBLEMS = 100  # the periodic evaluation's held-out set (trainer/evaluation/periodic_eval.EVAL_PROBLEMS)


def _wobble(step: int, size: float) -> float:
    """A deterministic zig-zag standing in for a small batch's noise (no random seed to depend on)."""
    return size * ((step * 7919) % 5 - 2) / 2


def _store(run_id: int, metrics: dict[int, dict[str, float]], samples=(), heldout=()) -> None:
    with get_sessionmaker().begin() as s:
        rows = [r for step, logs in metrics.items() for r in queries.metric_rows(run_id, step, logs, float(step))]
        queries.add_metric_rows(s, rows)
        if samples:
            queries.add_sample_rows(s, [dict(r, run_id=run_id) for r in samples])
        if heldout:
            learning.add_heldout_rows(s, [dict(r, run_id=run_id) for r in heldout])


def _heldout_rows(right_from: list[int | None], evals: list[int], wrong_from: dict[int, int] | None = None):
    """Per-problem greedy results: problem i is right from evaluation index ``right_from[i]`` on (None: never), and
    wrong again from index ``wrong_from[i]`` on where given."""
    rows = []
    for k, step in enumerate(evals):
        for i, start in enumerate(right_from):
            right = start is not None and k >= start and k < (wrong_from or {}).get(i, len(evals))
            rows.append({"step": step, "problem": i, "question": f"held-out {i}", "correct": 1.0 if right else 0.0})
    return rows


def _rates(rows) -> dict[int, float]:
    """Held-out correctness per evaluation, as the worker logs it: the share of problems right."""
    by_step: dict[int, list[float]] = {}
    for r in rows:
        by_step.setdefault(r["step"], []).append(r["correct"])
    return {step: sum(v) / len(v) for step, v in sorted(by_step.items())}


def _noise(a: float, b: float, n: int = PROBLEMS) -> float:
    return math.sqrt((a * (1 - a) + b * (1 - b)) / n)


# --- the honest demo ------------------------------------------------------------------------------------------------
DEMO_EVALS = list(range(0, 101, 10))
# when each of the 18 problems the run taught turned right (evaluation index): 79 → 85 → 90 → 94 → 96 → 97 %
TAUGHT = [1] * 6 + [2] * 5 + [3] * 4 + [4] * 2 + [5]


@pytest.fixture
def demo():
    """The demo's rows: 100 steps of 8 prompts × 8 answers, each prompt sampled once; the sampled correctness
    reward climbs from 1.1 to 1.8 (of 2) over steps 1-70, the steepest over 40-70, while held-out is at its
    96-97 % ceiling from step 40; 72 % of each step's groups all right; held-out evaluated every 10 steps."""
    run_id = create_run(tiny_config(name="demo-rows"))
    heldout = _heldout_rows([0] * 79 + TAUGHT + [None, None, 2], DEMO_EVALS, wrong_from={99: 5})
    rates = _rates(heldout)
    metrics, samples = {}, []
    for step in range(1, 101):
        correct = 1.1 + 0.7 * min(step, 70) / 70 + _wobble(step, 0.01)
        metrics[step] = {
            "reward": correct + 1.5 + _wobble(step + 1, 0.01),
            "rewards/correctness/mean": correct,
            "rewards/strict_format/mean": 0.5,
            "rewards/xmlcount/mean": 0.5 + _wobble(step + 2, 0.002),
            "completions/mean_length": 30 + _wobble(step + 3, 1.0),
            "frac_reward_zero_std": 0.72,
            "zero_std/all_high": 0.70,
            "zero_std/all_low": 0.02,
        }
        for group in range(8):
            prompt = f"train {step}-{group}"
            right = (step + group) % 9  # 0..8 right of 8
            for i in range(8):
                c = 2.0 if i < right else 0.0
                samples.append(
                    {
                        "step": step,
                        "group_index": group,
                        "prompt": prompt,
                        "completion": f"<answer>{i}</answer>",
                        "rewards": {"correctness": c, "strict_format": 0.5},
                        "total_reward": c + 0.5,
                        "advantage": 0.0,
                        "reference_answer": "1",
                    }
                )
    for step, rate in rates.items():
        metrics.setdefault(step, {})["heldout/correct"] = rate
    _store(run_id, metrics, samples, heldout)
    return run_id, heldout


def test_the_demo_map_counts_the_heldout_problems_the_run_taught_as_learnt(demo):
    run_id, heldout = demo
    first, last = min(DEMO_EVALS), max(DEMO_EVALS)
    at = {(r["problem"], r["step"]): r["correct"] for r in heldout}
    taught = sum(1 for p in range(PROBLEMS) if at[(p, first)] == 0.0 and at[(p, last)] == 1.0)
    throughout = sum(1 for p in range(PROBLEMS) if all(at[(p, s)] == 1.0 for s in DEMO_EVALS))
    assert (taught, throughout) == (18, 79)  # the audit's figures, read off the rows
    held = learning_report(run_id).map.counts("held-out")
    assert held[LEARNT] == taught and held[ALWAYS] == throughout
    assert held[NEVER] == 2 and held[LEARNING] == 0 and sum(held.values()) == PROBLEMS
    # the 100th problem was right at steps 20-40 and wrong from 50 on: forgetting
    assert learning_report(run_id).map.line("held-out 99", "held-out").cls == "forgetting"


def test_the_demo_map_calls_prompts_visited_once_seen_once_with_their_pass_rate(demo):
    run_id, _ = demo
    lm = learning_report(run_id).map
    counts = lm.counts()
    assert counts[SEEN_ONCE] == 800 and sum(counts.values()) == 800  # 100 steps × 8 prompts, none seen twice
    assert counts[ALWAYS] == counts[LEARNING] == 0
    line = lm.line("train 8-0")  # (8 + 0) % 9 = 8 of 8 right on its only visit
    assert line.cls == SEEN_ONCE and line.visits[0].rate == 1.0


def test_the_demo_gets_no_watch_alert_and_no_stop(demo):
    """The sampled reward climbs over steps 40-70 while held-out sits at 96-97 %: held-out is at its ceiling there
    (it could not show a gain beyond its noise) and the reward's rise is the correctness reward's own, so nothing
    is reward hacking; and with 28 % of the groups still disagreeing the banner says the solved ones are normal."""
    run_id, heldout = demo
    rates = _rates(heldout)
    before, after = rates[40], rates[70]
    assert 1 - max(before, after) <= 2 * _noise(before, after)  # the ceiling, by the rows
    assert learning_report(run_id).alerts == []
    listed = actions.run_alerts(run_id)
    assert [(a.name, a.level) for a in listed] == [("zero_std_solved", "note")]
    assert "those prompts are solved" in listed[0].message and "28% of groups disagree" in listed[0].hint
    assert all("stop here" not in a.message + a.hint for a in listed)
    assert actions.alerts(run_id) == [a.as_dict() for a in listed]  # the API's /alerts is the same list


def test_a_reward_rising_without_its_correctness_below_heldouts_ceiling_is_flagged():
    """The rule still fires where it should: the same climbing reward with a flat correctness reward and held-out
    flat at 60 % (room to rise) is reward outrunning held-out."""
    run_id = create_run(tiny_config(name="outruns"))
    metrics = {
        step: {"reward": 1.0 + 0.02 * step + _wobble(step, 0.01), "rewards/correctness/mean": 0.6 + _wobble(step, 0.02)}
        for step in range(1, 41)
    }
    for step in range(0, 41, 10):
        metrics.setdefault(step, {})["heldout/correct"] = 0.6
    _store(run_id, metrics)
    alerts = [a for a in learning_report(run_id).alerts if a.name == "reward outruns held-out"]
    assert [(a.first_step, a.last_step, a.holds_now) for a in alerts] == [(0, 40, True)]


# --- a run paying only for length -----------------------------------------------------------------------------------
LENGTH_EVALS = list(range(0, 81, 10))


@pytest.fixture
def length_hack():
    """Length pays, correctness (weight 0) is flat: reward and completion length climb together over steps 1-40,
    then both are flat; held-out rises to 98 % at step 40 and falls to 90 % by step 80."""
    run_id = create_run(tiny_config(name="length-rows"))
    right_from = [0] * 90 + [1] * 4 + [2] * 2 + [3] * 2 + [None] * 2  # 90 → 94 → 96 → 98 %, then
    wrong_from = dict(zip(range(82, 90), [5, 5, 6, 6, 7, 7, 8, 8]))  # then 98 → 96 → 94 → 92 → 90 %
    heldout = _heldout_rows(right_from, LENGTH_EVALS, wrong_from)
    rates = _rates(heldout)
    metrics = {}
    for step in range(1, 81):
        grow = min(step, 40)
        metrics[step] = {
            "reward": 0.2 + 0.02 * grow + _wobble(step, 0.01),
            "rewards/long_answers/mean": 0.2 + 0.02 * grow + _wobble(step, 0.01),
            "rewards/correctness/mean": 1.2 + _wobble(step + 1, 0.02),
            "completions/mean_length": 20 + grow + _wobble(step + 2, 0.5),
        }
    for step, rate in rates.items():
        metrics.setdefault(step, {})["heldout/correct"] = rate
    _store(run_id, metrics, heldout=heldout)
    return run_id, rates


def test_a_heldout_fall_is_an_alert_that_is_still_listed_at_the_end(length_hack):
    run_id, rates = length_hack
    assert [round(rates[s], 2) for s in LENGTH_EVALS] == [0.9, 0.94, 0.96, 0.98, 0.98, 0.96, 0.94, 0.92, 0.9]
    # independently: each evaluation below the best before it by more than twice the noise of the difference
    best, fell = rates[0], []
    for step in LENGTH_EVALS[1:]:
        if best - rates[step] > 2 * _noise(best, rates[step]):
            fell.append(step)
        best = max(best, rates[step])
    assert fell == [80]  # 98 → 92 % is within twice its noise (2σ = 6.1 points); 98 → 90 % is not (2σ = 6.6)
    alerts = learning_report(run_id).alerts
    (fall,) = [a for a in alerts if a.name == "held-out falls"]
    assert (fall.first_step, fall.last_step, fall.holds_now) == (30, 80, True)
    assert "from 98% (step 30) to 90% (step 80)" in fall.message
    # the length alert of steps 1-40 cleared once both went flat, and is still in the finished run's list
    (length,) = [a for a in alerts if a.name == "length tracks reward"]
    assert length.first_step == 1 and length.last_step < 50 and not length.holds_now
    # one list: the banner's, /alerts' and the CLI's
    listed = actions.run_alerts(run_id)
    assert {"held-out falls", "length tracks reward"} <= {a.name for a in listed}
    (entry,) = [a for a in actions.alerts(run_id) if a["name"] == "held-out falls"]
    assert (entry["source"], entry["first_step"], entry["last_step"], entry["holds_now"]) == ("watch", 30, 80, True)
    text = alerts_text(run_id, listed)
    assert "⚠ held-out falls (steps 30-80, holds now)" in text
    assert "⚠ length tracks reward (steps 1-" in text and "cleared)" in text


def test_the_banner_shows_the_watch_history_beside_the_health_signs(length_hack):
    from app.web.pages.monitor import health_markdown

    run_id, _ = length_hack
    with get_sessionmaker().begin() as s:
        series = queries.metrics_since(s, run_id)
    banner = health_markdown(series, 48, None, actions.watch_alerts(run_id))
    assert "**held-out falls** (steps 30-80)" in banner and "**length tracks reward** (steps 1-" in banner
    assert ", cleared)" in banner


# --- a reward switched on mid-run -----------------------------------------------------------------------------------
def test_a_reward_switched_on_mid_run_is_said_to_be_a_change_of_rewards_not_a_hack():
    run_id = create_run(tiny_config(name="switched-on"))
    metrics = {}
    for step in range(1, 61):
        fmt = 0.0 if step <= 30 else 0.5 + _wobble(step, 0.01)
        correct = 0.8 + _wobble(step, 0.02)
        metrics[step] = {
            "reward": correct + fmt,
            "rewards/correctness/mean": correct,
            "rewards/strict_format/mean": fmt,
            "completions/mean_length": 30 + _wobble(step + 1, 1.0),
        }
    for step in range(0, 61, 10):
        metrics.setdefault(step, {})["heldout/correct"] = 0.4
    _store(run_id, metrics)
    alerts = learning_report(run_id).alerts
    assert [(a.name, a.first_step) for a in alerts] == [("reward switched on", 31)]
    assert "strict_format paid nothing over the previous 10 steps" in alerts[0].message
    assert "the run's rewards changed here, this is no sign of hacking" in alerts[0].message


def test_a_fall_of_correctness_is_worded_as_a_fall():
    run_id = create_run(tiny_config(name="falls"))
    metrics = {step: {"rewards/correctness/mean": 1.6 if step <= 20 else 0.4} for step in range(1, 31)}
    _store(run_id, {s: {**m, "reward": m["rewards/correctness/mean"]} for s, m in metrics.items()})
    (alert,) = [a for a in learning_report(run_id).alerts if a.name == "reward jumps"]
    assert alert.first_step == 21 and "correctness fell from about 1.6 to 0.4" in alert.message


def test_grpo_studio_alerts_prints_the_one_list(length_hack, capsys):
    from app.cli.main import main

    run_id, _ = length_hack
    assert main(["alerts", str(run_id)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"run {run_id}: {len(actions.run_alerts(run_id))} alerts"
    assert "⚠ held-out falls (steps 30-80, holds now): held-out correctness fell from 98% (step 30)" in out


def test_the_watchs_alerts_reach_trackio_once_each_as_they_appear(length_hack, monkeypatch):
    """The worker's hook (trainer/job/tracker_alerts.py), fed the length run's steps as the worker logs them: each
    watch alert goes to trackio.alert() once, when its stretch first appears, and a failing send ends nothing."""
    import trackio

    from trainer.job.tracker_alerts import trackio_forwarder

    run_id, _ = length_hack
    sent = []

    def alert(title, text=None, level=trackio.AlertLevel.WARN, webhook_url=None):  # trackio.alert's own signature
        sent.append((title, text))

    assert _parameters(alert) == _parameters(trackio.alert)  # names, kinds and defaults
    monkeypatch.setattr(trackio, "alert", alert)
    assert trackio_forwarder(["wandb"]) is None
    forwarder = trackio_forwarder(["trackio"])
    with get_sessionmaker().begin() as s:
        series = queries.metrics_since(s, run_id)
    for step in sorted({int(p[0]) for points in series.values() for p in points}):
        forwarder.observe(step, {k: v for k, points in series.items() for st, v, _ in points if st == step})
    forwarder.judge()  # the run's end
    titles = [title for title, _ in sent]
    assert len(titles) == len(set(titles))  # once each
    assert any(t.startswith("length tracks reward (steps 1-") for t in titles)
    assert "held-out falls (steps 30-80)" in titles
    monkeypatch.setattr(trackio, "alert", lambda title, text=None, level=None, webhook_url=None: 1 / 0)
    trackio_forwarder(["trackio"]).send("a title", "a text", "warn")  # logged, not raised


def _parameters(fn) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]
