"""Zero-std groups told apart (issue 12): all answers scoring the same high (solved) vs the same low (never solved)
call for opposite fixes, so the worker logs each share and the health alert names the one that dominates."""

from __future__ import annotations

from trainer.insight.health import health_alerts
from trainer.job.callback import zero_std_shares


def _rows(groups: list[list[float | None]]) -> list[dict]:
    return [{"group_index": g, "total_reward": t} for g, totals in enumerate(groups) for t in totals]


def test_shares_of_solved_and_unsolved_groups():
    shares = zero_std_shares(_rows([[3.5] * 4, [0.0] * 4, [0.0] * 4, [0.0, 3.5, 0.0, 1.0]]))
    assert shares == {"zero_std/all_high": 0.25, "zero_std/all_low": 0.5}


def test_a_step_where_every_answer_scored_alike_counts_positive_as_high():
    assert zero_std_shares(_rows([[1.0] * 4, [1.0] * 4])) == {"zero_std/all_high": 1.0, "zero_std/all_low": 0.0}
    assert zero_std_shares(_rows([[0.0] * 4, [0.0] * 4])) == {"zero_std/all_high": 0.0, "zero_std/all_low": 1.0}
    assert zero_std_shares(_rows([[None] * 4])) == {}


def _series(**values: list[float]):
    return {key.replace("__", "/"): [(i + 1, v, float(i)) for i, v in enumerate(vs)] for key, vs in values.items()}


def _zero_std_alerts(high: float, low: float, heldout=None):
    series = _series(frac_reward_zero_std=[high + low] * 5, zero_std__all_high=[high] * 5, zero_std__all_low=[low] * 5)
    if heldout is not None:
        series["heldout/correct"] = [(step, v, 0.0) for step, v in heldout]
    return health_alerts(series)


def test_mostly_wrong_groups_are_a_warning_that_the_prompts_are_too_hard():
    (alert,) = _zero_std_alerts(0.05, 0.85)
    assert (alert.name, alert.level) == ("zero_std", "warning")
    assert "every answer scored low (85% of groups): too hard" in alert.message and "stop" not in alert.hint


def test_mostly_solved_groups_are_a_note_while_heldout_still_climbs():
    """The demo's reading (issue 34): 72 % of groups all right while held-out climbs 79 → 97 % is a working run."""
    climbing = [(0, 0.79), (10, 0.85), (20, 0.91), (30, 0.97)]
    (alert,) = _zero_std_alerts(0.72, 0.0, heldout=climbing)
    assert (alert.name, alert.level) == ("zero_std_solved", "note")
    assert "every answer scored high (72% of groups): those prompts are solved" in alert.message
    assert "normal for a working run: the other groups still carry the signal (28% of groups disagree)" in alert.hint
    assert "stop" not in alert.message + alert.hint.replace("stops sampling", "")
    # nearly every group alike, held-out still climbing: still a note, which says so
    (alert,) = _zero_std_alerts(0.95, 0.0, heldout=climbing)
    assert alert.level == "note"
    assert "97% at step 30 (best before its latest two evaluations: 85%), still improving" in alert.hint
    # ... and without a held-out curve, that nothing tells whether it still improves
    (alert,) = _zero_std_alerts(0.95, 0.0)
    assert alert.level == "note" and "no held-out curve yet" in alert.hint


def test_stop_is_said_only_when_heldout_has_stopped_improving_too():
    flat = [(0, 0.79), (10, 0.97), (20, 0.96), (30, 0.97)]
    (alert,) = _zero_std_alerts(0.8, 0.1, heldout=flat)
    assert (alert.name, alert.level) == ("zero_std", "warning")
    assert "97% at step 30 (best before its latest two evaluations: 97%): held-out has stopped" in alert.message
    assert alert.hint.endswith("train on harder prompts or stop here")
    # held-out flat, but 28 % of the groups still disagree: the signal does not say stop
    (alert,) = _zero_std_alerts(0.72, 0.0, heldout=flat)
    assert alert.level == "note" and "stop here" not in alert.hint


def test_mixed_causes_name_each_share():
    (alert,) = _zero_std_alerts(0.4, 0.4)
    assert alert.name == "zero_std" and "(40% all right: solved, 40% all wrong: too hard)" in alert.message
    assert "all right or all wrong" in alert.hint
