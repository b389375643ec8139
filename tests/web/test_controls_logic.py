"""The dashboard's controls do what they say for the thing the user meant (issue 36), as plain functions without a
browser: Compare's reference answer belongs to the prompt it was picked with. tests/browser/test_browser_controls.py drives
the same controls in Chromium."""

from __future__ import annotations

from app.web.pages.compare import _summary, let_go_of_example, reference_for

PICKED = ["What is 24 − 21?", "3"]


def test_a_picked_reference_scores_its_own_prompt_only():
    assert reference_for("What is 24 − 21?", "3", PICKED) == "3"
    assert reference_for("  What is 24 − 21?\n", "3", PICKED) == "3"  # whitespace around it is the same prompt
    # pasted over, autofilled or set by a script: another prompt, whose reference is not "3"
    assert reference_for("What is 20 + 10?", "3", PICKED) is None
    # a reference typed by hand counts for any prompt; so does any reference when nothing was picked
    assert reference_for("What is 20 + 10?", "30", PICKED) == "30"
    assert reference_for("What is 20 + 10?", "3", None) == "3"
    assert reference_for("What is 20 + 10?", "  ", None) is None


def test_the_picker_lets_go_when_the_prompt_changes_and_keeps_a_typed_reference():
    unchanged = let_go_of_example("What is 24 − 21?", "3", PICKED)
    assert all(update == {"__type__": "update"} for update in unchanged)  # the pick itself changed the prompt
    example, reference, picked = let_go_of_example("What is 20 + 10?", "3", PICKED)
    assert example["value"] is None and reference == "" and picked is None
    example, reference, picked = let_go_of_example("What is 20 + 10?", "30", PICKED)
    assert example["value"] is None and reference == {"__type__": "update"} and picked is None
    assert all(update == {"__type__": "update"} for update in let_go_of_example("anything", "3", None))


def test_a_side_without_a_reference_is_not_called_wrong():
    class Side:
        mean_reward, formatted, correct = 0.5, 3, 0

    assert _summary("Base", Side, 4, "30").endswith("correct 0/4")
    assert _summary("Base", Side, 4, None).endswith("correct n/a (no reference answer)")


def test_the_monitor_polls_a_run_whose_sparse_key_has_nothing_new_in_a_packed_block():
    """Item 11: a key logged every N steps (the held-out score) had no point after the cache's last step in a packed
    block; the read returned an empty array for it and the Monitor's poll raised IndexError (index -1 of size 0)."""
    from app.actions.monitor_state import RunCache
    from storage import queries, series
    from storage.db import get_sessionmaker
    from storage.models import CHUNK_STEPS
    from tests.helpers import create_run, tiny_config

    run_id = create_run(tiny_config(name="sparse"))
    with get_sessionmaker().begin() as s:
        for step in range(1, CHUNK_STEPS + 3):
            logged = {"reward": float(step)} | ({"heldout/correct": 0.5} if step in (1, 10) else {})
            queries.add_metric_rows(s, queries.metric_rows(run_id, step, logged, float(step)))
        series.write_chunks(s, run_id, CHUNK_STEPS + 2)
    cache = RunCache(run_id, last_step=20, series={})
    with get_sessionmaker().begin() as s:
        assert "heldout/correct" not in series.series_since(s, run_id, 20)
        assert cache.poll(s) == CHUNK_STEPS + 2 - 20
    assert cache.last_step == CHUNK_STEPS + 2
    assert cache.series["reward"][:, 0].tolist() == list(range(21, CHUNK_STEPS + 3))


def test_a_null_list_beside_an_unknown_reward_lists_both_problems():
    """Item 9: a value of the wrong type (``reward_weights: null``) no longer hides the other checks' problems: the
    unknown reward beside it is listed too, as the config text arrives from the API, the CLI or an upload."""
    from app import actions
    from trainer.config.access import Access

    checked = actions.validate("reward_funcs: [correctness, no_such_reward]\nreward_weights: null\n", Access())
    assert checked.config is None
    assert checked.problems[0] == "reward_weights: expected a list of a number, got None"
    assert [p for p in checked.problems if p.startswith("reward_funcs: unknown reward function 'no_such_reward'")]
    assert len(checked.problems) == 2, checked.problems
