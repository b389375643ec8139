"""``grpo-studio serve`` on a slow machine (issue 58.8): the dashboard stays up when its own server is slow to answer
Gradio's look at it, and its refusals come before Gradio is imported (an import that took minutes at load 23)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request

import gradio as gr
import pytest
from starlette.middleware import Middleware

from app.web import server
from tests.conftest import ROOT
from tests.helpers import free_port


def test_the_dashboard_stays_up_when_its_own_head_is_answered_slowly(monkeypatch):
    """Every HEAD is held until the test lets it go, after launch() has returned: Gradio's own look at ``/`` (a HEAD
    with a 3 s timeout) would time out and launch() raise "set share=True", as on the loaded machine."""
    released, heads = threading.Event(), []

    class SlowHead:
        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if scope["type"] == "http" and scope["method"] == "HEAD":
                heads.append(scope["path"])
                while not released.is_set():
                    await asyncio.sleep(0.05)
            await self.app(scope, receive, send)

    real = server.middleware
    monkeypatch.setattr(server, "middleware", lambda limit: [Middleware(SlowHead), *real(limit)])
    with gr.Blocks(analytics_enabled=False) as demo:
        gr.Markdown("up")
    port = free_port()
    try:
        server.launch(demo, "127.0.0.1", port, None, block=False)
        status = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).status
    finally:
        released.set()
        demo.close()
    assert status == 200 and heads == []  # up, and started without waiting on a look at itself


class Refusals:
    """``grpo-studio serve`` run with a ``gradio`` package in front of the real one that records its import and
    fails it: a refusal said before the import leaves no record."""

    def __init__(self, tmp_path):
        fake = tmp_path / "fake" / "gradio"
        fake.mkdir(parents=True)
        self.marker = tmp_path / "gradio-imported"
        (fake / "__init__.py").write_text(
            f"open({str(self.marker)!r}, 'w').close()\nraise ImportError('the test stops serve here')\n"
        )
        self.home = tmp_path / "home"
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "GRPO_STUDIO_AUTH")}
        self.env = env | {"GRPO_STUDIO_HOME": str(self.home), "PYTHONPATH": f"{fake.parent}{os.pathsep}{ROOT}"}

    def serve(self, *args: str) -> subprocess.CompletedProcess:
        self.marker.unlink(missing_ok=True)
        command = [sys.executable, "-m", "app.cli", "serve", *args]
        return subprocess.run(command, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # starts `grpo-studio serve` (to be refused) four times
def test_refusals_come_before_gradio_is_imported(tmp_path):
    refusals = Refusals(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        taken = refusals.serve("--port", str(port))
    assert taken.returncode == 2 and not refusals.marker.exists()
    assert taken.stderr.startswith(f"grpo-studio: port {port} on 127.0.0.1 is taken by another program: try --port ")

    malformed = refusals.serve("--port", str(free_port()), "--auth", "nopassword")
    assert malformed.returncode == 2 and not refusals.marker.exists()
    assert malformed.stderr == "grpo-studio: --auth: auth must look like user:password\n"

    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) as first:
        try:
            refusals.home.mkdir(exist_ok=True)
            (refusals.home / "dashboard.lock").write_text(json.dumps({"pid": first.pid, "host": "::", "port": 7001}))
            second = refusals.serve("--port", str(free_port()))
        finally:
            first.kill()
    assert second.returncode == 2 and not refusals.marker.exists()
    assert second.stderr.startswith(f"grpo-studio: another dashboard (pid {first.pid}, http://127.0.0.1:7001/)")

    # the stand-in is the gradio serve imports: with nothing to refuse, serve reaches it
    (refusals.home / "dashboard.lock").unlink()
    started = refusals.serve("--port", str(free_port()))
    assert refusals.marker.exists() and "the test stops serve here" in started.stderr
