"""The API's answers on rows written here (issue 36, items 2 and 7), through the endpoint functions the server
registers and Gradio's own encoder: ``/prompts`` of a run with samples encodes (its per-step maps were keyed by int,
which orjson refuses: the client saw a bare CancelledError), and ``/metrics`` on a run that has not logged a key yet
answers empty columns instead of refusing. tests/web/test_api.py drives the same endpoints through a real server."""

from __future__ import annotations

import orjson
import pytest

from app.web.api import endpoints
from storage import queries
from storage.db import get_sessionmaker
from storage.models import RunStatus
from tests.helpers import create_run, tiny_config
from trainer.config.access import Access


def _wire(answer):
    """What the client receives: Gradio's queue encodes every message with orjson (gradio/routes.py ``queue_data``);
    no ``default`` here, so a value orjson cannot encode fails the test instead of turning into its str()."""
    return orjson.loads(orjson.dumps(answer))


def _sample(run_id: int, step: int, group: int, prompt: str, correct: float) -> dict:
    return {
        "run_id": run_id,
        "step": step,
        "group_index": group,
        "prompt": prompt,
        "completion": f"<answer>{correct}</answer>",
        "rewards": {"correctness": correct, "xmlcount": 0.25},
        "total_reward": correct + 0.25,
        "advantage": 0.0,
        "reference_answer": "3",
    }


def test_prompts_of_a_run_with_samples_reach_the_client_keyed_by_step():
    run_id = create_run(tiny_config(name="sampled"))
    rows = [
        # step 1: "a" half right (a signal), "b" never; step 2: "a" all right, "b" still never
        _sample(run_id, 1, 0, "What is 1 + 2?", 2.0),
        _sample(run_id, 1, 0, "What is 1 + 2?", 0.0),
        _sample(run_id, 1, 1, "What is 5 + 5?", 0.0),
        _sample(run_id, 1, 1, "What is 5 + 5?", 0.0),
        _sample(run_id, 2, 0, "What is 1 + 2?", 2.0),
        _sample(run_id, 2, 0, "What is 1 + 2?", 2.0),
        _sample(run_id, 2, 1, "What is 5 + 5?", 0.0),
        _sample(run_id, 2, 1, "What is 5 + 5?", 0.0),
    ]
    with get_sessionmaker().begin() as s:
        queries.add_sample_rows(s, rows)
    answer = _wire(endpoints(Access())["prompts"](run_id))
    by_prompt = {p["prompt"]: p for p in answer["prompts"]}
    assert by_prompt["What is 1 + 2?"]["pass_rate"] == {"1": 0.5, "2": 1.0}
    assert by_prompt["What is 5 + 5?"]["pass_rate"] == {"1": 0.0, "2": 0.0}
    assert by_prompt["What is 5 + 5?"]["class"] == "never solved"
    assert answer["signal"] == {"1": 0.5, "2": 0.0}
    # "a": half right, then all right at its latest visit: learnt (trainer/insight/learning_map.py, issue 34)
    assert answer["counts"]["never solved"] == 1 and answer["counts"]["learnt"] == 1
    # as of step 1, the map holds step 1 only
    early = _wire(endpoints(Access())["prompts"](run_id, 1))
    assert {p["prompt"]: p["pass_rate"] for p in early["prompts"]}["What is 1 + 2?"] == {"1": 0.5}


def test_metrics_of_a_run_that_has_not_logged_a_key_yet_are_empty_columns():
    """A just-launched run (nothing logged) and a running one before its first evaluation: a poll loop's first call
    gets columns it can extend, not an error."""
    metrics = endpoints(Access())["metrics"]
    queued = create_run(tiny_config(name="just-launched"))
    assert _wire(metrics(queued, "reward,kl", -1)) == {"step": [], "wall_time": [], "reward": [], "kl": []}

    running = create_run(tiny_config(name="stepping"))
    with get_sessionmaker().begin() as s:
        queries.mark_running(s, queries.get_run(s, running), 1, "/nowhere")
        queries.add_metric_rows(s, queries.metric_rows(running, 1, {"reward": 0.5}, 100.0))
    table = _wire(metrics(running, "reward,heldout/correct", -1))
    assert table == {"step": [1], "wall_time": [100.0], "reward": [0.5], "heldout/correct": [None]}


def test_metrics_of_an_ended_run_refuse_a_key_it_never_logged_naming_those_it_did():
    import gradio as gr

    ended = create_run(tiny_config(name="ended"))
    with get_sessionmaker().begin() as s:
        queries.add_metric_rows(s, queries.metric_rows(ended, 1, {"reward": 0.5, "kl": 0.01}, 100.0))
        queries.finish_run(s, queries.get_run(s, ended), RunStatus.COMPLETED)
    with pytest.raises(gr.Error, match=f"run {ended} has no metric 'rewrd': it logged kl, reward"):
        endpoints(Access())["metrics"](ended, "rewrd", -1)
    silent = create_run(tiny_config(name="ended-silent"))
    with get_sessionmaker().begin() as s:
        queries.finish_run(s, queries.get_run(s, silent), RunStatus.FAILED, "boom")
    with pytest.raises(gr.Error, match="it logged no metric"):
        endpoints(Access())["metrics"](silent, "reward", -1)
