"""The Slurm executor on a real Slurm (tests/conftest.py: slurm_cluster, a single CPU node on this machine) and a real
PostgreSQL: the tiny demo launched from the dashboard's form trains to completion as a Slurm job with its metrics in
the database; a stop from the dashboard reaches the worker through ``scancel`` and the run ends stopped with its
adapter saved; a job Slurm kills ends the run as failed with Slurm's account of it; a sweep's members run as one job
array, each followed and stopped as its own run."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from app.web.widgets.verdict import verdict
from storage import queries
from storage.db import get_sessionmaker
from tests.conftest import use_database
from tests.helpers import FIXTURES, create_run, run_row, tiny_config, wait_for
from trainer.config.access import Access
from trainer.supervise import schedule as scheduling
from trainer.supervise import slurm, slurm_array
from trainer.supervise.run_files import RunFiles
from trainer.supervise.stop import stop_worker

# waits: Slurm's scheduling and its shortest time limit (210 s of wall for 84 CPU-s, measured alone): the waiting
# lane's (tests/suite/xdist_lanes.py). Three groups, so that with fewer than three processes (no waiting lane) two of them
# may run side by side on the one Slurm node (16 CPUs configured: jobs run together), the time limit's three minutes
# not behind the others.
pytestmark = [pytest.mark.slow, pytest.mark.waits]

ENDED = ("completed", "failed", "stopped")


def _job_ids() -> set[str]:
    """The ids of every job Slurm holds now, pending or running."""
    out = subprocess.run(["squeue", "--noheader", "--format=%i"], capture_output=True, text=True, timeout=30).stdout
    return set(out.split())


def _this_tests_jobs() -> set[str]:
    """The Slurm jobs of this test's runs: every job is submitted for a run, and each test has a database of its own
    (so under pytest-xdist another worker's test, running beside this one on the same Slurm, is never touched)."""
    with get_sessionmaker().begin() as s:
        return {run.slurm_job_id for run in queries.list_runs(s) if run.slurm_job_id}


@pytest.fixture
def on_slurm(slurm_cluster, postgres_url, tiny_model_path):
    """This test's PostgreSQL database, for the test and (through the job's exported environment) its workers. The
    jobs a test leaves in Slurm's queue are cancelled after it, so no test sees another's job ahead of its own."""
    use_database(postgres_url)
    yield slurm_cluster
    left = sorted(_this_tests_jobs() & _job_ids())
    if left:
        subprocess.run(["scancel", *left], check=False, timeout=30)


def schedule() -> list[int]:
    """One tick of the dashboard's scheduler."""
    with get_sessionmaker().begin() as session:
        return scheduling.schedule(session)


def submit_long_run(name: str) -> int:
    """A run on the slurm executor long enough to be stopped or killed mid-way, submitted and seen training."""
    run_id = create_run(tiny_config(name=name, executor="slurm", max_steps=400, save_steps=400))
    assert schedule() == [run_id]
    wait_for(lambda: run_row(run_id).current_step >= 1 or run_row(run_id).status in ENDED, 300, f"{name} to train")
    assert run_row(run_id).status == "running", run_row(run_id).error
    return run_id


@pytest.mark.xdist_group("slurm-requeue")
def test_the_tiny_demo_trains_to_completion_as_a_slurm_job(on_slurm):
    from app.web.pages import new_run, runs

    values = new_run.form_values(tiny_config(name="on-slurm", executor="slurm", max_steps=3))
    assert new_run.launch(Access(), values).startswith(verdict("go", "Launched:", "Run "))
    with get_sessionmaker().begin() as s:
        (run,) = queries.list_runs(s)
        run_id = run.id
    assert schedule() == [run_id]
    row = run_row(run_id)
    assert row.slurm_job_id and row.status == "queued"  # Slurm's queue now; the worker marks it running
    script = RunFiles(Path(row.output_dir)).slurm_script.read_text()
    assert "#SBATCH --nodes=1" in script and f"trainer.job.worker {run_id}" in script
    wait_for(lambda: run_row(run_id).status in ENDED, 600, "the Slurm run to end")
    row = run_row(run_id)
    assert row.status == "completed", row.error
    assert row.host == on_slurm  # the worker recorded the job's node
    with get_sessionmaker().begin() as s:
        assert [p.step for p in queries.metric_series(s, run_id, "reward")] == [1, 2, 3]
        assert queries.last_metric(s, run_id, "kl") is not None
    assert RunFiles(Path(row.output_dir)).node_marker.read_text().startswith(on_slurm)  # the data dir is shared
    wait_for(lambda: slurm.job_state(row.slurm_job_id).state == "COMPLETED", 60, "the job to end")  # the worker exits
    assert slurm.job_state("999999") is None  # a job Slurm does not know
    assert runs.run_rows()[0][-1] == f"slurm {row.slurm_job_id} on {on_slurm}"


@pytest.mark.xdist_group("slurm-ends")
def test_a_stop_reaches_the_worker_through_scancel_and_the_run_ends_stopped(on_slurm):
    from app.web.pages import runs

    run_id = submit_long_run("stop-me")
    assert "stop requested" in runs.stop_run(run_id)
    wait_for(lambda: run_row(run_id).status in ENDED, 300, "the stopped run to end")
    row = run_row(run_id)
    assert row.status == "stopped", row.error
    assert 1 <= row.current_step < 400
    assert "final" in RunFiles(Path(row.output_dir)).saved_adapters()  # SIGTERM first: the worker saved its adapter
    wait_for(lambda: slurm.job_state(row.slurm_job_id).state == "COMPLETED", 60, "the job to end by itself")


@pytest.mark.xdist_group("slurm-ends")
def test_a_job_slurm_kills_fails_the_run_with_slurms_reason(on_slurm):
    run_id = submit_long_run("kill-me")
    job_id = run_row(run_id).slurm_job_id
    subprocess.run(["scancel", "--signal=KILL", job_id], check=True)
    wait_for(lambda: run_row(run_id).status in ENDED, 120, "the killed run to end")
    row = run_row(run_id)
    assert row.status == "failed", row.error
    # Slurm SIGTERMs the job's processes before it kills them (KillWait): the worker sees the job is no longer running
    # and says what slurmstepd said ("*** JOB 9 ON node CANCELLED AT ... ***")
    assert row.error.startswith(f"Slurm ended job {job_id} while it trained (*** JOB {job_id} ON {on_slurm} CANCELLED")
    wait_for(lambda: not slurm.job_state(job_id).live, 60, "Slurm to end the job")
    assert schedule() == [] and run_row(run_id).status == "failed"  # reconcile leaves it, nothing resubmitted


# --- round 2 (issue 27): Slurm as its users run it ----------------------------------------------------------------------
def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``grpo-studio ARGS`` on this test's database (PostgreSQL, from the environment use_database set)."""
    import os
    import sys

    from tests.conftest import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
    )


@pytest.mark.xdist_group("slurm-requeue")
def test_run_in_the_foreground_submits_the_job_and_follows_it(on_slurm, tmp_path):
    config = tiny_config(name="followed", executor="slurm", max_steps=3)
    path = tmp_path / "slurm.yaml"
    config.save(path)
    done = _cli("run", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "as Slurm job" in done.stdout and "following it here" in done.stdout
    assert [line.split()[1] for line in done.stdout.splitlines() if line.startswith("step ")] == ["1/3", "2/3", "3/3"]
    with get_sessionmaker().begin() as s:
        (run,) = queries.list_runs(s)
        assert run.status == "completed" and run.slurm_job_id and run.host == on_slurm  # trained on the node


@pytest.mark.xdist_group("slurm-requeue")
def test_a_refused_submission_exits_1_with_slurms_words(on_slurm, tmp_path):
    path = tmp_path / "bad-partition.yaml"
    tiny_config(executor="slurm", slurm_partition="no-such-partition").save(path)
    done = _cli("run", "--detach", str(path))
    assert done.returncode == 1 and "started in the background" not in done.stdout
    assert "could not submit to Slurm" in done.stderr and "partition" in done.stderr.lower()
    listed = _cli("runs")
    assert "error: " in listed.stdout  # the runs list shows why


@pytest.mark.xdist_group("slurm-ends")
def test_a_job_that_can_never_start_says_why(on_slurm):
    run_id = create_run(tiny_config(name="two-nodes", executor="slurm", slurm_nodes=2, num_processes=2))
    assert schedule() == [run_id]
    job_id = run_row(run_id).slurm_job_id

    def reason() -> str:
        from app.web.pages import runs

        return next(row for row in runs.run_rows() if row[0] == run_id)[-1]

    try:
        wait_for(lambda: "PartitionNodeLimit" in reason(), 60, "Slurm's pending reason")
        position = slurm.queue_positions()[job_id].position  # 1 unless a job outside this test waits ahead of it
        assert reason() == (
            f"slurm {job_id}, queue #{position}, can never start: PartitionNodeLimit (it asks for more nodes than the partition "
            "has)"
        )
        assert "can never start" in _cli("runs").stdout
    finally:
        subprocess.run(["scancel", job_id], check=False)


@pytest.mark.xdist_group("slurm-requeue")
def test_a_requeued_job_reads_queued_and_resumes_from_its_checkpoint(on_slurm):
    run_id = create_run(tiny_config(name="requeued", executor="slurm", max_steps=400, save_steps=2, slurm_requeue=True))
    assert schedule() == [run_id]
    wait_for(lambda: run_row(run_id).current_step >= 3, 300, "a checkpoint to be saved")
    job_id = run_row(run_id).slurm_job_id
    subprocess.run(["scontrol", "requeue", job_id], check=True)
    wait_for(lambda: run_row(run_id).status == "queued", 120, "the requeued run to read queued")
    assert schedule() == [] and run_row(run_id).status == "queued"  # not failed, not submitted twice
    with get_sessionmaker().begin() as s:
        assert any("requeued by Slurm" in line.message for line in queries.log_tail(s, run_id, 20))
    # Slurm holds a requeued job back (its BeginTime) once the old job's processes have ended: wait for that, then skip
    # the delay. Set while the job was still COMPLETING, the new start time was overwritten and the job waited ~2 min.
    wait_for(lambda: slurm.job_state(job_id).state == "PENDING", 120, "Slurm to hold the requeued job")
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], check=True)  # skip Slurm's requeue delay
    wait_for(lambda: run_row(run_id).status == "running", 300, "the job to start again")

    def resumed() -> bool:
        with get_sessionmaker().begin() as s:
            return any("resuming from checkpoint-" in line.message for line in queries.log_tail(s, run_id, 50))

    wait_for(resumed, 120, "the restarted worker to resume from its checkpoint")
    with get_sessionmaker().begin() as s:
        stop_worker(s, queries.get_run(s, run_id))
    wait_for(lambda: run_row(run_id).status in ENDED, 300, "the run to stop")
    assert run_row(run_id).status == "stopped"
    with get_sessionmaker().begin() as s:  # no step written twice across the requeue
        steps = [p.step for p in queries.metric_series(s, run_id, "reward")]
    assert steps == sorted(set(steps)) and steps[0] == 1


@pytest.mark.xdist_group("slurm-ends")
def test_a_worker_killed_by_a_signal_is_reported_as_such(on_slurm):
    import os
    import signal

    run_id = submit_long_run("sigkill")
    row = run_row(run_id)
    os.kill(row.pid, signal.SIGKILL)  # the one node is this machine: the worker's own pid
    wait_for(lambda: schedule() is not None and run_row(run_id).status in ENDED, 120, "the killed run to end")
    error = run_row(run_id).error
    assert "killed by signal 9 (SIGKILL)" in error and "JobLaunchFailure" not in error, error


@pytest.mark.xdist_group("slurm-time-limit")
def test_a_short_time_limit_trains_and_says_it_stopped_at_the_limit(on_slurm):
    # the shortest limit a run is given is three minutes (MIN_SLURM_SECONDS): a reward that waits a second a step
    # (tests/fixtures/paced_reward.py) keeps the run stepping until Slurm's signal without a core trained flat out meanwhile
    # (127 CPU-s of the worker, a twelfth of the suite's CPU, before it)
    paced = f"{FIXTURES / 'paced_reward.py'}:waits"
    config = tiny_config(name="limited", executor="slurm", max_steps=100_000, save_steps=50, slurm_time="3")
    run_id = create_run(dataclasses.replace(config, reward_funcs=[*config.reward_funcs, paced]))
    assert schedule() == [run_id]
    wait_for(lambda: run_row(run_id).status in ENDED, 400, "the time-limited run to end")
    row = run_row(run_id)
    assert row.status == "stopped" and row.current_step > 10, (row.status, row.current_step, row.error)
    assert row.error == f"Slurm time limit 00:03 reached at step {row.current_step}; resume to continue"


# --- issue 41: a sweep's members as one job array ----------------------------------------------------------------------
@pytest.mark.xdist_group("slurm-time-limit")  # beside the time limit's three minutes of waiting, not behind the others
def test_a_sweeps_members_run_as_one_job_array_each_followed_and_stopped_as_its_own(on_slurm):
    import json

    from app import actions

    base = tiny_config(name="array", executor="slurm", max_steps=2, save_steps=400).to_dict()
    text = json.dumps({**base, "sweep": {"objective": "reward", "prune": {"probe": False}}})
    swept = actions.sweep(text, Access(), "max_steps=2,400")  # the second member is long enough to be stopped
    first, second = (m.run_id for m in swept.members)
    assert sorted(schedule()) == [first, second]
    job = run_row(first).slurm_job_id.split("_")[0]
    assert [run_row(first).slurm_job_id, run_row(second).slurm_job_id] == [f"{job}_0", f"{job}_1"]
    assert "#SBATCH --array=0-1\n" in slurm_array.ArrayFiles.of(swept.sweep_id, first).script.read_text()
    wait_for(lambda: run_row(first).status in ENDED, 600, "the array's first task to end")
    row = run_row(first)
    assert row.status == "completed" and row.host == on_slurm, row.error
    with get_sessionmaker().begin() as s:
        assert [p.step for p in queries.metric_series(s, first, "reward")] == [1, 2]
    files = RunFiles(Path(row.output_dir))
    assert f"slurm job {job}_0 on {on_slurm}" in files.log.read_text()  # the task's output is in its member's log
    wait_for(lambda: run_row(second).current_step >= 1 or run_row(second).status in ENDED, 300, "the second to train")
    with get_sessionmaker().begin() as s:
        assert stop_worker(s, queries.get_run(s, second)) is True  # scancel --signal=TERM of its task alone
    wait_for(lambda: run_row(second).status in ENDED, 300, "the stopped member to end")
    row = run_row(second)
    assert row.status == "stopped" and row.current_step < 400, row.error
    assert "final" in RunFiles(Path(row.output_dir)).saved_adapters()
    for task in (f"{job}_0", f"{job}_1"):  # each task's state read under its own id, and both ended by themselves
        wait_for(lambda task=task: slurm.job_state(task).state == "COMPLETED", 60, f"task {task} to end")
    assert schedule() == [] and actions.sweep_detail(swept.sweep_id).rows[0].status == "completed"
