"""A launcher's warm parent (trainer.supervise.warm_start, trainer.job.warm_start): which starts it takes, and that a
worker it forks is set up as a fresh detached worker would be, heard by a stop from its first moment.

The fast tests run the real trainer.job.warm_start.serve in a process of its own, its forked child standing in for the
worker (it reports how it was set up instead of training); the slow one trains real runs from one launcher."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from trainer.supervise import warm_start

# The warm parent's loop, its child reporting itself in the log instead of training.
STAND_IN = """
import json, os, signal, sys
from trainer.job.warm_start import serve
requests, answers = map(int, sys.argv[1:3])
run_id, stop = serve(requests, answers, dict(os.environ))
print(json.dumps({
    "run_id": run_id, "pid": os.getpid(), "session": os.getsid(0), "cwd": os.getcwd(), "path0": sys.path[0],
    "mark": os.environ.get("WARM_TEST_MARK"), "database": os.environ.get("DATABASE_URL"),
    "sigchld_default": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL, "stdin": os.readlink("/proc/self/fd/0"),
    "pipes": sorted(n for n in os.listdir("/proc/self/fd")  # (the listing's own fd is closed by the next line)
                    if os.path.exists(f"/proc/self/fd/{n}") and os.readlink(f"/proc/self/fd/{n}").startswith("pipe:")),
}), flush=True)
stop.event.wait(60)
print("stop heard:", stop.requested, flush=True)
"""


AUDITED = []  # the warm-start audit events this process raised (an audit hook stays for the process's life)
sys.addaudithook(lambda event, args: AUDITED.append(args) if event == "grpo_studio.warm_start" else None)


def _worker(run_id: int) -> list[str]:
    return [sys.executable, "-m", warm_start.WORKER_MODULE, str(run_id)]


@pytest.fixture
def parent(tmp_path, monkeypatch):
    """A warm parent (the real serve loop) as this process's, ready; yields (its process, the launch environment).
    The stand-in workers it forked are stopped after the test."""
    from trainer.supervise import gpu_lease

    monkeypatch.setattr(gpu_lease, "gpu_visible", lambda: False)
    monkeypatch.delenv(warm_start.SWITCH, raising=False)
    requests_read, requests_write = os.pipe()
    answers_read, answers_write = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WARM_TEST_MARK": "first"}
    origin = [sys.executable, "-c", STAND_IN, str(requests_read), str(answers_write)]
    process = subprocess.Popen(origin, pass_fds=(requests_read, answers_write), env=env, cwd=tmp_path)
    os.close(requests_read)
    os.close(answers_write)
    warm = warm_start._WarmParent(requests_write, answers_read, warm_start.import_settings(env), origin)
    deadline = time.monotonic() + 30
    while not (warm.ready or warm.gone) and time.monotonic() < deadline:
        warm.look()
        time.sleep(0.02)
    assert warm.ready and warm.pid == process.pid, "the warm parent never said it was ready"
    monkeypatch.setattr(warm_start, "_parent", warm)
    forked = []
    real_start = warm.start
    monkeypatch.setattr(warm, "start", lambda *a: forked.append(real_start(*a)) or forked[-1])
    yield process, env
    for pid in filter(None, forked):
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    warm.close()
    process.wait(timeout=30)


def _report(log: Path) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines() if log.exists() else []:
            if line.startswith("{"):
                return json.loads(line)
        time.sleep(0.05)
    raise AssertionError(f"the forked worker never reported: {log.read_text() if log.exists() else 'no log'}")


def test_a_start_is_forked_by_the_ready_parent_and_set_up_as_a_fresh_detached_worker(parent, tmp_path):
    process, env = parent
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    log = run_dir / "worker.log"
    log.write_text("earlier lines\n")
    launch_env = {**env, "DATABASE_URL": "sqlite:////tmp/elsewhere.db", "PYTEST_CURRENT_TEST": "another"}

    pid = warm_start.start(_worker(12), log, run_dir, launch_env)

    report = _report(log)
    assert report["pid"] == pid != process.pid
    assert report["run_id"] == 12
    assert report["session"] == pid  # a session of its own, as start_new_session gives: a stop's killpg is its alone
    assert report["cwd"] == report["path0"] == str(run_dir)
    assert report["mark"] == "first" and report["database"] == "sqlite:////tmp/elsewhere.db"  # the launch's env
    assert report["sigchld_default"] is True  # its own subprocesses are waited for
    assert report["stdin"] == "/dev/null"
    assert report["pipes"] == []  # the launcher's pipes stay with the parent
    lines = log.read_text().splitlines()
    assert lines[0] == "earlier lines"  # appended to, as a fresh worker's log is
    assert "forked by the launcher's warm parent" in lines[1]

    os.killpg(pid, signal.SIGTERM)  # what trainer.supervise.stop.stop_worker sends
    deadline = time.monotonic() + 30
    while "stop heard: True" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "stop heard: True" in log.read_text()
    assert process.poll() is None  # the parent is in another session: the run's stop is not for it

    second = warm_start.start(_worker(13), tmp_path / "second.log", tmp_path, launch_env)
    assert second not in (pid, process.pid) and _report(tmp_path / "second.log")["run_id"] == 13


def _command_line(pid: int) -> list[str]:
    """What ps shows of ``pid``: its /proc command line, the empty arguments a shorter title leaves dropped."""
    return [arg.decode() for arg in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if arg]


def test_ps_shows_a_forked_worker_with_its_own_run_id_and_the_parent_with_none(parent, tmp_path):
    """Issue 58: a forked worker kept the command line of the process it was forked from, whose run id ps showed."""
    process, env = parent
    first = warm_start.start(_worker(7), tmp_path / "7.log", tmp_path, env)
    second = warm_start.start(_worker(1234), tmp_path / "1234.log", tmp_path, env)
    assert _report(tmp_path / "7.log")["run_id"] == 7 and _report(tmp_path / "1234.log")["run_id"] == 1234

    assert _command_line(first) == [sys.executable, "-m", "trainer.job.worker", "7"]  # as a fresh worker's
    assert _command_line(second) == [sys.executable, "-m", "trainer.job.worker", "1234"]
    assert _command_line(process.pid) == [sys.executable, "-m", "trainer.job.warm_start", "warm-parent"]


def test_a_title_longer_than_the_old_command_line_is_refused_and_a_shorter_one_set():
    """trainer.job.proctitle writes only within the old command line's room: a longer title is refused, not cut."""
    script = (
        "import sys; from trainer.job.proctitle import set_title; "
        "print(set_title(['x' * 4096]), set_title(['short', 'title']), flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert child.stdout.readline().split() == ["False", "True"]
        assert _command_line(child.pid) == ["short", "title"]
    finally:
        child.communicate("")


def test_a_stop_sent_the_moment_the_pid_is_answered_is_heard(parent, tmp_path):
    _, env = parent
    for run_id in range(30, 35):
        log = tmp_path / f"{run_id}.log"
        pid = warm_start.start(_worker(run_id), log, tmp_path, env)
        os.killpg(pid, signal.SIGTERM)  # before the child has done anything of its own
        deadline = time.monotonic() + 30
        while "stop heard" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "stop heard: True" in log.read_text(), log.read_text()


def test_a_child_whose_pid_cannot_reach_the_launcher_never_runs(parent, tmp_path):
    """The launcher stopped listening (closed its answers' end) as the parent forked: the child exits unrun, so no
    worker trains that its launcher does not know of."""
    process, env = parent
    warm = warm_start._parent
    os.close(warm.answers)
    request = {"run_id": 40, "log": str(tmp_path / "40.log"), "cwd": str(tmp_path), "env": env}
    warm_start.write_all(warm.requests, json.dumps(request).encode() + b"\n")
    time.sleep(2)  # a child that ran would have made its log and written its report within milliseconds
    assert not (tmp_path / "40.log").exists()
    warm.answers = -1


def test_a_launch_with_other_import_settings_starts_fresh_and_lets_the_parent_go(parent, tmp_path, monkeypatch):
    process, env = parent
    started = []

    class Started:
        pid = 4242

    def spawn(command, log, cwd, env, pass_fds=()):
        started.append(command)
        return Started()

    monkeypatch.setattr(warm_start, "spawn", spawn)
    pid = warm_start.start(_worker(7), tmp_path / "w.log", tmp_path, {**env, "HF_HOME": "/somewhere/else"})

    assert pid == 4242
    # a fresh worker, which becomes the next warm parent, with the new settings
    assert started == [[sys.executable, "-m", warm_start.MODULE, "--pipes", started[0][4], "7"]]
    assert warm_start._parent.settings["HF_HOME"] == "/somewhere/else"
    assert process.wait(timeout=30) == 0  # the old parent read the end of its requests and went
    warm_start._parent.close()


def test_the_parent_itself_refuses_a_request_of_other_import_settings(parent, tmp_path):
    process, env = parent
    warm = warm_start._parent
    assert warm.start(3, tmp_path / "w.log", tmp_path, {**env, "OMP_NUM_THREADS": "7"}) is None
    assert not (tmp_path / "w.log").exists()
    assert warm.start(3, tmp_path / "w.log", tmp_path, env) is not None  # and goes on serving


def test_a_parent_that_stops_answering_is_killed_and_a_fresh_worker_started(tmp_path, monkeypatch):
    requests_read, requests_write = os.pipe()
    answers_read, answers_write = os.pipe()
    says_ready = "import os, sys, time; os.write(int(sys.argv[1]), b'ready %d\\n' % os.getpid()); time.sleep(60)"
    silent = subprocess.Popen(
        [sys.executable, "-c", says_ready, str(answers_write)], pass_fds=(requests_read, answers_write)
    )
    os.close(requests_read)
    os.close(answers_write)
    env = dict(os.environ)
    warm = warm_start._WarmParent(requests_write, answers_read, warm_start.import_settings(env), ["silent"])
    deadline = time.monotonic() + 30
    while not warm.ready and time.monotonic() < deadline:
        warm.look()
    assert warm.pid == silent.pid
    monkeypatch.setattr(warm_start, "_parent", warm)
    monkeypatch.setattr(warm_start, "ANSWER_SECONDS", 0.5)
    monkeypatch.setattr(warm_start, "spawn", lambda command, *a, **k: type("Started", (), {"pid": 77})())

    assert warm_start.start(_worker(5), tmp_path / "w.log", tmp_path, env) == 77
    from trainer.supervise.processes import pid_alive

    # killed (the launcher may have reaped it as a parent let go, so its Popen can't tell how it ended)
    deadline = time.monotonic() + 30
    while pid_alive(silent.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(silent.pid)
    assert warm_start._parent is not warm
    warm_start._parent.close()


def test_a_parent_still_importing_or_gone_starts_a_fresh_worker(tmp_path, monkeypatch):
    started = []

    class Started:
        pid = 99

    monkeypatch.setattr(warm_start, "spawn", lambda command, *a, **k: started.append(command) or Started())
    requests_read, requests_write = os.pipe()
    answers_read, answers_write = os.pipe()
    settings = warm_start.import_settings(dict(os.environ))
    importing = warm_start._WarmParent(requests_write, answers_read, settings, [*_worker(1)])
    monkeypatch.setattr(warm_start, "_parent", importing)

    assert warm_start.start(_worker(1), tmp_path / "w.log", tmp_path, dict(os.environ)) == 99
    assert started == [_worker(1)] and warm_start._parent is importing  # kept: it may be ready for the next

    os.close(answers_write)  # it died before saying it was ready
    os.close(requests_read)
    monkeypatch.setattr(warm_start, "spawn", lambda command, *a, pass_fds=(), **k: started.append(command) or Started())
    warm_start.start(_worker(2), tmp_path / "w.log", tmp_path, dict(os.environ))
    assert started[1][2] == warm_start.MODULE and warm_start._parent is not importing  # a new one in its place
    warm_start._parent.close()


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "trainer.job.worker", "1"],
        [sys.executable, "-m", "accelerate.commands.launch", "--module", "trainer.job.worker", "1"],
        [sys.executable, "-m", "trainer.supervise.vllm_server", "1", "--", *_worker(1)],
        ["/another/python", "-m", "trainer.job.worker", "1"],
    ],
)
def test_only_the_plain_worker_is_warm(command, monkeypatch):
    from trainer.supervise import gpu_lease

    monkeypatch.setattr(gpu_lease, "gpu_visible", lambda: False)
    monkeypatch.delenv(warm_start.SWITCH, raising=False)
    assert warm_start.warmable(_worker(1)) is True  # this machine shows no GPU
    assert warm_start.warmable(command) is False


def test_no_warm_start_with_a_gpu_visible_or_switched_off(monkeypatch):
    from trainer.supervise import gpu_lease

    monkeypatch.setattr(gpu_lease, "gpu_visible", lambda: True)
    assert warm_start.warmable(_worker(1)) is False  # unsloth must come before transformers there
    monkeypatch.setattr(gpu_lease, "gpu_visible", lambda: False)
    monkeypatch.setenv(warm_start.SWITCH, "0")
    assert warm_start.warmable(_worker(1)) is False


def test_import_settings_leave_out_only_what_is_read_after_the_start():
    env = {
        "GRPO_STUDIO_HOME": "/a",
        "DATABASE_URL": "sqlite://",
        "TORCHINDUCTOR_CACHE_DIR": "/c",
        "HF_HOME": "/h",
        "PATH": "/bin",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": "/p",
    }
    assert warm_start.import_settings(env) == {
        "HF_HOME": "/h",
        "PATH": "/bin",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": "/p",
    }
    from trainer.loading.backend import CACHE_VARIABLES

    assert set(CACHE_VARIABLES) <= warm_start.RUNTIME_VARIABLES


def test_a_warm_start_raises_the_audit_event_the_suite_guard_counts(parent, tmp_path):
    from tests.suite.slow_guard import WARM_START

    assert WARM_START == "grpo_studio.warm_start"
    _, env = parent
    warm_start.start(_worker(21), tmp_path / "w.log", tmp_path, env)
    assert (21, warm_start._parent.origin) in AUDITED


# A launcher of its own (as a dashboard is): it trains run A (a fresh worker, which becomes the warm parent), then
# starts run B (forked warm) and C, stops C once it trains, and exits while B still trains.
LAUNCHER = """
import sys
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import run_row, wait_for
from trainer.supervise.start import start_worker
from trainer.supervise import warm_start
from trainer.supervise.stop import stop_worker

def start(run_id):
    with get_sessionmaker().begin() as s:
        return start_worker(s, queries.get_run(s, run_id))

first, second, third = map(int, sys.argv[1:4])
print("pid", first, start(first), flush=True)
wait_for(lambda: run_row(first).status in ("completed", "failed", "stopped"), 300, "the first run to end")
wait_for(lambda: warm_start._parent.look() or warm_start._parent.ready, 60, "the warm parent to be ready")
print("pid", second, start(second), flush=True)
print("pid", third, start(third), flush=True)
wait_for(lambda: run_row(third).current_step >= 1, 300, "the third run to train")
with get_sessionmaker().begin() as s:
    assert stop_worker(s, queries.get_run(s, third))
wait_for(lambda: run_row(second).current_step >= 1, 300, "the second run to train")
"""


@pytest.mark.slow
def test_runs_forked_warm_train_stop_and_outlive_their_launcher_as_fresh_workers_do(tiny_model_path, tmp_path):
    from storage import queries
    from storage.db import get_sessionmaker
    from tests.helpers import create_run, run_row, tiny_config, wait_for
    from trainer.supervise.run_files import RunFiles

    first = create_run(tiny_config(name="fresh", max_steps=2))
    # it reports to trackio, which reads TRACKIO_DIR as it is imported: the worker sets it under the run's directory
    second = create_run(tiny_config(name="warm", max_steps=12, save_steps=100, report_to=["trackio"]))
    third = create_run(tiny_config(name="warm-stopped", max_steps=400, save_steps=400))
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(first), str(second), str(third)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    pids = {int(run): int(pid) for _, run, pid in (line.split() for line in done.stdout.splitlines())}

    for run_id in (second, third):
        wait_for(lambda run_id=run_id: run_row(run_id).status in ("completed", "failed", "stopped"), 300, "the end")
    rows = {run_id: run_row(run_id) for run_id in (first, second, third)}
    assert [rows[r].status.value for r in (first, second, third)] == ["completed", "completed", "stopped"]
    assert rows[second].current_step == 12  # trained on after its launcher exited
    assert rows[third].error is None and (RunFiles(Path(rows[third].output_dir)).root / "adapter").is_dir()
    for run_id in (first, second, third):
        assert rows[run_id].pid == pids[run_id]  # the pid the launcher recorded is the one that trained
    logs = {run_id: RunFiles(Path(rows[run_id].output_dir)).log.read_text() for run_id in (first, second, third)}
    assert "warm parent" not in logs[first]
    assert "forked by the launcher's warm parent" in logs[second] and "forked by" in logs[third]
    with get_sessionmaker().begin() as s:
        assert [p.step for p in queries.metric_series(s, second, "reward")] == list(range(1, 13))
    assert any((RunFiles(Path(rows[second].output_dir)).root / "trackers" / "trackio").iterdir())

    # the warm parent (forked from the first worker) went with its launcher
    def parents() -> list[str]:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        return [
            line for line in ps.splitlines() if f"{warm_start.MODULE} --pipes" in line and line.endswith(f" {first}")
        ]

    wait_for(lambda: not parents(), 30, "the warm parent to exit")
