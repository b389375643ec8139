"""The cluster settings without a cluster: the multi-node and vLLM-server command lines read back by accelerate's and
TRL's own argument parsers, the job script as each node's shell expands it, the checks that refuse what can't work,
the shared-directory marker, and the vLLM supervisor starting and stopping both of its processes (with a stand-in
for the server, which needs a GPU)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config
from trainer import review
from trainer.config import RunConfig
from trainer.config.cluster import cluster_problems
from trainer.supervise import commands, slurm, vllm_server
from trainer.supervise.run_files import RunFiles

POSTGRES = "postgresql+psycopg://user@dbhost/grpo"


def accelerate_args(command: list[str]):
    """``command`` (``python -m accelerate.commands.launch ...``) parsed by accelerate's own launch parser."""
    from accelerate.commands.launch import launch_command_parser

    assert command[1:3] == ["-m", "accelerate.commands.launch"]
    return launch_command_parser().parse_args(command[3:])


def expanded_on_node(line: str, node_id: int, main_node: str) -> list[str]:
    """The argv a job script's ``exec srun ... bash -c '...'`` line runs on node ``node_id``, as bash expands it."""
    words = shlex.split(line)
    assert words[:2] == ["exec", "srun"] and words[-3:-1] == ["bash", "-c"]
    inner = words[-1].removeprefix("exec ")
    env = {"SLURM_NODEID": str(node_id), "GRPO_STUDIO_MAIN_NODE": main_node, "PATH": "/usr/bin:/bin"}
    shown = subprocess.run(
        ["bash", "-c", 'show() { printf "%s\\n" "$@"; }; show ' + inner],
        env=env,
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    return shown.splitlines()


def test_each_node_runs_accelerate_with_its_rank_and_the_first_node_as_rendezvous(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", POSTGRES)
    config = tiny_config(executor="slurm", slurm_nodes=2, num_processes=4, slurm_gpus_per_node=4)
    script = slurm.job_script(config, 12, RunFiles(tmp_path), "token")
    srun = next(line for line in script.splitlines() if line.startswith("exec srun"))
    for node in (0, 1):
        args = accelerate_args(expanded_on_node(srun, node, "gpu-a01"))
        assert (args.num_machines, args.machine_rank, args.main_process_ip) == (2, node, "gpu-a01")
        assert args.num_processes == 8  # accelerate's --num_processes counts every machine's processes
        assert args.main_process_port == commands.MAIN_PORT and args.multi_gpu and args.module
        assert (args.training_script, args.training_script_args) == ("trainer.job.worker", ["12"])
    assert 'export GRPO_STUDIO_MAIN_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    for option in ("--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=4", f"--output={tmp_path / 'worker.log'}"):
        assert f"#SBATCH {option}\n" in script


def test_the_job_script_carries_the_cluster_settings_and_runs_the_worker_itself(tmp_path):
    config = tiny_config(
        executor="slurm", slurm_partition="gpu", slurm_time="04:00:00", slurm_account="lab", slurm_extra=["--qos=high"]
    )
    script = slurm.job_script(config, 3, RunFiles(tmp_path), "abc123")
    for option in ("--partition=gpu", "--time=04:00:00", "--account=lab", "--qos=high", "--signal=B:TERM@300"):
        assert f"#SBATCH {option}\n" in script
    assert "--gpus-per-node" not in script  # slurm_gpus_per_node 0: a CPU job
    assert f"export {slurm.MARKER_ENV}=abc123\n" in script
    assert script.rstrip().endswith(f"exec {shlex.quote(sys.executable)} -m trainer.job.worker 3")
    assert "DATABASE_URL=" not in script  # the password stays in the environment, not in a readable file


def test_the_vllm_server_command_is_trls_vllm_serve():
    from trl.cli.commands import get_commands
    from trl.cli.main import _build_parser
    from trl.scripts.vllm_serve import make_parser

    command = commands.vllm_serve_command("org/model", 2, 8123, 0.85, 1024)
    assert command[1:3] == ["-m", "trl.cli.main"]
    cli_args, _ = _build_parser(get_commands()).parse_known_args(command[3:])
    assert cli_args.command == "vllm-serve"
    (script_args,) = make_parser().parse_args_into_dataclasses(command[4:])
    assert (script_args.model, script_args.tensor_parallel_size, script_args.port) == ("org/model", 2, 8123)
    assert (script_args.host, script_args.gpu_memory_utilization, script_args.max_model_len) == (
        "127.0.0.1",
        0.85,
        1024,
    )


def test_server_mode_points_grpo_config_at_the_runs_server(monkeypatch):
    from trl import GRPOConfig

    from trainer.job.trl_args import grpo_kwargs
    from trainer.supervise.commands import VLLM_GROUP_PORT_ENV, VLLM_SERVER_ENV

    monkeypatch.setenv(VLLM_SERVER_ENV, "127.0.0.1:8123")
    monkeypatch.setenv(VLLM_GROUP_PORT_ENV, "8124")
    config = tiny_config(vllm_mode="server", vllm_gpus="0", backend="trl", use_vllm=True)
    kwargs = grpo_kwargs(config, "/tmp/out", use_vllm=True)
    fields = {f.name for f in __import__("dataclasses").fields(GRPOConfig)}
    picked = {k: kwargs[k] for k in ("vllm_mode", "vllm_server_host", "vllm_server_port", "vllm_group_port")}
    assert picked == {
        "vllm_mode": "server",
        "vllm_server_host": "127.0.0.1",
        "vllm_server_port": 8123,
        "vllm_group_port": 8124,
    }
    assert set(picked) <= fields  # GRPOConfig has every one of them
    assert grpo_kwargs(tiny_config(), "/tmp/out")["vllm_mode"] == "colocate"  # the default stays colocate


def test_slurm_on_sqlite_is_refused_and_postgres_accepted(monkeypatch):
    config = tiny_config(executor="slurm")
    (problem,) = cluster_problems(config)  # the autouse fixture's database is SQLite
    assert "SQLite" in problem and "DATABASE_URL" in problem and "PostgreSQL" in problem
    monkeypatch.setenv("DATABASE_URL", POSTGRES)
    assert review.problems(config) == []


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"slurm_time": "4h"}, "slurm_time '4h' is not a Slurm time limit"),
        ({"slurm_extra": ["qos=high"]}, "slurm_extra 'qos=high': each entry is one sbatch option"),
        ({"vllm_mode": "server", "backend": "trl", "use_vllm": True}, "vllm_mode server needs vllm_gpus"),
        ({"vllm_mode": "server", "vllm_gpus": "0"}, "set backend trl and use_vllm true"),
        ({"vllm_mode": "server", "vllm_gpus": "x", "backend": "trl", "use_vllm": True}, "vllm_gpus 'x': expected"),
        (
            {"vllm_mode": "server", "vllm_gpus": "0,1", "backend": "trl", "use_vllm": True, "slurm_gpus_per_node": 2},
            "need more than the 2 GPUs",
        ),
    ],
)
def test_cluster_settings_that_cannot_work_are_refused(monkeypatch, settings, expected):
    monkeypatch.setenv("DATABASE_URL", POSTGRES)
    problems = cluster_problems(RunConfig(executor="slurm", **settings))
    assert len(problems) == 1 and expected in problems[0], problems


def test_more_nodes_need_the_slurm_executor():
    assert cluster_problems(RunConfig(slurm_nodes=2)) == [
        "slurm_nodes is 2 but executor is local: more nodes need executor slurm"
    ]


def test_the_worker_finds_the_dashboards_marker_or_says_the_data_dir_is_not_shared(tmp_path, monkeypatch):
    files = RunFiles(tmp_path)
    monkeypatch.setenv(slurm.MARKER_ENV, "t0ken")
    problem = slurm.shared_dir_problem(tmp_path)
    assert f"the run directory {tmp_path} is not shared with node" in problem and "missing" in problem
    assert "$GRPO_STUDIO_HOME" in problem and not files.node_marker.exists()
    files.shared_marker.write_text("t0ken")
    assert slurm.shared_dir_problem(tmp_path) is None and files.node_marker.exists()
    monkeypatch.delenv(slurm.MARKER_ENV)
    assert slurm.shared_dir_problem(Path("/nonexistent")) is None  # a worker the dashboard did not submit


def test_slurms_account_of_a_job_reads_as_one_sentence():
    assert slurm.JobState("TIMEOUT", "None", "n1", "0:0").describe("7") == (
        "Slurm job 7 ended TIMEOUT (it reached its time limit) (nodes n1)"  # exit 0:0 says nothing
    )
    assert slurm.JobState("FAILED", "NonZeroExitCode", "", "1:0").describe("8") == (
        "Slurm job 8 ended FAILED (reason: NonZeroExitCode, exit code 1)"
    )
    # a worker the job script exec'd, killed by signal 9: Slurm says JobLaunchFailure, ExitCode 0:9 (slurm 22.05)
    assert slurm.JobState("FAILED", "JobLaunchFailure", "n1", "0:9").describe("9") == (
        "Slurm job 9 ended FAILED (killed by signal 9 (SIGKILL), nodes n1)"
    )
    assert slurm.exit_text("137:0") == "killed by signal 9 (SIGKILL)"  # the shell's 128 + signal
    assert not slurm.JobState("NODE_FAIL").live and slurm.JobState("PENDING").live


def test_where_a_run_runs():
    assert slurm.where("box", None, "running", {}) == "box"
    assert slurm.where(None, "41", "queued", {"41": 2}) == "slurm 41, queue #2"
    waiting = {"41": slurm.Waiting(1, "PartitionNodeLimit"), "42": slurm.Waiting(2, "Resources")}
    assert slurm.where(None, "41", "queued", waiting) == (
        "slurm 41, queue #1, can never start: PartitionNodeLimit (it asks for more nodes than the partition has)"
    )
    assert slurm.where(None, "42", "queued", waiting) == "slurm 42, queue #2 (Resources)"
    assert slurm.where("node[1-2]", "41", "running", {}) == "slurm 41 on node[1-2]"


def test_vllm_gpus_count_within_the_visible_gpus():
    assert vllm_server.split_gpus(["4", "5", "6", "7"], [0]) == (["4"], ["5", "6", "7"])
    assert vllm_server.split_gpus(["0", "1", "2", "3"], [2, 3]) == (["2", "3"], ["0", "1"])
    with pytest.raises(ValueError, match="position 4, but this node shows 4 GPUs"):
        vllm_server.split_gpus(["0", "1", "2", "3"], [4])


def test_a_data_dir_on_a_local_filesystem_is_flagged_for_slurm(monkeypatch, tmp_path):
    from trainer.config.cluster import cluster_warnings, filesystem_type

    mounts = "overlay / overlay rw 0 0\nsrv:/home /shared nfs4 rw 0 0\ntmpfs /shared/tmp tmpfs rw 0 0\n"
    assert filesystem_type(Path("/shared/studio"), mounts) == "nfs4"
    assert filesystem_type(Path("/shared/tmp/x"), mounts) == "tmpfs"  # the longest mount point above it
    assert filesystem_type(Path("/sharedx"), mounts) == "overlay"
    monkeypatch.setenv("GRPO_STUDIO_HOME", str(tmp_path))
    local = filesystem_type(tmp_path)
    (warning,) = cluster_warnings(RunConfig(executor="slurm"))
    assert warning.startswith(f"executor slurm: the data dir {tmp_path} is on a local {local} filesystem")
    assert cluster_warnings(RunConfig()) == []  # local runs don't care


def test_the_stop_margin_scales_with_the_time_limit_and_too_short_a_limit_is_refused(monkeypatch):
    from trainer.config.cluster import slurm_seconds, stop_margin

    assert [slurm_seconds(t) for t in ("90", "05:00", "04:00:00", "2-00", "1-02:03", "")] == [
        5400,
        300,
        14400,
        172800,
        93780,
        None,
    ]
    assert [stop_margin(s) for s in (300, 3600, 14400, None)] == [30, 300, 300, 300]
    monkeypatch.setenv("DATABASE_URL", POSTGRES)
    script = slurm.job_script(tiny_config(executor="slurm", slurm_time="5"), 3, RunFiles(Path("/r")), "t")
    assert "#SBATCH --signal=B:TERM@30\n" in script  # a 5-minute job is asked to stop 30 s before, not 5 min
    (problem,) = review.problems(tiny_config(executor="slurm", slurm_time="2"))
    assert problem.startswith("slurm_time '2' is 120 s: too short")


def test_a_time_limit_stop_says_so(monkeypatch):
    monkeypatch.setenv(slurm.LIMIT_ENV, "3600")
    monkeypatch.setenv(slurm.STARTED_ENV, "1000")
    assert (
        slurm.time_limit_stop(42, now=1000 + 3600 - 300)
        == "Slurm time limit 01:00 reached at step 42; resume to continue"
    )
    assert slurm.time_limit_stop(42, now=1000 + 600) is None  # the user's stop, long before the limit


def test_resources_reach_the_job_script(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", POSTGRES)
    config = tiny_config(
        executor="slurm", slurm_cpus_per_task=8, slurm_mem="64G", slurm_exclusive=True, slurm_requeue=True
    )
    assert review.problems(config) == []
    script = slurm.job_script(config, 3, RunFiles(tmp_path), "t")
    for option in ("--cpus-per-task=8", "--mem=64G", "--exclusive", "--requeue"):
        assert f"#SBATCH {option}\n" in script
    assert review.problems(tiny_config(executor="slurm", slurm_mem="lots")) == [
        "slurm_mem 'lots': expected a size such as 64G, 512M or 0 (all of it)"
    ]


def _running_on_slurm(tmp_path, job_id: str) -> int:
    """A run recorded as running in Slurm job ``job_id`` on node1 (no job behind it)."""
    run_id = create_run(tiny_config(executor="slurm"))
    with get_sessionmaker().begin() as s:
        run = queries.get_run(s, run_id)
        queries.slurm_submitted(s, run, job_id, str(tmp_path))
        queries.mark_running(s, run, 1, str(tmp_path), None, "node1")
    return run_id


def test_ctrl_c_on_a_followed_slurm_run_answers_as_stop_does(tmp_path, monkeypatch, capsys):
    """Ctrl-C on a Slurm run followed in the foreground asks the stop ``grpo-studio stop`` asks: with Slurm not
    answering, the same one sentence and exit 1 (it was an uncaught SlurmError), the run as it was."""
    from types import SimpleNamespace

    from app.cli import output as cli_output
    from app.cli.main import main

    def not_answering(session, run):
        raise slurm.SlurmError("slurm_load_jobs error: Unable to contact slurm controller")

    def ctrl_c(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(slurm, "stop", not_answering)
    monkeypatch.setattr(cli_output, "time", SimpleNamespace(sleep=ctrl_c))  # the follow loop's first wait
    monkeypatch.setattr(cli_output.ProgressPrinter, "start", lambda self: None)  # no step to print
    run_id = _running_on_slurm(tmp_path, "4242")
    assert cli_output.follow(run_id, poll=0.01) == 1
    followed = capsys.readouterr().err
    assert main(["stop", str(run_id)]) == 1
    assert followed == capsys.readouterr().err
    assert followed.startswith(f"grpo-studio: run {run_id}: could not reach Slurm (") and "Traceback" not in followed
    assert len(followed.strip().splitlines()) == 1
    with get_sessionmaker().begin() as s:
        assert queries.get_run(s, run_id).status == "running"


def test_when_slurm_does_not_answer_the_runs_are_kept_and_it_is_said_once(tmp_path, monkeypatch, caplog):
    """A squeue that hangs (slurmctld down): one poll gives up after its short timeout, says so once, and the
    scheduler's reconcile leaves the runs as they were."""
    import logging

    from trainer.supervise import schedule

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "squeue").write_text("#!/bin/sh\nsleep 30\n")
    (fake / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    monkeypatch.setattr(slurm, "POLL_TIMEOUT_S", 1)
    slurm._not_answering.clear()
    run_id = _running_on_slurm(tmp_path, "12345")
    caplog.set_level(logging.WARNING, logger="trainer.supervise.slurm")
    for _ in range(3):
        assert schedule.poll_slurm() is None
    with get_sessionmaker().begin() as s:
        schedule.reconcile(s, None)
        assert queries.get_run(s, run_id).status == "running"  # kept as it was
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "Slurm is not answering" in caplog.records[0].message
    assert "did not answer within 1 s" in caplog.records[0].message  # the poll's short timeout, not TIMEOUT_S
    assert slurm.where("node1", "12345", "running", {}) == "slurm 12345 (Slurm is not answering)"
    slurm._not_answering.clear()


# --- the vLLM node layout: trl vllm-serve on the last node, training on the others -------------------------------------
STUB_SRUN = r'''#!/usr/bin/env python3
"""srun's stand-in: records each step (its options, nodes and the server address it sees) and plays it out: the
server step waits for SIGTERM; the training step expands its command on every node it runs on, then trains for
TRAIN_S seconds (or until SIGTERM)."""
import json, os, signal, subprocess, sys, time
args = sys.argv[1:]
record = {"args": args, "server": os.environ.get("GRPO_STUDIO_VLLM_SERVER"), "group": os.environ.get("GRPO_STUDIO_VLLM_GROUP_PORT")}
def done(*_):
    record["ended"] = "SIGTERM"
    open(os.environ["RECORD"], "a").write(json.dumps(record) + "\n")
    sys.exit(143)
signal.signal(signal.SIGTERM, done)
nodes = int(next(a for a in args if a.startswith("--nodes=")).split("=")[1])
if any(a.startswith("--exclude=") for a in args):
    inner = args[-1]
    record["ranks"] = []
    for node in range(nodes):
        env = {**os.environ, "SLURM_NODEID": str(node)}
        shown = subprocess.run(["bash", "-c", 'show() { printf "%s\\n" "$@"; }; show ' + inner.removeprefix("exec ")],
                               env=env, capture_output=True, text=True, check=True).stdout.splitlines()
        record["ranks"].append(shown)
    time.sleep(float(os.environ.get("TRAIN_S", "0.5")))
    record["ended"] = "done"
    open(os.environ["RECORD"], "a").write(json.dumps(record) + "\n")
    sys.exit(0)
record["command"] = args[args.index(next(a for a in args if not a.startswith("--"))):]
while True:
    time.sleep(0.1)
'''


def _run_layout(tmp_path, train_s: float, stop_after: float | None = None) -> tuple[int, list[dict]]:
    """The multi-node server-mode job script run by bash with Slurm's commands stood in for (no node or GPU here)."""
    import json
    import time

    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "srun").write_text(STUB_SRUN)
    (stubs / "scontrol").write_text('#!/bin/sh\nprintf "gpu-a01\\ngpu-a02\\ngpu-a03\\n"\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    config = tiny_config(
        executor="slurm",
        slurm_nodes=3,
        slurm_gpus_per_node=4,
        num_processes=4,
        vllm_mode="server",
        backend="trl",
        use_vllm=True,
        model_name_or_path="Qwen/Qwen2.5-0.5B-Instruct",
    )
    assert review.problems(config) == []
    script = tmp_path / "job.sh"
    script.write_text(slurm.job_script(config, 12, RunFiles(tmp_path), "token"))
    record = tmp_path / "steps.jsonl"
    env = {
        **os.environ,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "RECORD": str(record),
        "TRAIN_S": str(train_s),
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NODELIST": "gpu-a[01-03]",
    }
    job = subprocess.Popen(["bash", str(script)], cwd=tmp_path, env=env)
    if stop_after is not None:
        time.sleep(stop_after)
        job.send_signal(signal.SIGTERM)  # a stop, or the signal ahead of the time limit (--signal=B:TERM)
    code = job.wait(timeout=60)
    return code, [json.loads(line) for line in record.read_text().splitlines()]


def test_vllm_serves_on_the_last_node_and_trains_on_the_others(tmp_path, monkeypatch):
    from trl.scripts.vllm_serve import make_parser

    monkeypatch.setenv("DATABASE_URL", POSTGRES)
    code, steps = _run_layout(tmp_path, train_s=0.5)
    assert code == 0
    training, server = steps  # training ended first; then the script stopped the server
    assert "--nodelist=gpu-a03" in server["args"] and server["ended"] == "SIGTERM"
    (serve_args,) = make_parser().parse_args_into_dataclasses(server["command"][4:])
    assert (serve_args.host, serve_args.port, serve_args.tensor_parallel_size) == ("0.0.0.0", 8000, 4)
    assert "--exclude=gpu-a03" in training["args"] and "--nodes=2" in training["args"]
    assert training["server"] == "gpu-a03:8000" and training["group"] == "51216"  # what trl_args reads
    for rank, argv in enumerate(training["ranks"]):
        args = accelerate_args(argv)
        assert (args.num_machines, args.machine_rank, args.main_process_ip) == (2, rank, "gpu-a01")
        assert args.num_processes == 8 and args.training_script_args == ["12"]


def test_a_stop_reaches_the_training_step_and_the_server_is_stopped_after(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", POSTGRES)
    code, steps = _run_layout(tmp_path, train_s=30, stop_after=3)
    assert code == 143  # training's own status: stopped by the signal
    assert [s["ended"] for s in steps] == ["SIGTERM", "SIGTERM"]
    assert "--exclude=gpu-a03" in steps[0]["args"]  # training first, the server after it


def test_the_vllm_node_layout_refuses_what_cannot_work(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", POSTGRES)
    base = dict(
        executor="slurm", slurm_nodes=2, vllm_mode="server", backend="trl", use_vllm=True, slurm_gpus_per_node=4
    )
    assert any("leave vllm_gpus empty" in p for p in review.problems(tiny_config(**base, vllm_gpus="0")))
    assert any("needs GPUs" in p for p in review.problems(tiny_config(**{**base, "slurm_gpus_per_node": 0})))
    assert any("per training node" in p for p in review.problems(tiny_config(**base, num_processes=8)))


def test_stop_while_slurm_does_not_answer_is_one_sentence_and_changes_nothing(tmp_path, monkeypatch, capsys):
    """`grpo-studio stop` with slurmctld down: exit 1 and one sentence (it was a traceback after 21 s), the run as it was."""
    from app.cli.main import main

    fake = tmp_path / "bin"
    fake.mkdir()
    for command in ("squeue", "sacct", "scancel"):
        (fake / command).write_text(
            "#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller' >&2\nexit 1\n"
        )
        (fake / command).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    slurm._not_answering.clear()
    run_id = _running_on_slurm(tmp_path, "4242")
    assert main(["stop", str(run_id)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"grpo-studio: run {run_id}: could not reach Slurm") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    with get_sessionmaker().begin() as s:
        assert queries.get_run(s, run_id).status == "running"
    slurm._not_answering.clear()
