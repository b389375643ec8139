"""A fork that changes its parent's rewards says so at the fork point, and evaluates held-out when it starts (issue 57,
item 4). The audit's fork of the demo at step 40 added a length reward: the reward curve jumped 3.79 → 5.4-6.0 there,
no alert said why (the watch reads only the fork's own rows, which begin after the change), and the fork's first
held-out point came 10 steps later. Here a real parent of the built-in model and a real fork adding
tests/fixtures/length_reward.py's reward, each a few steps."""

from __future__ import annotations

import pytest

from app import actions
from storage import learning, queries
from storage.db import get_sessionmaker
from tests.helpers import FIXTURES, create_run, tiny_config
from trainer.insight.forks import FORK_NOTE, fork_note, reward_changes

PARENT = {"reward_funcs": ["correctness", "strict_format"], "reward_weights": [], "beta": 0.04}
LENGTH = f"{FIXTURES / 'length_reward.py'}:long_answers"


def test_a_reward_added_dropped_or_reweighted_is_each_named_and_other_changes_are_not():
    assert reward_changes(PARENT, {**PARENT, "beta": 0.2, "learning_rate": 1e-4}) == []
    assert reward_changes(PARENT, {**PARENT, "reward_weights": [1.0, 1.0]}) == []  # the default weights, written out
    changed = {"reward_funcs": ["correctness", LENGTH], "reward_weights": [2.0, 0.5]}
    assert reward_changes(PARENT, changed) == [
        "added long_answers (weight 0.5)",
        "dropped strict_format",
        "correctness's weight 1 → 2",
    ]
    assert fork_note(7, 40, PARENT, {**PARENT, "beta": 0.2}) is None
    note = fork_note(7, 40, PARENT, changed)
    assert (note.name, note.level) == (FORK_NOTE, "note")
    assert note.message.startswith("this fork of run 7 changed the rewards at step 40: added long_answers")


def test_an_evaluation_stored_again_at_a_step_replaces_that_steps_rows():
    """A resumed run evaluates its checkpoint's step again: each problem still counts once there."""
    run_id = create_run(tiny_config(name="re-evaluated"))
    rows = [{"run_id": run_id, "step": 4, "problem": i, "question": f"q{i}", "correct": 1.0} for i in range(3)]
    for _ in range(2):
        with get_sessionmaker().begin() as s:
            learning.add_heldout_rows(s, rows)
    with get_sessionmaker().begin() as s:
        assert learning.heldout_size(s, run_id) == 3 and len(learning.heldout_points(s, run_id)) == 3


@pytest.fixture(scope="module")
def parent_and_fork(module_database, tiny_model_path):
    """A 2-step parent (held-out every 2 steps, a checkpoint at step 2) and its fork from step 2 adding the length
    reward, trained to step 3."""
    from trainer.job.worker import run_worker
    from trainer.supervise.fork import fork_run

    parent = tiny_config(name="parent", reward_funcs=["correctness", "strict_format"], max_steps=2, eval_steps=2)
    parent_id = create_run(parent)
    assert run_worker(parent_id).value == "completed"
    fork_id = fork_run(
        parent_id, 2, {"reward_funcs": f"correctness,strict_format,{LENGTH}", "max_steps": "3"}, name="with-length"
    )
    assert run_worker(fork_id).value == "completed"
    return parent_id, fork_id


def _heldout(run_id: int) -> dict[int, float]:
    with get_sessionmaker().begin() as s:
        return {p.step: p.value for p in queries.metric_series(s, run_id, "heldout/correct")}


@pytest.mark.slow
def test_the_fork_evaluates_heldout_at_its_start_on_the_checkpoint_it_continues(parent_and_fork):
    parent_id, fork_id = parent_and_fork
    parent, fork = _heldout(parent_id), _heldout(fork_id)
    assert sorted(parent) == [0, 2] and sorted(fork) == [2, 3]
    assert fork[2] == parent[2]  # the same checkpoint, the same greedy answers to the same problems
    with get_sessionmaker().begin() as s:
        assert learning.heldout_size(s, fork_id) == learning.heldout_size(s, parent_id) == 100
        assert {p.step for p in learning.heldout_points(s, fork_id)} == {2, 3}


@pytest.mark.slow
def test_the_fork_that_added_a_reward_gets_a_note_at_the_fork_point(parent_and_fork):
    parent_id, fork_id = parent_and_fork
    (note,) = [a for a in actions.run_alerts(fork_id) if a.name == FORK_NOTE]
    assert note.level == "note" and note.source == "fork"
    assert note.message == f"this fork of run {parent_id} changed the rewards at step 2: added long_answers (weight 1)"
    assert "evaluated at step 2, when it started" in note.hint
    assert FORK_NOTE not in {a.name for a in actions.run_alerts(parent_id)}
    # the rows it explains: the fork's first step is paid by a reward its parent's steps never had
    with get_sessionmaker().begin() as s:
        assert [p.step for p in queries.metric_series(s, fork_id, "rewards/long_answers/mean")] == [3]
        assert queries.metric_series(s, parent_id, "rewards/long_answers/mean") == []
    # the Monitor's banner says it too
    from app.web.pages.monitor import health_markdown
    from storage.series import series_since

    with get_sessionmaker().begin() as s:
        series, run = series_since(s, fork_id), queries.get_run(s, fork_id)
    assert f"this fork of run {parent_id} changed the rewards at step 2" in health_markdown(series, 48, run)
