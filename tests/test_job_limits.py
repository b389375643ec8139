"""The jobs that load a model are bounded (issue 35 items 2 and 7): /evaluate's K and samples and /probe's prompts
have the CLI's and the form's ranges, refused in one sentence before anything starts; evaluations take a slot of a
cap shared by every dashboard of the database (one at a time by default) and end at a timeout that the run's log
records; a failed probe tells the user one sentence and the server's log the child's traceback."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from app import actions
from storage import queries
from storage.db import get_sessionmaker
from storage.models import Evaluation, RunStatus

from .helpers import tiny_config


def _evaluations() -> int:
    with get_sessionmaker().begin() as s:
        return s.query(Evaluation).count()


def _run() -> int:
    with get_sessionmaker().begin() as s:
        return queries.create_run(s, "evaluated", tiny_config().to_dict(), 4).id


@pytest.mark.parametrize(
    ("k", "samples", "said"),
    [
        (200, 1_000_000, "samples must be a whole number from 0 to 16, got 1000000"),
        (10**30, 4, "k must be a whole number from 1 to 5000, got a 31-digit number"),
        (1e308, 4, "k must be a whole number from 1 to 5000, got 1e+308"),
        ("x", 4, "k must be a whole number from 1 to 5000, got 'x'"),
        (True, 4, "k must be a whole number from 1 to 5000, got True"),
        (200, 2.5, "samples must be a whole number from 0 to 16, got 2.5"),
        (200, None, "samples must be a whole number from 0 to 16, got None"),
        (0, 4, "k must be a whole number from 1 to 5000, got 0"),
    ],
)
def test_evaluate_refuses_what_the_cli_and_the_form_refuse(k, samples, said):
    run_id = _run()
    with pytest.raises(actions.ActionError) as refused:
        actions.evaluate(run_id, "final", k, samples)
    assert refused.value.message == said
    assert _evaluations() == 0


def test_evaluate_takes_a_forms_whole_float():
    """gr.Number sends 200.0: a whole number, taken as 200 (the refusal that follows is about the missing adapter)."""
    with pytest.raises(actions.ActionError) as refused:
        actions.evaluate(_run(), "final", 200.0, 4.0)
    assert "must be a whole number" not in refused.value.message


def test_probe_refuses_a_prompt_count_out_of_range_before_reading_the_config():
    with pytest.raises(actions.ActionError) as refused:
        actions.probe("this: is not read", actions.OPERATOR, 10**30)
    assert refused.value.message == "prompts must be a whole number from 1 to 64, got a 31-digit number"


def _running_evaluation(run_id: int) -> int:
    """An evaluation marked running whose process is alive (this one)."""
    from trainer.job.launch import process_start_time

    with get_sessionmaker().begin() as s:
        row = queries.add_evaluation(s, run_id, "final", 2, 0, status=RunStatus.RUNNING)
        queries.evaluation_started(s, row, os.getpid(), process_start_time(os.getpid()))
        return row.id


def test_an_evaluation_waits_for_a_free_slot(monkeypatch):
    run_id = _run()
    first = _running_evaluation(run_id)
    with pytest.raises(actions.ActionError) as refused:
        actions.evaluate(run_id, "final", 2, 0)
    assert refused.value.message == (
        f"evaluation {first} of run {run_id} is running and 1 of 1 evaluation slots are taken "
        "(GRPO_STUDIO_EVAL_SLOTS): start this one when it has finished, or stop it"
    )
    assert _evaluations() == 1
    monkeypatch.setenv("GRPO_STUDIO_EVAL_SLOTS", "2")  # the operator allows two: the slot is no longer the reason
    with pytest.raises(actions.ActionError) as refused:
        actions.evaluate(run_id, "final", 2, 0)
    assert "slots" not in refused.value.message


def test_a_dead_jobs_row_holds_no_slot():
    from trainer.evaluation.eval_job import busy_slots

    run_id = _run()
    with get_sessionmaker().begin() as s:
        row = queries.add_evaluation(s, run_id, "final", 2, 0, status=RunStatus.RUNNING)
        queries.evaluation_started(s, row, 2**22 + 12345, "1")  # no such process
    with get_sessionmaker().begin() as s:
        assert busy_slots(s) is None


def test_an_evaluation_past_its_time_limit_ends_failed_and_the_run_log_says_so(monkeypatch):
    import trainer.evaluation.evaluate as evaluate
    from trainer.evaluation.eval_job import run_evaluation, time_limit

    run_id = _run()
    evaluation_id = _running_evaluation(run_id)
    monkeypatch.setenv("GRPO_STUDIO_EVAL_TIMEOUT_S", "1")
    monkeypatch.setattr(evaluate, "evaluate_run", lambda *a, **k: time.sleep(30))
    started = time.monotonic()
    with time_limit(1):
        assert run_evaluation(evaluation_id) == RunStatus.FAILED
    assert time.monotonic() - started < 10
    said = f"evaluation {evaluation_id} timed out after 1 s (GRPO_STUDIO_EVAL_TIMEOUT_S) and was stopped"
    with get_sessionmaker().begin() as s:
        assert queries.get_evaluation(s, evaluation_id).error == said
        assert [(line.level, line.message) for line in queries.log_tail(s, run_id)] == [("WARNING", said)]


def test_a_failed_probe_says_one_sentence_and_logs_the_traceback(monkeypatch, caplog):
    from trainer.probe import job
    from trainer.probe.job import ProbeError

    trace = 'Traceback (most recent call last):\n  File "/usr/lib/python3/site-packages/x.py", line 1\nValueError: boom'
    monkeypatch.setattr(job.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", trace))
    with caplog.at_level("WARNING", logger="grpo_studio.probe"), pytest.raises(ProbeError) as failed:
        job.probe_in_child(tiny_config())
    assert str(failed.value) == "the probe failed (exit 1); the details are in the server's log"
    assert "ValueError: boom" in caplog.text and "site-packages/x.py" in caplog.text


def test_the_command_line_refuses_the_same_range(capsys):
    from app.cli import main

    assert main(["eval", str(_run()), "--samples", "1000000"]) == 2
    assert capsys.readouterr().err.strip() == "grpo-studio: samples must be a whole number from 0 to 16, got 1000000"
