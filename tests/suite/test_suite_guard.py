"""The suite's own promise: ``pytest -m "not slow"`` trains nothing and starts no worker, browser, Slurm or
PostgreSQL (tests/suite/slow_guard.py). Each case runs a one-test suite in a pytest of its own with the guard loaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _run_suite(tmp_path, body: str, *options: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_case.py").write_text(textwrap.dedent(body))
    plugins = [
        "-p",
        "tests.suite.slow_guard",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",
        "-p",
        "no:benchmark",
    ]
    command = [sys.executable, "-m", "pytest", "-q", *plugins, *options]
    return subprocess.run(
        [*command, str(tmp_path / "test_case.py")],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


# the command only has to look like a worker's: nothing is trained
STARTS_A_WORKER = """
    import subprocess, sys
    {mark}
    def test_case():
        subprocess.run([sys.executable, "-c", "pass", "-m", "trainer.job.worker", "1"], check=True)
"""


def test_an_unmarked_test_that_starts_a_worker_fails_naming_what_it_did(tmp_path):
    done = _run_suite(tmp_path, STARTS_A_WORKER.format(mark=""))
    assert done.returncode == 1, done.stdout
    assert "test_case is not marked @pytest.mark.slow but it started a training worker" in done.stdout
    assert "1 passed, 1 error" in done.stdout  # the test's own assertions passed; the guard's check did not


WARM_STARTS = """
    import sys
    def test_case():
        # what trainer.supervise.warm_start says when its warm parent forks a worker: no process starts here
        sys.audit("grpo_studio.warm_start", 4, [sys.executable, "-m", "{origin}", "--pipes", "5,8", "1"])
"""


@pytest.mark.parametrize("origin, flagged", [("trainer.job.warm_start", True), ("tests.a_stand_in", False)])
def test_a_worker_forked_by_a_warm_parent_counts_as_the_process_the_parent_came_from(tmp_path, origin, flagged):
    done = _run_suite(tmp_path, WARM_STARTS.replace("{origin}", origin))
    assert (done.returncode == 1) is flagged, done.stdout
    said = (
        "test_case is not marked @pytest.mark.slow but it started a training worker: run 4, forked by the warm parent"
    )
    assert (said in done.stdout) is flagged, done.stdout


def test_the_same_test_marked_slow_passes(tmp_path):
    done = _run_suite(tmp_path, STARTS_A_WORKER.format(mark="import pytest\n    @pytest.mark.slow"))
    assert done.returncode == 0, done.stdout
    assert "1 passed" in done.stdout and "error" not in done.stdout


def test_a_session_fixture_torn_down_after_an_unmarked_test_is_not_charged_to_it(tmp_path):
    """A slow test set up a session-wide server; the suite's last test is an unmarked one, and the server's stop
    runs in its teardown (as PostgreSQL's did at the end of an xdist worker's share): the unmarked test passes."""
    body = """
        import subprocess, sys
        import pytest
        @pytest.fixture(scope="session")
        def server():
            yield
            subprocess.run([sys.executable, "-c", "pass", "-m", "trainer.job.worker", "stop"], check=True)
        @pytest.mark.slow
        def test_a(server):
            pass
        def test_b():
            pass
    """
    done = _run_suite(tmp_path, body)
    assert done.returncode == 0 and "2 passed" in done.stdout and "error" not in done.stdout, done.stdout


def test_a_module_and_a_session_fixture_torn_down_in_a_chain_after_an_unmarked_test_are_not_charged_to_it(tmp_path):
    """As the suite's PostgreSQL is held: a session cluster under a session server under a function URL, and a
    module-scoped server, all set up by slow tests; the module's last test is unmarked, so every stop runs in its
    teardown: it passes."""
    body = """
        import subprocess, sys
        import pytest
        STOP = [sys.executable, "-c", "pass", "-m", "trainer.job.worker", "stop"]
        @pytest.fixture(scope="session")
        def cluster():
            try:
                yield
            finally:
                subprocess.run(STOP, check=True)
        @pytest.fixture(scope="session")
        def server(cluster):
            return 1
        @pytest.fixture
        def url(server):
            yield 2
        @pytest.fixture(scope="module")
        def dashboard():
            yield
            subprocess.run(STOP, check=True)
        @pytest.mark.slow
        def test_a(url, dashboard):
            pass
        def test_b():
            pass
    """
    done = _run_suite(tmp_path, body)
    assert done.returncode == 0 and "2 passed" in done.stdout and "error" not in done.stdout, done.stdout


def test_a_function_fixtures_teardown_is_still_the_tests_own(tmp_path):
    body = """
        import subprocess, sys
        import pytest
        @pytest.fixture
        def worker():
            yield
            subprocess.run([sys.executable, "-c", "pass", "-m", "trainer.job.worker", "1"], check=True)
        def test_case(worker):
            pass
    """
    done = _run_suite(tmp_path, body)
    assert done.returncode == 1 and "test_case is not marked @pytest.mark.slow but it started a training worker" in (
        done.stdout
    ), done.stdout


def _installed(pattern: str) -> str | None:
    import glob

    found = sorted(glob.glob(pattern))
    return found[-1] if found else None


@pytest.mark.parametrize(
    ("program", "what"),
    [
        (_installed("/usr/bin/chromium"), "started a browser"),
        (_installed("/usr/lib/postgresql/*/bin/pg_ctl"), "started PostgreSQL"),
        (_installed("/usr/bin/sinfo"), "used Slurm"),
    ],
)
def test_a_browser_postgres_or_slurm_in_an_unmarked_test_fails(tmp_path, program, what):
    if program is None:
        pytest.skip(f"the program behind '{what}' is not installed here")
    body = f"""
        import subprocess
        def test_case():
            subprocess.run([{program!r}, "--version"], capture_output=True)
    """
    done = _run_suite(tmp_path, body)
    assert done.returncode == 1 and f"but it {what}" in done.stdout, done.stdout


def test_a_fake_of_slurms_commands_on_path_is_no_slurm(tmp_path):
    """The Slurm executor's unit tests put fakes named squeue/sbatch on PATH: those are no Slurm."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "squeue").write_text("#!/bin/sh\necho 1\n")
    (fake / "squeue").chmod(0o755)
    body = f"""
        import os, subprocess
        def test_case():
            env = {{**os.environ, "PATH": {str(fake)!r} + ":/usr/bin:/bin"}}
            assert subprocess.run(["squeue"], env=env, capture_output=True, text=True).stdout == "1\\n"
    """
    done = _run_suite(tmp_path, body)
    assert done.returncode == 0, done.stdout


def test_training_in_the_tests_own_process_fails_an_unmarked_test(tmp_path):
    # a stand-in for transformers.trainer (the real one costs seconds to import): the guard wraps Trainer.train
    # wherever that module is, and the test calls it as GRPOTrainer's train() would
    body = """
        import sys, types
        module = types.ModuleType("transformers.trainer")
        class Trainer:
            def train(self):
                return "trained"
        module.Trainer = Trainer
        sys.modules["transformers.trainer"] = module
        def test_case():
            import os  # any event after the import lets the guard see the module
            os.listdir(".")
            assert sys.modules["transformers.trainer"].Trainer().train() == "trained"
    """
    done = _run_suite(tmp_path, body)
    assert done.returncode == 1 and "but it trained a model in the test's process (Trainer.train)" in done.stdout


def test_an_unmarked_test_asking_for_a_training_fixture_is_refused_at_collection(tmp_path):
    body = """
        import pytest
        @pytest.fixture
        def trained_run():
            return 1
        def test_case(trained_run):
            assert trained_run == 1
    """
    (tmp_path / "conftest.py").write_text(
        "from tests.suite.slow_guard import refuse_unmarked_slow_fixtures\n"
        "def pytest_collection_modifyitems(items):\n    refuse_unmarked_slow_fixtures(items)\n"
    )
    done = _run_suite(tmp_path, body)
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error: nothing ran
    assert "test_case.py::test_case uses trained_run" in done.stderr


def test_sigterm_ends_the_run_at_once_and_takes_the_tests_processes_with_it(tmp_path):
    """A test that ignores SIGTERM (as a foreground run's stop handler does) and leaves a detached child: a SIGTERM to
    pytest still ends it within seconds, with 143, and the child is gone too."""
    import signal
    import time

    pid_file = tmp_path / "child.pid"
    (tmp_path / "test_case.py").write_text(
        textwrap.dedent(f"""
        import signal, subprocess, time
        def test_case():
            signal.signal(signal.SIGTERM, lambda *_: None)  # "stop at the next step"
            child = subprocess.Popen(["sleep", "300"], start_new_session=True)
            open({str(pid_file)!r}, "w").write(str(child.pid))
            time.sleep(300)
        """)
    )
    plugins = ["-p", "tests.suite.sigterm", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark"]
    runner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", *plugins, str(tmp_path / "test_case.py")],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and runner.poll() is None, "the inner test never started its child"
        time.sleep(0.1)
    child = int(pid_file.read_text())
    time.sleep(0.5)  # the test is in its sleep, with its own SIGTERM handler installed
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=10) == 143
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_ci_runs_the_test_command_the_readme_gives():
    """.ci/run's last command is the README's whole-suite command (python3 for python: a bare Debian has no python)."""
    readme = (ROOT / "README.md").read_text()
    command = next(
        line for line in readme.splitlines() if line.startswith('pip install -e ".[test]" && python -m pytest')
    )
    last = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert last == command.replace("pip install", "python3 -m pip install --quiet").replace("python -m", "python3 -m")


def test_a_browser_tests_dashboard_is_stopped_when_its_generator_is_closed_by_hand(monkeypatch):
    """tests/insight/test_learning_views.py wraps start_server in a fixture of its own and closes it by hand; before the
    try/finally, close() skipped the stop and the dashboard outlived the suite (found polling its database an hour
    after the clean-clone run that started it ended), taking CPU from every test after it."""
    from tests.browser import harness as browser

    started = []
    real_popen = subprocess.Popen

    def popen(command, **kwargs):  # a stand-in that lives as long as a dashboard would
        started.append(real_popen(["sleep", "60"]))
        return started[-1]

    monkeypatch.setattr(browser.subprocess, "Popen", popen)
    monkeypatch.setattr(browser, "wait_for", lambda *args, **kwargs: True)
    server = browser.start_server("closed-by-hand.log")
    url, process = next(server)
    assert process is started[0] and process.poll() is None and url.startswith("http://127.0.0.1:")
    server.close()
    assert process.poll() is not None  # stopped and waited for


# --- tests talk to this machine only (tests/suite/net_guard.py) ---------------------------------------------------------
# What the socket module tells the audit hook before it looks a name up or connects: raised here by hand, so that no
# request leaves the machine even where the guard is broken.
ASKS_FOR = """
    import socket, sys
    def test_case():
        server = socket.create_server(("127.0.0.1", 0))  # a real connection to a listener of this test's own
        socket.create_connection(server.getsockname(), timeout=5).close()
        sys.audit("socket.getaddrinfo", socket.gethostname(), 80, 0, 0, 0)
        sys.audit("socket.connect", None, "/run/a-unix-socket")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:  # sends nothing: how a test learns its address
            udp.connect(("10.255.255.255", 1))
        listening = socket.socket(socket.AF_UNIX)  # a unix socket by a relative path
        listening.bind("a.sock")
        listening.listen()
        with socket.socket(socket.AF_UNIX) as unix:
            unix.connect("a.sock")
        sys.audit("socket.getaddrinfo", "LOCALHOST.", 80, 0, 0, 0)
        sys.audit("socket.connect", None, ("::ffff:127.0.0.1", 80, 0, 0))
        {outside}
"""


@pytest.mark.parametrize(
    "outside, said",
    [
        ('sys.audit("socket.getaddrinfo", "api.gradio.app", 443, 0, 0, 0)', "getaddrinfo api.gradio.app"),
        ('sys.audit("socket.gethostbyname", "huggingface.co")', "gethostbyname huggingface.co"),
        ('sys.audit("socket.connect", None, ("1.1.1.1", 53))', "connect 1.1.1.1"),
        ('sys.audit("socket.connect", None, ("2606:4700:4700::1111", 53, 0, 0))', "connect 2606:4700:4700::1111"),
        (
            'sys.audit("socket.sendto", None, ("198.51.100.20", 53))',
            "sendto 198.51.100.20",
        ),  # another host (TEST-NET-2)
    ],
)
def test_a_test_that_asks_for_another_host_fails_naming_it(tmp_path, outside, said):
    done = _run_suite(tmp_path, ASKS_FOR.format(outside=outside), "-p", "tests.suite.net_guard")
    assert done.returncode == 1, done.stdout
    assert f"test_case asked for a host other than this machine: {said}." in done.stdout, done.stdout


def test_a_test_that_talks_to_this_machine_only_passes(tmp_path):
    done = _run_suite(tmp_path, ASKS_FOR.format(outside="pass"), "-p", "tests.suite.net_guard")
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout
