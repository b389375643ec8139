"""Zero-std groups told apart (issue 12): all answers scoring the same high (solved) vs the same low (never solved)
call for opposite fixes, so the worker logs each share and the health alert names the one that dominates."""

from __future__ import annotations

import pytest

from app.health import health_alerts
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


@pytest.mark.parametrize(
    "high, low, words",
    [
        (0.05, 0.85, "every answer scored low (85% of groups)"),
        (0.8, 0.1, "every answer scored high (80% of groups)"),
        (0.4, 0.4, "all right or all wrong"),
    ],
)
def test_the_alert_names_the_kind_that_dominates(high, low, words):
    alerts = health_alerts(
        _series(frac_reward_zero_std=[high + low] * 5, zero_std__all_high=[high] * 5, zero_std__all_low=[low] * 5)
    )
    assert [a.name for a in alerts] == ["zero_std"] and words in alerts[0].hint
