"""A sweep's pruning rules (trainer/sweeps/prune.py, issue 41), each computed from stored rows: quiet on an honest
member, speaking on a broken one with the sentence its log and the sweep's table show; and the scheduler's pass
(trainer/sweeps/tending.py) stopping a pruned running member through the normal stop path, its reason recorded."""

from __future__ import annotations

import pytest

from storage import queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from storage.models import RunStatus, SweepState
from storage.series import series_since
from trainer.config import sweep as sw
from trainer.insight.watch import watch
from trainer.sweeps.prune import judge, median_stop, points_of, probe_skip, signal_stop, watch_stop
from trainer.sweeps.tending import tend

SPEC = sw.parse({"settings": {"beta": [0.0, 0.04, 0.1]}, "prune": {"signal_window": 5}})
DEAD_PID = 2**30  # no such process: stopping the member marks it stopped without signalling anything


def _stored(metrics: dict[str, list[tuple[int, float]]]) -> dict:
    """``metrics`` written as a run's rows and read back as the pass reads them (storage.series.series_since)."""
    with get_sessionmaker().begin() as s:
        run = queries.create_run(s, "member", {}, 20)
        rows = []
        for key, points in metrics.items():
            for step, value in points:
                rows += queries.metric_rows(run.id, step, {key: value}, float(step))
        queries.add_metric_rows(s, rows)
        return series_since(s, run.id)


def _steps(values: list[float], start: int = 1) -> list[tuple[int, float]]:
    return [(start + i, v) for i, v in enumerate(values)]


# --- probe ----------------------------------------------------------------------------------------------------------
def test_the_probe_rule_skips_a_wasted_member_with_the_probes_reason_and_lets_a_risky_one_train():
    assert probe_skip("ok", []) is None
    assert probe_skip("risky", []) is None
    stop = probe_skip("wasted", ["every group scored alike: no advantage is ever non-zero"])
    assert stop.rule == "probe"
    assert stop.reason == (
        "skipped before training: the probe says the run would learn nothing (every group scored alike: no "
        "advantage is ever non-zero)"
    )


# --- signal gone ----------------------------------------------------------------------------------------------------
def test_the_signal_rule_is_quiet_while_groups_still_disagree():
    series = _stored({"frac_reward_zero_std": _steps([0.5, 0.7, 0.8, 0.6, 0.9, 0.7])})
    assert signal_stop(points_of(series["frac_reward_zero_std"]), SPEC.prune) is None


def test_the_signal_rule_waits_for_a_whole_window():
    series = _stored({"frac_reward_zero_std": _steps([1.0, 1.0, 1.0, 1.0])})
    assert signal_stop(points_of(series["frac_reward_zero_std"]), SPEC.prune) is None


def test_the_signal_rule_stops_a_member_whose_groups_all_scored_alike_and_says_which_way():
    series = _stored(
        {
            "frac_reward_zero_std": _steps([0.4, 0.9, 1.0, 0.95, 1.0, 1.0]),
            "zero_std/all_high": _steps([0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
        }
    )
    stop = judge(SPEC, series, peers=[])
    assert stop.rule == "signal" and stop.step == 6
    assert stop.reason == (
        "stopped at step 6: 97% of groups scored alike over the last 5 steps (0% all right, 97% all wrong), so their "
        "advantages are 0: the learning signal is gone"
    )


# --- the watch ------------------------------------------------------------------------------------------------------
def _heldout_run(heldout: list[float]) -> dict:
    return _stored(
        {"heldout/correct": [(5 * i, v) for i, v in enumerate(heldout)], "reward": _steps([0.1 * i for i in range(16)])}
    )


def test_the_watch_rule_is_quiet_while_heldout_correctness_rises_with_the_reward():
    series = _heldout_run([0.2, 0.4, 0.6, 0.7])
    assert watch_stop(watch(series, (), 100)) is None


def test_the_watch_rule_stops_a_member_whose_heldout_correctness_fell():
    series = _heldout_run([0.2, 0.8, 0.8, 0.3])
    stop = judge(SPEC, series, peers=[], alerts=watch(series, (), 100))
    assert stop.rule == "watch" and stop.step == 15
    assert stop.reason.startswith(
        "stopped at step 15: the reward-hacking watch says held-out correctness fell from 80% (step 5) to 30% (step 15)"
    )


def test_a_watch_sign_that_has_cleared_stops_nothing():
    series = _heldout_run([0.2, 0.8, 0.3, 0.8, 0.85])  # it fell at step 10, then came back
    alerts = watch(series, (), 100)
    assert [a.name for a in alerts] == ["held-out falls"] and not alerts[0].holds_now
    assert watch_stop(alerts) is None


# --- median ---------------------------------------------------------------------------------------------------------
PEERS = [[(0, 0.2), (5, 0.5), (10, 0.6)], [(0, 0.2), (5, 0.4), (10, 0.5)]]


def test_the_median_rule_lets_a_member_at_or_above_the_median_go_on():
    series = _stored({"heldout/correct": [(0, 0.2), (5, 0.5), (10, 0.55)]})
    assert median_stop(points_of(series["heldout/correct"]), PEERS, SPEC) is None


def test_the_median_rule_stops_a_member_below_the_median_of_the_others_at_the_same_evaluation():
    series = _stored({"heldout/correct": [(0, 0.2), (5, 0.3), (10, 0.35)]})
    stop = judge(SPEC, series, PEERS)
    assert stop.rule == "median" and stop.step == 10
    assert stop.reason == (
        "stopped at step 10: its best heldout/correct so far, 0.35, is below the median of the 2 other members at "
        "that step (0.55)"
    )


def test_the_median_rule_waits_for_its_warmup_and_for_enough_members_at_the_step():
    early = _stored({"heldout/correct": [(0, 0.0)]})
    assert median_stop(points_of(early["heldout/correct"]), PEERS, SPEC) is None  # one evaluation: the base's
    behind = [[(0, 0.2), (5, 0.9)], [(0, 0.2), (5, 0.8), (10, 0.9)]]  # only one other reached step 10
    assert median_stop([(0, 0.2), (5, 0.3), (10, 0.3)], behind, SPEC) is None


def test_the_median_rule_follows_the_direction_of_the_objective():
    loss = sw.parse({"objective": "loss", "direction": "min", "settings": {"beta": [0.0]}})
    peers = [[(1, 0.5), (2, 0.4)], [(1, 0.6), (2, 0.5)]]
    assert median_stop([(1, 0.3), (2, 0.2)], peers, loss) is None
    stop = median_stop([(1, 0.9), (2, 0.8)], peers, loss)
    assert "is above the median of the 2 other members at that step (0.45)" in stop.reason


def test_a_rule_turned_off_in_the_sweep_stays_quiet():
    off = sw.parse({"settings": {"beta": [0.0]}, "prune": {"signal": False, "median": False, "signal_window": 5}})
    series = _stored({"frac_reward_zero_std": _steps([1.0] * 6), "heldout/correct": [(0, 0.2), (5, 0.3), (10, 0.3)]})
    assert judge(off, series, PEERS) is None


# --- the scheduler's pass -------------------------------------------------------------------------------------------
def _sweep_of(s, spec, tmp_path, members):
    sweep = sweep_rows.create_sweep(s, "s", spec.to_dict(), {}, spec.objective, spec.direction)
    runs = []
    for i, metrics in enumerate(members):
        run = queries.create_run(s, f"s-{i}", {}, 20, sweep_id=sweep.id, sweep_point={"beta": i})
        queries.mark_running(s, run, DEAD_PID + i, str(tmp_path))
        rows = [
            r for key, pts in metrics.items() for st, v in pts for r in queries.metric_rows(run.id, st, {key: v}, 1)
        ]
        queries.add_metric_rows(s, rows)
        run.current_step = 10
        runs.append(run)
    return sweep, runs


def test_the_pass_stops_the_member_below_the_median_with_its_reason_and_leaves_the_others(tmp_path):
    objective = [[(0, 0.2), (5, 0.5), (10, 0.6)], [(0, 0.2), (5, 0.4), (10, 0.5)], [(0, 0.2), (5, 0.3), (10, 0.3)]]
    with get_sessionmaker().begin() as s:
        sweep, runs = _sweep_of(s, SPEC, tmp_path, [{"heldout/correct": o} for o in objective])
        sweep_id, ids = sweep.id, [r.id for r in runs]
    judged: dict[int, int] = {}
    with get_sessionmaker().begin() as s:
        stopped = tend(s, judged)
    assert [(run_id, stop.rule) for run_id, stop in stopped] == [(ids[2], "median")]
    with get_sessionmaker().begin() as s:
        table = sweep_rows.members(s, sweep_rows.get_sweep(s, sweep_id))
        assert [m.status for m in table] == [RunStatus.RUNNING, RunStatus.RUNNING, RunStatus.STOPPED]
        assert table[2].stop_reason.startswith("stopped at step 10: its best heldout/correct so far, 0.3, is below")
        log = [line.message for line in queries.log_tail(s, ids[2])]
        assert log[0].startswith("sweep: stopped at step 10: its best heldout/correct")
        assert [m.stop_reason for m in table[:2]] == [None, None]
    with get_sessionmaker().begin() as s:  # nothing new logged: not judged again, nothing more stopped
        assert tend(s, judged) == []


def test_a_sweep_is_finished_by_the_pass_once_its_members_have_ended(tmp_path):
    with get_sessionmaker().begin() as s:
        sweep, runs = _sweep_of(s, SPEC, tmp_path, [{}, {}])
        sweep_id = sweep.id
        for run in runs:
            queries.finish_run(s, run, RunStatus.COMPLETED)
    with get_sessionmaker().begin() as s:
        assert tend(s) == []
        assert sweep_rows.get_sweep(s, sweep_id).state == SweepState.FINISHED


@pytest.mark.parametrize("rule", ["signal", "watch"])
def test_the_pass_stops_a_member_by_grpos_own_signs(tmp_path, rule):
    broken = (
        {"frac_reward_zero_std": _steps([1.0] * 6)}
        if rule == "signal"
        else {
            "heldout/correct": [(0, 0.2), (5, 0.8), (10, 0.8), (15, 0.3)],
            "reward": _steps([0.1 * i for i in range(16)]),
        }
    )
    with get_sessionmaker().begin() as s:
        sweep, runs = _sweep_of(s, SPEC, tmp_path, [broken, {"frac_reward_zero_std": _steps([0.3] * 6)}])
        ids = [r.id for r in runs]
    with get_sessionmaker().begin() as s:
        assert [(run_id, stop.rule) for run_id, stop in tend(s)] == [(ids[0], rule)]


def test_the_dashboards_scheduler_tends_the_sweeps_after_each_pass(tmp_path):
    from app.web import server
    from trainer.sweeps.tending import Scheduler

    assert server.Scheduler is Scheduler
    with get_sessionmaker().begin() as s:
        sweep, runs = _sweep_of(s, SPEC, tmp_path, [{"frac_reward_zero_std": _steps([1.0] * 6)}])
        run_id = runs[0].id
    Scheduler().each_pass()
    with get_sessionmaker().begin() as s:
        run = queries.get_run(s, run_id)
        assert run.status == RunStatus.STOPPED and run.sweep_stop.startswith("stopped at step 6: 100% of groups")
