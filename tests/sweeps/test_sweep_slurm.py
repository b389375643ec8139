"""A sweep's members on the Slurm executor as one job array (trainer/supervise/slurm_array.py, issue 41), without a
cluster: the scheduler's pass submits a sweep's queued members with one ``sbatch --array=0-K`` (fake sbatch and
squeue on the PATH record what they were asked), each member records ``JOBID_TASK``, the array's script runs each
task's own member in its own directory, and the state of each task is read per member. The real Slurm test is in
tests/runs/test_slurm_cluster.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from storage import queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from tests.helpers import tiny_config
from trainer.config import RunConfig
from trainer.supervise import schedule as scheduling
from trainer.supervise import slurm, slurm_array
from trainer.supervise.run_files import RunFiles


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> Path:
    """sbatch and squeue stand-ins: sbatch answers job 77, 78... and copies each script it is given; squeue prints
    ``$SQUEUE_OUT``. Every call's arguments go, one line a call, to the returned file."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        "#!/bin/bash\n"
        f'echo "sbatch $*" >> {calls}\n'
        f"n=$(grep -c '^sbatch' {calls})\n"
        f'cp "${{@: -1}}" {tmp_path}/submitted-$n.sh\n'
        "echo $((76 + n))\n"
    )
    (bin_dir / "squeue").write_text(f'#!/bin/bash\necho "squeue $*" >> {calls}\nprintf "$SQUEUE_OUT"\n')
    for tool in ("sbatch", "squeue"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SQUEUE_OUT", "")
    calls.touch()
    return calls


def _members(count: int, **overrides) -> list[int]:
    """A sweep with ``count`` queued members on the slurm executor (beta 0.0, 0.01, ...); their run ids."""
    ids = []
    with get_sessionmaker().begin() as s:
        sweep = sweep_rows.create_sweep(s, "arr", {"method": "grid"}, {}, "reward", "max")
        for index in range(count):
            config = tiny_config(name=f"arr-{index + 1}", executor="slurm", beta=index / 100, **overrides)
            run = queries.create_run(
                s, config.name, config.to_dict(), config.max_steps, sweep_id=sweep.id, sweep_point={"beta": index / 100}
            )
            ids.append(run.id)
    return ids


def _schedule() -> list[int]:
    with get_sessionmaker().begin() as s:
        return scheduling.schedule(s, slurm_states={})


def test_a_sweeps_members_are_submitted_as_one_array_and_each_records_its_task(fake_slurm, tmp_path):
    members = _members(3)
    alone = queries_create_plain()
    assert _schedule() == sorted([*members, alone])
    submits = [line for line in fake_slurm.read_text().splitlines() if line.startswith("sbatch")]
    assert len(submits) == 2  # the three members in one array, the plain run as its own job
    array_script = (tmp_path / "submitted-1.sh").read_text()
    assert "#SBATCH --array=0-2\n" in array_script and "--job-name=grpo-sweep-1-arr-1" in array_script
    with get_sessionmaker().begin() as s:
        runs = [queries.get_run(s, run_id) for run_id in members]
        assert [r.slurm_job_id for r in runs] == ["77_0", "77_1", "77_2"]
        assert all(r.status == "queued" for r in runs)
        assert queries.get_run(s, alone).slurm_job_id == "78"
        assert queries.log_tail(s, members[1])[-1].message.startswith("submitted to Slurm as task 1 of job array 77")
        array = slurm_array.ArrayFiles.of(runs[0].sweep_id, members[0])
        for index, run in enumerate(runs):  # each task's output lands in its member's own log
            assert array.task_log(index).resolve() == RunFiles(Path(run.output_dir)).log.resolve()
    assert f"--output={array.root}/task-%a.log" in array_script


def queries_create_plain() -> int:
    """A queued run on the slurm executor that belongs to no sweep."""
    config = tiny_config(name="plain", executor="slurm")
    with get_sessionmaker().begin() as s:
        return queries.create_run(s, config.name, config.to_dict(), config.max_steps).id


def test_each_array_task_runs_its_own_member_in_its_own_directory(fake_slurm, tmp_path, monkeypatch):
    """The array's script as Slurm's task 1 runs it: the case on SLURM_ARRAY_TASK_ID picks the second member, goes to
    its directory and exports its token (the worker's line is replaced by one that prints what it would get)."""
    monkeypatch.setattr(
        slurm_array,
        "launch_lines",
        lambda config, run_id: [f'exec echo "worker {run_id} in $PWD with ${{{slurm.MARKER_ENV}}}"'],
    )
    members = _members(2)
    _schedule()
    with get_sessionmaker().begin() as s:
        second = queries.get_run(s, members[1])
        files = RunFiles(Path(second.output_dir))
    env = {**os.environ, "SLURM_ARRAY_JOB_ID": "77", "SLURM_JOB_NODELIST": "node1"}
    ran = subprocess.run(
        ["bash", str(tmp_path / "submitted-1.sh")], env={**env, "SLURM_ARRAY_TASK_ID": "1"}, capture_output=True
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.decode().splitlines()
    assert lines == [
        "slurm job 77_1 on node1",
        f"worker {members[1]} in {files.root} with {files.shared_marker.read_text()}",
    ]
    stray = subprocess.run(
        ["bash", str(tmp_path / "submitted-1.sh")], env={**env, "SLURM_ARRAY_TASK_ID": "5"}, capture_output=True
    )
    assert stray.returncode == 1 and b"array task 5 is no member of this sweep" in stray.stderr


def test_the_real_launch_lines_are_the_single_jobs_and_the_script_parses(tmp_path):
    config = tiny_config(executor="slurm", slurm_time="01:00:00", slurm_partition="cpu")
    members = [slurm_array.Member(id_, config, RunFiles(tmp_path / str(id_)), f"t{id_}") for id_ in (5, 6)]
    script = slurm_array.array_script(2, members, slurm_array.ArrayFiles(tmp_path / "array"))
    for member in members:
        for line in slurm.launch_lines(config, member.run_id):
            assert f"    {line}\n" in script
    assert "#SBATCH --partition=cpu\n" in script and "#SBATCH --time=01:00:00\n" in script
    assert "--chdir" not in script  # each task goes to its member's directory itself
    assert subprocess.run(["bash", "-n"], input=script.encode()).returncode == 0


def test_members_with_other_job_options_are_not_one_array(fake_slurm):
    members = _members(2)
    with get_sessionmaker().begin() as s:  # the second member asks for another partition: it can't share the job
        run = queries.get_run(s, members[1])
        queries.set_config(s, run, {**run.config, "slurm_partition": "gpu"})
    _schedule()
    with get_sessionmaker().begin() as s:
        assert [queries.get_run(s, i).slurm_job_id for i in members] == ["77", "78"]


def test_an_array_slurm_refuses_fails_every_member_with_slurms_message(fake_slurm, tmp_path):
    (tmp_path / "bin" / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: invalid partition' >&2\nexit 1\n")
    members = _members(2)
    _schedule()
    with get_sessionmaker().begin() as s:
        for run_id in members:
            run = queries.get_run(s, run_id)
            assert run.status == "failed" and "invalid partition" in run.error


def test_each_tasks_state_is_read_per_member(fake_slurm, monkeypatch):
    monkeypatch.setenv("SQUEUE_OUT", "77_0|RUNNING|None|node1\n77_1|PENDING|Resources|\n")
    states = slurm.job_states(["77_0", "77_1"])
    assert states == {
        "77_0": slurm.JobState("RUNNING", "None", "node1"),
        "77_1": slurm.JobState("PENDING", "Resources", ""),
    }
    assert "--array" in fake_slurm.read_text().split()  # one line per task, a pending one too
    monkeypatch.setattr(slurm, "slurm", lambda *a, **k: "77_1|debug|Resources\n")
    assert slurm.queue_positions() == {"77_1": slurm.Waiting(1, "Resources")}


def test_a_task_knows_its_job_as_the_dashboard_recorded_it(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "80")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    assert slurm.slurm_job_id() == "80"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "77")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert slurm.slurm_job_id() == "77_3"  # the task's own SLURM_JOB_ID (80) is not what squeue reports it under


def test_the_options_of_one_run_are_not_shared(tmp_path):
    shared = slurm_array.shared_options(RunConfig(executor="slurm"), 4, RunFiles(tmp_path))
    assert not [o for o in shared if o.startswith(("--job-name", "--output", "--chdir"))]
    assert "--open-mode=append" in shared
