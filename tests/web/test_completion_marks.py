"""The completions table's marks without a browser (issue 29): a group whose answers scored alike is a tie, not a
"best" and a "worst"; shared top and bottom scores are all marked, group by group."""

from __future__ import annotations

from app.web.widgets.completions import BEST, TIE, WORST, group_marks


def test_a_group_that_scored_alike_is_a_tie_not_a_best():
    # step 40 of the issue: four answers at 2.25, advantage 0
    assert group_marks([0, 0, 0, 0], [2.25, 2.25, 2.25, 2.25]) == [TIE] * 4


def test_shared_top_and_bottom_scores_are_all_marked_and_groups_are_separate():
    groups = [0, 0, 0, 0, 1, 1]
    totals = [2.5, 2.5, 0.5, 1.0, 0.0, None]
    assert group_marks(groups, totals) == [BEST, BEST, WORST, "", "", ""]  # group 1: one scored answer, nothing to rank
