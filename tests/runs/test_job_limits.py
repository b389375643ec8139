"""The jobs that load a model are bounded (issue 35 items 2 and 7): /evaluate's K and samples and /probe's prompts
have the CLI's and the form's ranges, refused in one sentence before anything starts; evaluations take a slot of a
cap shared by every dashboard of the database (one at a time by default) and end at a timeout that the run's log
records; a failed probe tells the user one sentence and the server's log the child's traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from app import actions
from storage import queries
from storage.db import get_sessionmaker
from storage.models import Evaluation, RunStatus
from tests.conftest import ROOT
from tests.helpers import tiny_config, wait_for

# waits: jobs that sleep out their timeouts and turns (16 s of wall for 3.5 CPU-s, measured alone): the waiting
# lane's (tests/suite/xdist_lanes.py)
pytestmark = pytest.mark.waits


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
    from trainer.supervise.processes import process_start_time

    with get_sessionmaker().begin() as s:
        row = queries.add_evaluation(s, run_id, "final", 2, 0, status=RunStatus.RUNNING)
        queries.evaluation_started(s, row, os.getpid(), process_start_time(os.getpid()))
        return row.id


def _queued_evaluation(run_id: int, pid: int | None = None) -> int:
    """An evaluation waiting for its turn: its process is ``pid`` (None: still being started)."""
    from trainer.supervise.processes import process_start_time

    with get_sessionmaker().begin() as s:
        row = queries.add_evaluation(s, run_id, "final", 2, 0, status=RunStatus.QUEUED)
        if pid is not None:
            queries.evaluation_started(s, row, pid, process_start_time(pid))
        return row.id


def _behind(evaluation_id: int) -> str | None:
    from trainer.evaluation.eval_job import queue_state

    return queue_state(evaluation_id)


def test_an_evaluation_over_the_cap_is_queued_behind_the_running_one_in_order(monkeypatch):
    run_id = _run()
    first = _running_evaluation(run_id)
    second, third = _queued_evaluation(run_id, os.getpid()), _queued_evaluation(run_id)
    assert _behind(second) == (
        f"queued behind evaluation {first} of run {run_id} (running): 1 at a time, runs and evaluations together (GRPO_STUDIO_MAX_CONCURRENT_RUNS)"
    )
    assert _behind(third) == (
        f"queued behind evaluation {first} of run {run_id} (running) and 1 more: 1 at a time, runs and evaluations together (GRPO_STUDIO_MAX_CONCURRENT_RUNS)"
    )
    monkeypatch.setenv("GRPO_STUDIO_MAX_CONCURRENT_RUNS", "2")  # the operator allows two: the second's turn has come
    assert _behind(second) is None
    assert _behind(third) == (
        f"queued behind evaluation {first} of run {run_id} (running) and 1 more: 2 at a time, runs and evaluations together (GRPO_STUDIO_MAX_CONCURRENT_RUNS)"
    )


def _training_run() -> int:
    """A run that holds a training slot: running, its worker alive (this process)."""
    from trainer.supervise.processes import process_start_time

    with get_sessionmaker().begin() as s:
        run = queries.create_run(s, "training", tiny_config().to_dict(), 4)
        queries.mark_running(s, run, os.getpid(), "/tmp/unused")
        run.pid_started = process_start_time(os.getpid())
        return run.id


def test_an_evaluation_waits_behind_a_training_run_under_the_same_limit(monkeypatch):
    """Issue 58.6: five /evaluate calls beside a training run all ran at once. With the dashboard's limit of 1 a run
    that trains holds the slot, so every evaluation waits; with 2, the first evaluation runs and the rest wait."""
    from trainer.evaluation.eval_job import wait_turn

    monkeypatch.delenv("GRPO_STUDIO_MAX_CONCURRENT_RUNS", raising=False)  # the default: 1
    training = _training_run()
    evaluations = [_queued_evaluation(_run(), os.getpid()) for _ in range(5)]
    assert _behind(evaluations[0]) == (
        f"queued behind run {training} (training): 1 at a time, runs and evaluations together "
        "(GRPO_STUDIO_MAX_CONCURRENT_RUNS)"
    )
    assert _behind(evaluations[4]).startswith(f"queued behind evaluation {evaluations[0]} of run ")
    monkeypatch.setenv("GRPO_STUDIO_MAX_CONCURRENT_RUNS", "2")
    assert wait_turn(evaluations[0], poll_s=0) is True  # its turn: one run and one evaluation
    assert [_behind(e) is None for e in evaluations[1:]] == [False] * 4


def test_a_run_waits_for_a_slot_held_by_a_running_evaluation():
    """The other side of the one limit: the scheduler starts no run while an evaluation holds the only slot."""
    from trainer.supervise import schedule

    _running_evaluation(_run())
    with get_sessionmaker().begin() as s:
        queued = queries.create_run(s, "waiting", tiny_config().to_dict(), 4).id
    with get_sessionmaker().begin() as s:
        assert schedule.schedule(s, max_concurrent=1) == []
    with get_sessionmaker().begin() as s:
        assert queries.get_run(s, queued).status == RunStatus.QUEUED and queries.get_run(s, queued).pid is None


def test_the_dashboards_limit_reaches_the_jobs_it_starts(monkeypatch):
    from trainer.supervise.schedule import share_slots, slots

    monkeypatch.setenv("GRPO_STUDIO_MAX_CONCURRENT_RUNS", "")  # restored after the test, whatever share_slots sets
    assert slots() == 1
    share_slots(3)  # what serve does with --max-concurrent-runs 3
    assert os.environ["GRPO_STUDIO_MAX_CONCURRENT_RUNS"] == "3" and slots() == 3


def test_a_queued_evaluation_takes_its_turn_when_the_one_ahead_ends():
    from trainer.evaluation.eval_job import wait_turn

    run_id = _run()
    first = _running_evaluation(run_id)
    second, third = _queued_evaluation(run_id, os.getpid()), _queued_evaluation(run_id, os.getpid())
    with get_sessionmaker().begin() as s:
        queries.finish_evaluation(s, queries.get_evaluation(s, first), RunStatus.COMPLETED, {})
    assert wait_turn(second, poll_s=0.01) is True
    with get_sessionmaker().begin() as s:
        assert queries.get_evaluation(s, second).status == RunStatus.RUNNING
        assert queries.get_evaluation(s, third).status == RunStatus.QUEUED
    assert _behind(third).startswith(f"queued behind evaluation {second} of run {run_id} (running)")


def test_a_queued_evaluation_whose_row_ended_does_not_run():
    """Stopped (or marked failed by a dashboard) while it waited: its process ends without taking a turn."""
    from trainer.evaluation.eval_job import wait_turn

    run_id = _run()
    queued = _queued_evaluation(run_id, os.getpid())
    with get_sessionmaker().begin() as s:
        queries.finish_evaluation(s, queries.get_evaluation(s, queued), RunStatus.STOPPED, error="stopped")
    assert wait_turn(queued, poll_s=0.01) is False


def test_a_queued_job_whose_run_was_deleted_ends_without_running(monkeypatch):
    import trainer.evaluation.evaluate as evaluate
    from trainer.evaluation.eval_job import run_evaluation

    run_id = _run()
    _running_evaluation(run_id)  # the one it waits behind
    queued = _queued_evaluation(run_id, os.getpid())
    monkeypatch.setattr(evaluate, "evaluate_run", lambda *a, **k: pytest.fail("a deleted run's job ran"))
    monkeypatch.setattr("trainer.evaluation.eval_job.QUEUE_POLL_S", 0.01)

    def delete() -> None:
        with get_sessionmaker().begin() as s:
            queries.delete_run(s, run_id)  # its evaluations with it

    threading.Timer(0.3, delete).start()  # while the job waits its turn
    assert run_evaluation(queued) == RunStatus.STOPPED


def test_a_dead_jobs_row_holds_no_place_in_the_queue():
    from trainer.evaluation.eval_job import evaluation_state

    run_id = _run()
    with get_sessionmaker().begin() as s:
        row = queries.add_evaluation(s, run_id, "final", 2, 0, status=RunStatus.RUNNING)
        queries.evaluation_started(s, row, 2**22 + 12345, "1")  # no such process
        dead = row.id
    queued = _queued_evaluation(run_id, os.getpid())
    assert _behind(queued) is None
    with get_sessionmaker().begin() as s:  # a queued job killed while it waited is no obstacle either
        queries.evaluation_started(s, queries.get_evaluation(s, queued), 2**22 + 12346, "1")
    assert evaluation_state(run_id).status == RunStatus.FAILED  # and reads as failed, not queued for ever
    with get_sessionmaker().begin() as s:
        assert queries.get_evaluation(s, dead).status == RunStatus.RUNNING  # only the newest is read (and fixed)


def test_a_row_whose_process_was_never_started_stops_holding_its_place(monkeypatch):
    """The starter was killed between writing the row and starting its process: the row holds its place only for
    the start's grace, then reads as failed."""
    from trainer.evaluation import eval_job

    run_id = _run()
    never_started = _queued_evaluation(run_id)  # no process recorded
    queued = _queued_evaluation(run_id, os.getpid())
    assert _behind(queued).startswith(f"queued behind evaluation {never_started} ")
    monkeypatch.setattr(eval_job, "START_GRACE_S", 0.0)
    assert _behind(queued) is None
    assert eval_job.evaluation_state(run_id).id == queued  # the newest; the orphan is no obstacle to it


def test_the_api_reports_a_queued_evaluation_and_what_it_waits_for():
    run_id = _run()
    first = _running_evaluation(run_id)
    queued = _queued_evaluation(run_id, os.getpid())
    answer = actions.evaluation_json(queued)
    assert answer == {
        "evaluation_id": queued,
        "run_id": run_id,
        "adapter": "final",
        "status": "queued",
        "queued_behind": f"queued behind evaluation {first} of run {run_id} (running): 1 at a time, runs and "
        "evaluations together (GRPO_STUDIO_MAX_CONCURRENT_RUNS)",
        "done": 0,
        "total": 0,
        "error": None,
    }
    assert actions.latest_evaluation_json(run_id) == answer  # /run's "evaluation"
    with pytest.raises(actions.ActionError) as refused:
        actions.evaluation_json(10**30)
    assert (
        refused.value.message
        == "evaluation_id must be a whole number from 1 to 9223372036854775807, got a 31-digit number"
    )


def test_an_evaluation_past_its_time_limit_ends_failed_and_the_run_log_says_so(monkeypatch):
    import trainer.evaluation.evaluate as evaluate
    from trainer.evaluation.eval_job import run_evaluation

    run_id = _run()
    evaluation_id = _running_evaluation(run_id)
    monkeypatch.setenv("GRPO_STUDIO_EVAL_TIMEOUT_S", "1")
    monkeypatch.setattr(evaluate, "evaluate_run", lambda *a, **k: time.sleep(30))
    assert run_evaluation(evaluation_id) == RunStatus.FAILED  # its own alarm, armed when its turn came
    said = f"evaluation {evaluation_id} timed out after 1 s (GRPO_STUDIO_EVAL_TIMEOUT_S) and was stopped"
    with get_sessionmaker().begin() as s:
        row = queries.get_evaluation(s, evaluation_id)
        assert (row.status, row.error, row.finished_at is not None) == (RunStatus.FAILED, said, True)
        assert [(line.level, line.message) for line in queries.log_tail(s, run_id)] == [("WARNING", said)]


def test_the_timeout_is_not_swallowed_by_the_model_codes_own_except_exception(monkeypatch):
    import trainer.evaluation.evaluate as evaluate
    from trainer.evaluation.eval_job import run_evaluation

    def catches_everything(*args, **kwargs):
        try:
            time.sleep(30)
        except Exception:  # noqa: BLE001 - what a library's broad handler would do
            return {}

    run_id = _run()
    evaluation_id = _running_evaluation(run_id)
    monkeypatch.setenv("GRPO_STUDIO_EVAL_TIMEOUT_S", "1")
    monkeypatch.setattr(evaluate, "evaluate_run", catches_everything)
    assert run_evaluation(evaluation_id) == RunStatus.FAILED


def test_a_failed_probe_says_one_sentence_and_logs_the_traceback(monkeypatch, caplog):
    from trainer.probe import job
    from trainer.probe.job import ProbeError

    trace = 'Traceback (most recent call last):\n  File "/usr/lib/python3/site-packages/x.py", line 1\nValueError: boom'

    class Failed:
        """A probe child that has failed, its traceback written to its output."""

        def __init__(self, command, stdout, **kwargs):
            stdout.write(trace)
            stdout.flush()

        def wait(self, timeout=None) -> int:
            return 1

    monkeypatch.setattr(job.subprocess, "Popen", Failed)
    with caplog.at_level("WARNING", logger="grpo_studio.probe"), pytest.raises(ProbeError) as failed:
        job.probe_in_child(tiny_config())
    assert str(failed.value) == "the probe failed (exit 1); the details are in the server's log"
    assert "ValueError: boom" in caplog.text and "site-packages/x.py" in caplog.text


def test_the_command_line_refuses_the_same_range(capsys):
    from app.cli.main import main

    assert main(["eval", str(_run()), "--samples", "1000000"]) == 2
    assert capsys.readouterr().err.strip() == "grpo-studio: samples must be a whole number from 0 to 16, got 1000000"


def test_probes_over_the_cap_wait_in_line_first_come_first_served():
    from app.actions.jobs import ProbeQueue

    line = ProbeQueue(1)
    order, told = [], {}
    first_in = threading.Event()
    release = threading.Event()

    def probe(name: str) -> None:
        with line.turn(lambda said: told.setdefault(name, said)):
            order.append(name)
            if name == "first":
                first_in.set()
                release.wait(10)

    first = threading.Thread(target=probe, args=("first",))
    first.start()
    assert first_in.wait(10)
    waiting = []
    for name in ("second", "third"):
        waiting.append(threading.Thread(target=probe, args=(name,)))
        waiting[-1].start()
        wait_for(lambda n=len(waiting): len(line.waiting) == n, 10, "the probe to queue")
    release.set()
    for thread in (first, *waiting):
        thread.join(10)
    assert order == ["first", "second", "third"]
    assert told == {
        "second": "queued behind 1 running probe: 1 at a time (GRPO_STUDIO_PROBE_SLOTS)",
        "third": "queued behind 1 running probe and 1 waiting before it: 1 at a time (GRPO_STUDIO_PROBE_SLOTS)",
    }
    assert (line.running, list(line.waiting)) == (0, [])


def test_the_api_answer_of_a_probe_says_what_it_waited_for(monkeypatch):
    """/probe's answer comes once the probe has run; one that waited in line says behind whom (and None when it
    started at once), as the New run page says while it waits."""
    import app.actions.jobs as jobs
    from app.web import api
    from trainer.probe import job

    class Report:  # what probe_in_child returns, as far as the answer reads it
        verdict = "learns"

        def to_text(self) -> str:
            return "report"

        def to_dict(self) -> dict:
            return {"verdict": "learns"}

    monkeypatch.setattr(job, "probe_in_child", lambda config, prompts, timeout: Report())
    monkeypatch.setattr(jobs, "PROBES", jobs.ProbeQueue(1))
    probe = api.endpoints(actions.OPERATOR)["probe"]
    config = json.dumps(tiny_config(name="probed").to_dict())
    assert probe(config, 2)["queued_behind"] is None
    inside, release, answers = threading.Event(), threading.Event(), {}

    def other_probe() -> None:
        with jobs.PROBES.turn():
            inside.set()
            release.wait(10)

    ahead = threading.Thread(target=other_probe)
    ahead.start()
    assert inside.wait(10)
    behind = threading.Thread(target=lambda: answers.update(probe(config, 2)))
    behind.start()
    wait_for(lambda: len(jobs.PROBES.waiting) == 1, 10, "the probe to wait in line")
    release.set()
    ahead.join(10), behind.join(10)
    assert answers["verdict"] == "learns"
    assert answers["queued_behind"] == "queued behind 1 running probe: 1 at a time (GRPO_STUDIO_PROBE_SLOTS)"


def test_a_probe_with_a_free_slot_is_not_told_it_waits():
    from app.actions.jobs import ProbeQueue

    told = []
    with ProbeQueue(2).turn(told.append):
        pass
    assert told == []


@pytest.mark.slow
def test_a_probe_past_its_timeout_is_stopped_and_the_servers_log_says_so(monkeypatch, caplog):
    """A real probe child given less time than it needs to import its libraries."""
    from trainer.probe import job
    from trainer.probe.job import ProbeError

    monkeypatch.setenv("GRPO_STUDIO_PROBE_TIMEOUT_S", "1")
    with caplog.at_level("WARNING", logger="grpo_studio.probe"), pytest.raises(ProbeError) as failed:
        job.probe_in_child(tiny_config(name="slow-probe"), timeout=job.timeout_s())
    said = "the probe took longer than 1 s (GRPO_STUDIO_PROBE_TIMEOUT_S) and was stopped"
    assert str(failed.value) == said
    assert f"slow-probe: {said}" in caplog.text


def _run_with_an_adapter(tmp_path) -> int:
    """A run whose "final" adapter is on disk (a file is all the lookup reads: no model loads in these tests)."""
    run_id = _run()
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text("{}")
    with get_sessionmaker().begin() as s:
        queries.set_output_dir(s, queries.get_run(s, run_id), str(tmp_path))
    return run_id


@pytest.mark.slow
def test_evaluate_over_the_cap_queues_a_real_job_that_a_stop_ends_while_it_waits(tmp_path):
    """The start path as the API takes it: the job's real process waits behind the running one (this process holds
    the slot), so no model ever loads; a stop ends it as stopped."""
    from trainer.evaluation.eval_job import evaluation_state, stop_evaluation

    run_id = _run_with_an_adapter(tmp_path)
    first = _running_evaluation(run_id)
    answer = actions.evaluation_json(actions.evaluate(run_id, "final", 2, 0))
    queued = answer["evaluation_id"]
    assert (answer["status"], answer["queued_behind"]) == (
        "queued",
        f"queued behind evaluation {first} of run {run_id} (running): 1 at a time, runs and evaluations together (GRPO_STUDIO_MAX_CONCURRENT_RUNS)",
    )
    time.sleep(3)  # long enough for its process to have taken a turn, had it not waited
    assert (evaluation_state(run_id).id, evaluation_state(run_id).status) == (queued, RunStatus.QUEUED)
    assert stop_evaluation(run_id)
    wait_for(lambda: evaluation_state(run_id).status == RunStatus.STOPPED, 30, "the queued job to stop")
    assert evaluation_state(run_id).error == "stopped while queued"


def _job_without_a_model(evaluation_id: int, env: dict) -> subprocess.Popen:
    """The job's real process (``eval_job.main``) with the model work replaced by a 60 s wait."""
    code = (
        "import sys, time; import trainer.evaluation.evaluate as e; "
        "e.evaluate_run = lambda *a, **k: time.sleep(60); "
        f"from trainer.evaluation.eval_job import main; sys.exit(main([{evaluation_id}]))"
    )
    return subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)


@pytest.mark.slow
def test_queued_jobs_run_one_at_a_time_and_each_ends_at_its_timeout_in_the_runs_log():
    from trainer.supervise.processes import process_start_time

    run_id = _run()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GRPO_STUDIO_EVAL_TIMEOUT_S": "3",
        "GRPO_STUDIO_MAX_CONCURRENT_RUNS": "1",
    }
    ids = [_queued_evaluation(run_id) for _ in range(2)]
    jobs = []
    for evaluation_id in ids:
        jobs.append(_job_without_a_model(evaluation_id, env))
        with get_sessionmaker().begin() as s:
            row = queries.get_evaluation(s, evaluation_id)
            queries.evaluation_started(s, row, jobs[-1].pid, process_start_time(jobs[-1].pid))
    wait_for(lambda: _status(ids[0]) == RunStatus.RUNNING, 30, "the first job to take its turn")
    assert _status(ids[1]) == RunStatus.QUEUED and _behind(ids[1]).startswith(f"queued behind evaluation {ids[0]}")
    for job in jobs:
        assert job.wait(60) == 1
    said = [f"evaluation {i} timed out after 3 s (GRPO_STUDIO_EVAL_TIMEOUT_S) and was stopped" for i in ids]
    with get_sessionmaker().begin() as s:
        rows = [queries.get_evaluation(s, i) for i in ids]
        assert [(row.status, row.error) for row in rows] == [(RunStatus.FAILED, line) for line in said]
        assert rows[1].finished_at >= rows[0].finished_at  # the second ran after the first had ended
        assert [line.message for line in queries.log_tail(s, run_id)] == said


def _status(evaluation_id: int) -> RunStatus:
    with get_sessionmaker().begin() as s:
        return queries.get_evaluation(s, evaluation_id).status


def test_the_evaluation_panel_says_whom_a_queued_evaluation_waits_for():
    from app.web.pages.evaluation import status_line

    row = Evaluation(id=5, run_id=1, adapter="final", k=200, samples=4, status=RunStatus.QUEUED, done=0, total=2000)
    line = status_line(
        row,
        "queued behind evaluation 4 of run 1 (running): 1 at a time, runs and evaluations together "
        "(GRPO_STUDIO_MAX_CONCURRENT_RUNS)",
    )
    assert "Queued:" in line and "queued behind evaluation 4 of run 1 (running)" in line
    assert "its turn has come" in status_line(row)  # no one ahead: its process is about to take the slot
