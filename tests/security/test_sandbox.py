"""The code_tests sandbox, attacked: forged verdicts, escapes, secrets, sockets, signals, leftovers and resource
bombs are contained as root and as an unprivileged user; tests are judged outside the candidate's interpreter; and
code_tests is refused where isolation is unavailable. The attacks themselves live in tests/security/sandbox_attacks.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.security.sandbox_attacks import TWO_SUM, TWO_SUM_TESTS, attacks
from trainer import review
from trainer.config import RunConfig
from trainer.scoring import sandbox
from trainer.scoring.code_tasks import CODE_PROBLEMS
from trainer.scoring.judge import plan
from trainer.scoring.rewards import REWARDS, extract_code
from trainer.scoring.sandbox import Limits, SandboxUnavailable, run_many, run_tests

# Smaller than the defaults so the bombs end sooner; the wall limit leaves room for 40 jobs on two busy cores.
LIMITS = Limits(wall_seconds=4.0, test_seconds=3.0, cpu_seconds=2, memory_mb=256, max_processes=8)
WRONG_TWO_SUM = "def two_sum(nums, target):\n    return [1, 0]\n"
NOBODY = 65534
CONTEXT_KEYS = [
    "marker",
    "db",
    "host_dir",
    "host_file",
    "repo",
    "tcp_port",
    "udp_port",
    "host_ip",
    "unix_path",
    "abstract",
]
EXPECTED = {name: a.expect for name, a in attacks(**dict.fromkeys(CONTEXT_KEYS, "0")).items()}


# --- the host the attacks aim at ------------------------------------------------------------------------------------
class Listeners:
    """TCP (with Fast Open), UDP, unix-path and abstract unix listeners on the host that record anything arriving."""

    def __init__(self, directory: Path, marker: str):
        self.received: list[str] = []
        self.tcp = socket.create_server(("0.0.0.0", 0))
        self.tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, 16)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", 0))
        self.unix_path = str(directory / "dashboard.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        os.chmod(self.unix_path, 0o777)  # the unprivileged worker could connect; its sandbox must not
        self.abstract_name = f"grpo-{marker}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        for s in (self.tcp, self.unix, self.abstract):
            s.listen()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, args=(s,), daemon=True) for s in self.sockets]
        for t in self._threads:
            t.start()

    @property
    def sockets(self):
        return [self.tcp, self.udp, self.unix, self.abstract]

    def _watch(self, s: socket.socket) -> None:
        s.settimeout(0.1)
        while not self._stop.is_set():
            try:
                if s.type == socket.SOCK_DGRAM:
                    data, peer = s.recvfrom(65536)
                    self.received.append(f"udp from {peer}: {data[:40]!r}")
                else:
                    conn, peer = s.accept()
                    self.received.append(f"connection on {s.getsockname()!r} from {peer!r}")
                    conn.close()
            except (TimeoutError, OSError):
                continue

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        for s in self.sockets:
            s.close()


def _host_ip() -> str:
    """A non-loopback address of this machine (connecting a UDP socket sends nothing), else loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def _processes_mentioning(marker: str) -> list[str]:
    """Command lines on the host that mention ``marker`` (a sandboxed process that outlived its job)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _unprivileged_command() -> list[str] | str:
    """How to start the harness as an unprivileged user, or why it can't be."""
    if os.geteuid() != 0:
        return [sys.executable]  # already unprivileged
    python = "/usr/bin/python3"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if not os.path.exists(python) or not sandbox._readable_by_anyone(python):
        return f"no interpreter nobody can run ({python})"
    if not sandbox._readable_by_anyone(str(ROOT / "trainer" / "scoring" / "sandbox.py")):
        return f"the checkout at {ROOT} is not readable by nobody"
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python]


@dataclasses.dataclass
class World:
    """One mode's view: the database it owns, the host directory it could write to, and what the harness said."""

    mode: str
    marker: str
    directory: Path
    db: Path
    db_digest: str
    listing: list[str]
    result: dict | None = None
    skip: str = ""
    failure: str = ""
    free_drop: int = 0  # bytes of the host's /tmp used up while the attacks ran


@pytest.fixture(scope="module")
def battery():
    """Every attack, run by the harness as root and as nobody at the same time, with listeners on the host; yields
    {mode: World} and leaves the host as it found it."""
    free_before = shutil.disk_usage("/tmp").free
    worlds, runs = {}, {}
    listeners_dir = Path(tempfile.mkdtemp(prefix="grpo-listeners-", dir="/tmp"))
    os.chmod(listeners_dir, 0o755)
    marker = uuid.uuid4().hex[:12]
    listeners = Listeners(listeners_dir, marker)
    for mode, command in (("root", [sys.executable]), ("unprivileged", _unprivileged_command())):
        directory = Path(tempfile.mkdtemp(prefix=f"grpo-world-{mode}-", dir="/tmp"))
        os.chmod(directory, 0o755)
        db = directory / "grpo-studio.db"
        db.write_text("SQLite format 3\0 runs, metrics, secrets")
        db.chmod(0o644)  # as the issue found it: readable by anyone on the host
        host_file = directory / "run.log"
        host_file.write_text("a run's log")
        world = World(mode, f"{mode}-{marker}", directory, db, _digest(db), sorted(os.listdir(directory)))
        worlds[mode] = world
        if isinstance(command, str) or (mode == "root" and os.geteuid() != 0):
            world.skip = command if isinstance(command, str) else "not running as root"
            continue
        if mode == "unprivileged" and os.geteuid() == 0:
            for path in (directory, db, host_file):
                os.chown(path, NOBODY, NOBODY)  # the unprivileged worker's own files
        context = dict(
            marker=world.marker, db=str(db), host_dir=str(directory), host_file=str(host_file), repo=str(ROOT),
            tcp_port=str(listeners.tcp.getsockname()[1]), udp_port=str(listeners.udp.getsockname()[1]),
            host_ip=_host_ip(), unix_path=listeners.unix_path, abstract=listeners.abstract_name,
        )  # fmt: skip
        spec = {
            "jobs": {name: [a.code, list(a.tests)] for name, a in attacks(**context).items()},
            "later": [[WRONG_TWO_SUM, list(TWO_SUM_TESTS)]] * 8,
            "limits": dataclasses.asdict(LIMITS),
        }
        env = {**os.environ, "HF_TOKEN": f"hf_{world.marker}", "OPENAI_API_KEY": world.marker, "PYTHONPATH": str(ROOT)}
        spec_file = listeners_dir / f"{mode}.json"
        spec_file.write_text(json.dumps(spec))
        with spec_file.open() as stdin:
            runs[mode] = subprocess.Popen(
                [*command, "-B", "-m", "tests.security.sandbox_attacks"],
                cwd=ROOT,
                env=env,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
    for mode, process in runs.items():
        try:
            out, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate(timeout=10)
        if process.returncode == 0:
            worlds[mode].result = json.loads(out)
        else:
            worlds[mode].failure = f"the harness exited with {process.returncode}: {err[-3000:]}"
    for world in worlds.values():
        world.free_drop = free_before - shutil.disk_usage("/tmp").free
    listeners.close()
    yield worlds, listeners
    for world in worlds.values():
        shutil.rmtree(world.directory, ignore_errors=True)
    shutil.rmtree(listeners_dir, ignore_errors=True)


def _world(battery, mode: str) -> World:
    world = battery[0][mode]
    if world.skip:
        pytest.skip(f"{mode}: {world.skip}")
    assert not world.failure, world.failure
    return world


# --- the battery ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["root", "unprivileged"])
@pytest.mark.parametrize("name", list(EXPECTED))
def test_attack_is_contained(battery, name, mode):
    """Forgeries score 0; probes find nothing (every test passes, so a sandbox that broke can't look safe); and no
    job hangs the worker past its limit (the bound is a hang detector, generous for a busy machine)."""
    world = _world(battery, mode)
    verdict = world.result["verdicts"][name]
    expect = EXPECTED[name]
    if expect == "zero":
        assert verdict["score"] == 0.0, verdict
    elif expect == "full":
        assert verdict["score"] == 1.0, verdict
    assert 0.0 <= verdict["score"] <= 1.0
    assert verdict["seconds"] < LIMITS.wall_seconds + 10, verdict


@pytest.mark.parametrize("mode", ["root", "unprivileged"])
def test_the_worker_survives_and_later_jobs_are_judged_fairly(battery, mode):
    """The harness (the worker) outlived kill(ppid), kill(-1) and the rest, and eight wrong solutions run after a
    daemon tried to rewrite every job file still score 0."""
    world = _world(battery, mode)
    assert world.result["later"] == [0.0] * 8


@pytest.mark.parametrize("mode", ["root", "unprivileged"])
def test_nothing_outlives_the_jobs(battery, mode):
    """No daemon, pipe holder or fork-bomb child is left on the host after its job."""
    world = _world(battery, mode)
    assert _wait_for(lambda: not _processes_mentioning(world.marker)), _processes_mentioning(world.marker)


@pytest.mark.parametrize("mode", ["root", "unprivileged"])
def test_host_files_are_untouched(battery, mode):
    """The database the worker can write is unchanged, the host directory holds what it held, and no file of the
    attacks (600 MB of filler included) landed in the host's /tmp."""
    world = _world(battery, mode)
    assert _digest(world.db) == world.db_digest
    assert sorted(os.listdir(world.directory)) == world.listing
    assert [name for name in os.listdir("/tmp") if world.marker in name] == []
    assert world.free_drop < 100 * 2**20


def _wait_for(condition, seconds: float = 10.0) -> bool:
    """Poll ``condition`` until it holds or ``seconds`` pass (a wait, not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_killing_the_worker_ends_its_sandboxes():
    """Stop escalating to SIGKILL on a worker in the middle of a test takes the sandbox and its setsid daemon too."""
    marker = f"orphan-{uuid.uuid4().hex[:12]}"
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n"
        f"    os.execv('/usr/bin/python3', ['python3', '-c', 'import time; time.sleep(120)', '{marker}'])\n"
        "def f():\n    time.sleep(120)\n"
    )
    worker = (  # the code comes on stdin, so that only the daemon's command line names the marker
        "import sys\nfrom trainer.scoring.sandbox import Limits, run_tests\n"
        "run_tests(sys.stdin.read(), ['assert f() == 1'], Limits(wall_seconds=120, test_seconds=120, cpu_seconds=120))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", worker], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE
    )
    process.stdin.write(code.encode())
    process.stdin.close()
    try:
        assert _wait_for(lambda: _processes_mentioning(marker)), "the daemon never started"
    finally:
        process.kill()
        process.wait(timeout=10)
    assert _wait_for(lambda: not _processes_mentioning(marker)), _processes_mentioning(marker)


def test_no_connection_or_datagram_reached_the_host(battery):
    """TCP, TCP Fast Open, UDP, unix and abstract sockets from both runs reached none of the host's listeners."""
    worlds, listeners = battery
    if all(w.skip for w in worlds.values()):
        pytest.skip("no run")
    assert listeners.received == []


# --- judging outside the sandbox ------------------------------------------------------------------------------------
def test_every_builtin_test_is_judged_outside_the_sandbox():
    for problem in CODE_PROBLEMS:
        for test in problem["tests"]:
            plan(test)  # raises Unsupported for a shape the judge can't evaluate


def test_every_builtin_reference_solution_passes():
    verdicts = run_many([(p["answer"], p["tests"]) for p in CODE_PROBLEMS], LIMITS)
    assert [(v.score, v.status) for v in verdicts] == [(1.0, "ok")] * len(CODE_PROBLEMS)


def test_a_function_returning_none_fails_some_test_of_every_builtin_problem():
    jobs = []
    for p in CODE_PROBLEMS:
        name = p["answer"].split("(")[0].removeprefix("def ")
        jobs.append((f"def {name}(*args):\n    return None\n", p["tests"]))
    assert all(v.score < 1.0 for v in run_many(jobs, LIMITS))


def test_assert_shapes_are_evaluated_on_plain_data():
    code = (
        "def f(*args, **kwargs):\n    return {'args': list(args), 'kwargs': kwargs}\n"
        "def pair():\n    return (1, 2)\n"
        "def nothing():\n    return None\n"
        "def half(x):\n    return x / 2\n"
    )
    tests = [
        "assert f(1, [2, 3], k='v') == {'args': [1, [2, 3]], 'kwargs': {'k': 'v'}}",
        "assert f(1)['args'][-1] == 1 and len(f(1, 2)['args']) == 2",
        "assert not nothing() and nothing() is None",
        "assert pair() == (1, 2) and pair() != [1, 2] and sorted(pair(), reverse=True) == [2, 1]",
        "assert pair()[0:1] == (1,) and 2 in pair() and 3 not in pair()",
        "assert math.isclose(half(1), 0.5) and abs(half(3) - 1.5) < 1e-9 and half(half(8)) == 2",
        "assert f(frozenset({1}), {2: 3})['args'] == [frozenset({1}), {2: 3}]",
        "f(1)",
    ]
    verdict = run_tests(code, tests, LIMITS)
    assert (verdict.passed, verdict.total, verdict.status) == (len(tests), len(tests), "ok"), verdict.detail


def test_a_builtin_name_is_the_candidates_function_when_the_test_calls_nothing_else():
    """A task to write max() is judged on the candidate's max(), not on Python's; len() around a call stays trusted."""
    tests = ["assert max(3, 5) == 5", "assert len(pair(1)) == 2"]
    wrong = run_tests("def max(a, b):\n    return a\ndef pair(x):\n    return [x, x]\n", tests, LIMITS)
    right = run_tests("def max(a, b):\n    return b if b > a else a\ndef pair(x):\n    return [x, x]\n", tests, LIMITS)
    assert (wrong.passed, right.passed) == (1, 2), (wrong.detail, right.detail)


def test_a_failed_test_says_what_the_function_returned():
    verdict = run_tests(WRONG_TWO_SUM, TWO_SUM_TESTS[:1], LIMITS)
    assert verdict.score == 0.0 and "two_sum() returned [1, 0]" in verdict.detail


def test_tests_outside_the_protocol_count_as_failed_and_are_logged(caplog):
    tests = ["x = two_sum([3, 3], 6)\nassert x == [0, 1]", "assert two_sum([3, 3], 6).count(0) == 1", *TWO_SUM_TESTS]
    with caplog.at_level(logging.WARNING, logger="trainer.scoring.judge"):
        verdict = run_tests(TWO_SUM, tests, LIMITS)
    assert (verdict.passed, verdict.total) == (4, 6)
    assert "not judged" in verdict.detail
    assert "one assert statement or one expression" in caplog.text and "only plain function names" in caplog.text


def test_infinite_loop_is_stopped_within_the_limit():
    verdict = run_tests("while True:\n    pass", ["assert True"], LIMITS)
    assert verdict.status == "timeout" and verdict.score == 0.0


def test_syntax_error_scores_zero():
    verdict = run_tests("def f(:\n  pass", ["assert f() == 1"], LIMITS)
    assert verdict.status == "syntax_error" and verdict.score == 0.0


# --- the reward -----------------------------------------------------------------------------------------------------
def test_code_is_taken_from_a_fence_or_the_answer_tag():
    assert extract_code("text\n```python\nx = 1\n```\nmore") == "x = 1\n"
    assert extract_code("<answer>\nx = 2\n</answer>") == "x = 2"
    assert extract_code("no code here") is None


@pytest.mark.timeout(300)  # a hang guard: the endless loop is killed at its limit
def test_code_tests_reward_scores_a_group_in_parallel():
    reward = REWARDS["code_tests"]
    p = CODE_PROBLEMS[0]
    good = f"```python\n{p['answer']}\n```"
    partial = "```python\ndef two_sum(nums, target):\n    return [0, 1]\n```"
    completions = [good, partial, "no code", "```python\nwhile True: pass\n```"] * 4
    scores = reward(prompts=[None] * 16, completions=completions, tests=[p["tests"]] * 16)
    assert scores[:4] == [1.0, 0.5, 0.0, 0.0] and scores == scores[:4] * 4
    assert reward(prompts=[None], completions=[good]) == [None]  # no tests column: not applicable


def test_forged_completions_in_a_group_score_within_zero_and_one():
    """Forgeries inside a real group: plain floats in [0, 1], no exception out of the reward."""
    blank = attacks(**dict.fromkeys(CONTEXT_KEYS, "0"))
    forgeries = [a.code for name, a in blank.items() if name.startswith("forge")]
    completions = [f"```python\n{code}\n```" for code in forgeries] + [f"```python\n{TWO_SUM}\n```"]
    scores = REWARDS["code_tests"](
        prompts=[None] * len(completions), completions=completions, tests=[list(TWO_SUM_TESTS)] * len(completions)
    )
    assert scores == [0.0] * len(forgeries) + [1.0]


# --- where isolation is unavailable ---------------------------------------------------------------------------------
@pytest.fixture
def no_isolation(monkeypatch):
    """Pretend bubblewrap is missing (as on a host without the package); the probe runs afresh."""
    monkeypatch.setattr(sandbox, "_probed", None)
    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    monkeypatch.delenv(sandbox.ALLOW_UNISOLATED_ENV, raising=False)


def _code_tests_problems() -> list[str]:
    return [
        p
        for p in review.problems(RunConfig(reward_funcs=["code_tests"], dataset_name="builtin:code"))
        if "code_tests" in p
    ]


def test_validation_accepts_code_tests_where_isolation_works(monkeypatch):
    monkeypatch.setattr(sandbox, "_probed", None)
    assert sandbox.isolation_problem() is None
    assert _code_tests_problems() == []


def test_validation_refuses_code_tests_without_bubblewrap(no_isolation):
    (problem,) = _code_tests_problems()
    assert "bubblewrap is not installed" in problem and "apt-get install bubblewrap" in problem
    assert "--allow-unisolated-code" in problem


@pytest.fixture
def shared_dir():
    """A directory nobody can read (tmp_path sits under a root-only directory when the tests run as root)."""
    directory = Path(tempfile.mkdtemp(prefix="grpo-test-", dir="/tmp"))
    os.chmod(directory, 0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_validation_refuses_where_user_namespaces_are_blocked(monkeypatch, shared_dir):
    """As in a container under Docker's default seccomp profile: bwrap exists but can't create namespaces."""
    fake = shared_dir / "bwrap"  # as root the sandbox is started as nobody, who must be able to run it
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow "
        "non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "_probed", None)
    monkeypatch.setattr(sandbox, "_bwrap", lambda: str(fake))
    monkeypatch.delenv(sandbox.ALLOW_UNISOLATED_ENV, raising=False)
    (problem,) = _code_tests_problems()
    assert "No permissions to create new namespace" in problem
    assert "--security-opt seccomp=unconfined" in problem and "--allow-unisolated-code" in problem
    with pytest.raises(SandboxUnavailable):
        REWARDS["code_tests"](prompts=[None], completions=[f"```python\n{TWO_SUM}\n```"], tests=[list(TWO_SUM_TESTS)])


def test_the_opt_in_runs_unisolated_and_still_judges_outside(no_isolation, monkeypatch):
    with pytest.raises(SandboxUnavailable, match="allow-unisolated-code"):
        run_tests(TWO_SUM, list(TWO_SUM_TESTS), LIMITS)
    monkeypatch.setenv(sandbox.ALLOW_UNISOLATED_ENV, "1")
    assert _code_tests_problems() == []
    always_equal = attacks(**dict.fromkeys(CONTEXT_KEYS, "0"))["forge: object whose __eq__ is always True"].code
    verdicts = run_many([(TWO_SUM, list(TWO_SUM_TESTS)), (always_equal, list(TWO_SUM_TESTS))], LIMITS)
    assert [v.score for v in verdicts] == [1.0, 0.0]
