"""``grpo-studio serve`` refuses in one sentence, before saying where to open it: a port another program has (naming
a free one), and a second dashboard on the same database (naming the first one's pid and address), whose scheduler
would start runs beyond the first one's limit. Issue 37, items 4 and 5."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request

import pytest

from app.serve_checks import ServeRefused, claim, lock_path, port_problem, release
from tests.conftest import ROOT
from tests.helpers import free_port, wait_for


def _listening() -> socket.socket:
    """A socket another program holds: bound and listening on a free port."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


def _env(home) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "GRPO_STUDIO_AUTH")}
    return env | {"GRPO_STUDIO_HOME": str(home), "PYTHONPATH": str(ROOT)}


def _serve(port: int, home, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def test_a_taken_port_is_named_with_a_free_one():
    with _listening() as holder:
        port = holder.getsockname()[1]
        problem = port_problem("127.0.0.1", port)
        assert problem is not None and problem.startswith(f"port {port} on 127.0.0.1 is taken by another program: ")
        suggested = int(problem.split("--port ")[1].split()[0])
        assert suggested != port and port_problem("127.0.0.1", suggested) is None
    assert port_problem("127.0.0.1", port) is None  # free again once its holder closed it


def test_a_second_claim_names_the_first_and_a_stale_lock_is_taken_over(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_STUDIO_HOME", str(tmp_path))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid is now free: a dashboard killed with -9 leaves such a lock
    lock_path().write_text(json.dumps({"pid": gone.pid, "host": "127.0.0.1", "port": 7001}))
    path = claim("127.0.0.1", 7002)
    assert json.loads(path.read_text()) == {"pid": os.getpid(), "host": "127.0.0.1", "port": 7002}
    release(path)
    assert not path.exists()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            lock_path().write_text(json.dumps({"pid": other.pid, "host": "0.0.0.0", "port": 7003}))
            with pytest.raises(ServeRefused) as refused:
                claim("127.0.0.1", 7004)
            assert str(refused.value).startswith(
                f"another dashboard (pid {other.pid}, http://127.0.0.1:7003/) already serves {tmp_path}: "
            )
            release(lock_path())  # not ours: left alone
            assert json.loads(lock_path().read_text())["pid"] == other.pid
        finally:
            other.kill()


def test_dashboards_on_different_databases_have_different_locks(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_STUDIO_HOME", str(tmp_path))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'a.db'}")
    first = lock_path()
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'b.db'}")
    assert lock_path() != first and lock_path().parent == first.parent == tmp_path


@pytest.mark.slow
def test_serve_on_a_taken_port_says_so_in_one_sentence_and_exits_2(tmp_path):
    with _listening() as holder:
        port = holder.getsockname()[1]
        process = _serve(port, tmp_path)
        out, err = process.communicate(timeout=120)
    assert process.returncode == 2
    assert out == ""  # nothing printed as if it started
    assert err.count("\n") == 1 and err.startswith(f"grpo-studio: port {port} on 127.0.0.1 is taken by another program")
    assert "GRADIO_SERVER_PORT" not in err and "Traceback" not in err


@pytest.mark.slow
def test_a_second_dashboard_on_the_same_data_dir_is_refused_naming_the_first(tmp_path):
    port = free_port()
    first = _serve(port, tmp_path, start_new_session=True)
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/"), 120, "the first dashboard")
        second = _serve(free_port(), tmp_path)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 2 and out == ""
        assert err == (
            f"grpo-studio: another dashboard (pid {first.pid}, http://127.0.0.1:{port}/) already serves {tmp_path}: "
            "open that one, or stop it first (two would each start runs up to their own limit)\n"
        )
        assert _answers(f"http://127.0.0.1:{port}/")  # the first one is untouched
    finally:
        first.terminate()
        first.communicate(timeout=30)
