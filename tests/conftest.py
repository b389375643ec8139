"""Shared fixtures. Everything is offline: models are built here, data is generated.

The data directory of the whole session is a temp dir (``GRPO_STUDIO_HOME``), so the built-in model is built once
per test session into it, and no test touches ``~/.grpo-studio``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.db import reset_engine
from tests.suite import net_guard, slow_guard
from tests.suite.sigterm import pytest_sessionstart  # noqa: F401  (a SIGTERM ends the run and its processes: sigterm.py)
from tests.suite.slow_guard import (  # noqa: F401  (pytest hooks: the fast subset trains nothing, see slow_guard.py)
    pytest_fixture_post_finalizer,
    pytest_fixture_setup,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
    refuse_unmarked_slow_fixtures,
)
from tests.suite.xdist_lanes import WAITS_PREFIX, LaneScheduling

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config) -> None:
    """The suite's guards: the fast subset trains nothing (tests/suite/slow_guard.py), and tests talk to this machine
    only (tests/suite/net_guard.py)."""
    slow_guard.pytest_configure(config)
    net_guard.pytest_configure(config)


# One OpenMP thread in this process and in every worker, server and evaluation it starts (they inherit the
# environment), unless the developer chose a count: the suite runs its pytest-xdist processes on 2 cores, each often
# beside a training worker, and torch's default of a thread per core had them spin-waiting for each other. Measured
# on the worker tests (test_signals, test_multiprocess, test_diskfull; -n 2, two runs each way): 79-85 s wall and
# 77-79 s of user CPU on torch's default, 63-65 s and 52-59 s with one thread.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Offline before any test module is imported: huggingface_hub reads HF_HUB_OFFLINE once, as it is imported (its
# constants module), and test modules import it while they are collected, before any fixture runs. Set only in the
# session fixture below, this process went on asking the hub: a preview of "gsm8k" sat 23 s in huggingface_hub's
# retries (tests/security/test_trust_boundary.py, 47 s for two such names).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
# The pages tests build in a gr.Blocks of their own would ask api.gradio.app for Gradio's latest version (the
# dashboard's own Blocks has analytics off: app/web/server.py); tests talk to this machine only.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"


@pytest.fixture(scope="session", autouse=True)
def studio_home(tmp_path_factory) -> Path:
    """A fresh data dir for the session; the database is the SQLite file in it."""
    home = tmp_path_factory.mktemp("grpo-studio-home")
    os.environ["GRPO_STUDIO_HOME"] = str(home)
    os.environ.pop("DATABASE_URL", None)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    reset_engine()
    yield home
    reset_engine()


def use_database(url: str) -> None:
    """Point this process, and the workers and servers it starts, at the database ``url``."""
    os.environ["DATABASE_URL"] = url
    reset_engine()


@pytest.fixture(scope="session")
def session_database(studio_home) -> str:
    """The database of the session-wide fixtures (the shared trained run)."""
    url = f"sqlite:///{studio_home / 'session.db'}"
    use_database(url)
    return url


@pytest.fixture(scope="module")
def module_database(studio_home, request) -> str:
    """A database shared by the tests of one module (for module-scoped fixtures such as a running server)."""
    url = f"sqlite:///{studio_home / ('module-' + request.module.__name__ + '.db')}"
    use_database(url)
    return url


@pytest.fixture(autouse=True)
def database(request, tmp_path) -> str:
    """Each test gets its own database, so that nothing one test leaves behind (a queued run, say) is seen, or
    trained by a scheduler, in the next. Tests that use a shared fixture get that fixture's database instead."""
    if "trained_run" in request.fixturenames:
        url = request.getfixturevalue("session_database")
    elif "module_database" in request.fixturenames:
        url = request.getfixturevalue("module_database")
    else:
        url = f"sqlite:///{tmp_path / 'test.db'}"
    use_database(url)
    return url


@pytest.fixture
def fresh_db(tmp_path, monkeypatch):
    """A database of this test's own, for tests that count queued runs: runs other tests left queued must not take
    the scheduler's slot."""
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'fresh.db'}")
    reset_engine()
    yield
    monkeypatch.undo()
    reset_engine()


@pytest.fixture
def no_sampler_choice(monkeypatch):
    """VLLM_USE_FLASHINFER_SAMPLER unset for the test and restored afterwards (also when the code under test sets it)."""
    from trainer.loading.vllm_env import FLASHINFER_SAMPLER

    monkeypatch.setenv(FLASHINFER_SAMPLER, "unset-by-test")
    monkeypatch.delenv(FLASHINFER_SAMPLER)


@pytest.fixture(scope="session")
def trained_run(session_database, tiny_model_path):
    """One finished 6-step run of the tiny model, trained by a detached worker process and shared by every test that
    only reads it: (run id, config, digest of the base weights before training). A large learning rate, so the
    adapter visibly moves in a few steps; a checkpoint every 3 steps."""
    import hashlib

    from storage import queries
    from storage.db import get_sessionmaker
    from tests.helpers import create_run, run_row, tiny_config, wait_for
    from trainer.supervise.start import start_worker

    before = hashlib.sha256((tiny_model_path / "model.safetensors").read_bytes()).hexdigest()
    config = tiny_config(name="shared", max_steps=6, learning_rate=5e-3, save_steps=3)
    run_id = create_run(config)
    with get_sessionmaker().begin() as s:
        start_worker(s, queries.get_run(s, run_id))
    wait_for(lambda: run_row(run_id).status in ("completed", "failed", "stopped"), 600, "the shared run to end")
    return run_id, config, before


@pytest.fixture(scope="session")
def tiny_model_path(studio_home) -> Path:
    """The real built-in model (``builtin:tiny``), built once into the session's data dir."""
    from trainer.loading.tiny import tiny_model_dir

    return tiny_model_dir()


@pytest.fixture(scope="session")
def format_learner_path(tmp_path_factory) -> Path:
    """A smaller sibling of the built-in model, warmed up for only 60 steps (vs 1500): it writes the reasoning/answer
    format about half the time and its completions still vary a lot, so a reward moves within a few GRPO steps."""
    from trainer.loading.tiny import TinySpec, build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("format-learner"), TinySpec(sft_steps=60))


class PostgresCluster:
    """The throw-away cluster's controls: ``url``, and ``restart()`` for the fault tests (None ``data``: a server of
    your own, which the tests don't restart)."""

    def __init__(self, url: str, as_user: list[str] | None = None, bindir=None, data=None, options: str = "") -> None:
        self.url, self.as_user, self.bindir, self.data, self.options = url, as_user or [], bindir, data, options

    def pg_ctl(self, *args: str) -> None:
        import subprocess

        command = [*self.as_user, self.bindir / "pg_ctl", "-D", self.data, *args]
        subprocess.run(command, check=True, capture_output=True)

    def restart(self, down_seconds: float) -> None:
        """Stop the server (``-m fast``: open connections are terminated, as a restart does), wait, start it."""
        import time

        if self.data is None:
            pytest.skip("GRPO_STUDIO_TEST_POSTGRES_URL names a server of your own: not restarted by the tests")
        self.pg_ctl("-m", "fast", "-w", "stop")
        time.sleep(down_seconds)
        self.pg_ctl("-o", self.options, "-w", "-l", str(self.data / "log"), "start")


@pytest.fixture(scope="session")
def postgres_cluster():
    """A throw-away PostgreSQL server for the session: ``$GRPO_STUDIO_TEST_POSTGRES_URL`` when set (a server of your
    own), else a cluster made here with Debian's ``postgresql`` package (``initdb`` in a temp dir, trust auth, a free
    port on 127.0.0.1), stopped at the end. Skips the PostgreSQL tests when neither is available."""
    import glob
    import shutil
    import subprocess
    import tempfile

    from tests.helpers import free_port

    url = os.environ.get("GRPO_STUDIO_TEST_POSTGRES_URL")
    if url:
        yield PostgresCluster(url)
        return
    pytest.importorskip("psycopg", reason="the PostgreSQL tests need psycopg (pip install 'psycopg[binary]')")
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not binaries:
        pytest.skip("no PostgreSQL server here (apt-get install postgresql, or set GRPO_STUDIO_TEST_POSTGRES_URL)")
    bindir = Path(binaries[-1]).parent
    # initdb refuses to run as root: the package's postgres user owns the server's files, in a directory of its
    # own under /tmp (pytest's temp dirs are private to root)
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    data = Path(tempfile.mkdtemp(prefix="grpo-studio-pg-"))
    if as_user:
        shutil.chown(data, "postgres")
    subprocess.run(
        [*as_user, bindir / "initdb", "-D", data, "-A", "trust", "-U", "postgres"], check=True, capture_output=True
    )
    port = free_port()
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    cluster = PostgresCluster(
        f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", as_user, bindir, data, options
    )
    cluster.pg_ctl("-o", options, "-w", "-l", str(data / "log"), "start")

    def stop() -> None:
        subprocess.run([*as_user, bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)

    # stopped when this pytest process exits, after its last test: stopped in the fixture's teardown, the stop ran
    # inside the last test of an xdist worker's share, and the slow-test guard charged it to that (unmarked) test in
    # two clean-clone runs, past both of tests/suite/slow_guard.py's teardown rules
    import atexit

    atexit.register(stop)
    yield cluster


@pytest.fixture(scope="session")
def postgres_server(postgres_cluster) -> str:
    """The URL of the session's PostgreSQL server (see postgres_cluster)."""
    return postgres_cluster.url


@pytest.fixture
def postgres_url(postgres_server, request):
    """A fresh, empty database on the session's PostgreSQL server for one test (dropped afterwards)."""
    import re

    from sqlalchemy import create_engine, text

    name = "t_" + re.sub(r"\W", "_", request.node.name.lower())[:50] + f"_{os.getpid()}"
    # pre-ping: a fault test may have restarted the server under the pooled connection
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = postgres_server.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """A real single-node Slurm on this machine, started before the tests by ``.ci/run`` (scripts/slurm-local.sh:
    Debian's slurm-wlm and munge, localhost, CPU only); returns the node's name. Tests never install or start it
    themselves (that changes the machine): without one answering they skip, saying how to get one."""
    import subprocess

    def node() -> str | None:
        try:
            out = subprocess.run(["sinfo", "-h", "-o", "%T %N"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        up = [line.split()[1] for line in out.splitlines() if line.split()[0] in ("idle", "mixed", "allocated")]
        return up[0] if up else None

    name = node()
    if name is None:
        pytest.skip("no Slurm node answers here: as root, scripts/slurm-local.sh starts one (.ci/run does)")
    return name


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its hook suffixes node ids with them)
def pytest_collection_modifyitems(config, items):
    """Modules without slow tests first (keeping each module's tests together and in order): the suite shows
    progress, and a broken fast test, within its first minute instead of after the browser and training tests.

    Under pytest-xdist (``-n 3 --dist loadgroup``, as .ci/run runs it) each module is one group, run by one worker
    from start to end, so a module's fixtures (a server, a browser, a shared run) are set up once, as in a serial
    run; a module may split itself further with ``pytest.mark.xdist_group`` (the Slurm tests do). The groups of tests
    marked ``waits`` are named ``waits:...``, and run in the waiting lane (tests/suite/xdist_lanes.py)."""
    refuse_unmarked_slow_fixtures(items)
    slow_modules = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
    # sort is stable: order within kept. Among the slow, a module that says START_EARLY (the real model's group, the
    # suite's longest: two modules, three trainings and two vLLM engines) goes first, so that it is not what the
    # last minutes wait for.
    items.sort(key=lambda item: (item.module.__name__ in slow_modules, not getattr(item.module, "START_EARLY", False)))
    for item in items:
        group = item.get_closest_marker("xdist_group")
        name = (group.args[0] if group.args else group.kwargs.get("name", "default")) if group else None
        wanted = name or item.module.__name__
        if item.get_closest_marker("waits") and not wanted.startswith(WAITS_PREFIX):
            wanted = WAITS_PREFIX + wanted  # the waiting lane's (tests/suite/xdist_lanes.py)
        if wanted != name:  # the test's own group marks replaced: pytest-xdist joins every one it finds into the name
            item.own_markers[:] = [mark for mark in item.own_markers if mark.name != "xdist_group"]
            item.add_marker(pytest.mark.xdist_group(wanted))


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: unknown where it is not installed
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with a waiting lane: with -n 3 or more, the tests marked ``waits`` run in a process of
    their own beside the others (tests/suite/xdist_lanes.py)."""
    if config.getvalue("dist") == "loadgroup":
        return LaneScheduling(config, log)
    return None
