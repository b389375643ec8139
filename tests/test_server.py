"""`grpo-studio serve` security basics: auth protects the UI's API, a public address without auth warns loudly."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar

import pytest

from .conftest import ROOT
from .helpers import free_port, wait_for

pytestmark = pytest.mark.slow


def _serve(*args: str, env: dict | None = None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, port


def _status(url: str, opener=None) -> int:
    try:
        return (opener or urllib.request.build_opener()).open(url, timeout=5).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_auth_protects_the_api_until_login():
    process, port = _serve("--auth", "ann:secret")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _status(base + "/") == 200, 60, "the dashboard")
        assert _status(base + "/config") == 401 and _status(base + "/gradio_api/info") == 401
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        wrong = urllib.parse.urlencode({"username": "ann", "password": "nope"}).encode()
        assert _status_post(opener, base + "/login", wrong) == 400
        right = urllib.parse.urlencode({"username": "ann", "password": "secret"}).encode()
        assert _status_post(opener, base + "/login", right) == 200
        assert _status(base + "/config", opener) == 200
    finally:
        process.terminate()
        process.wait(timeout=30)


def _status_post(opener, url: str, data: bytes) -> int:
    try:
        return opener.open(urllib.request.Request(url, data=data), timeout=5).status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_public_address_without_auth_warns_loudly():
    process, port = _serve("--host", "0.0.0.0")
    try:
        wait_for(lambda: _status(f"http://127.0.0.1:{port}/") == 200, 60, "the dashboard")
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert "WARNING: grpo-studio listens on 0.0.0.0 without authentication" in output


def test_auth_from_the_environment_and_a_malformed_value():
    process, port = _serve(env={"GRPO_STUDIO_AUTH": "ann:secret"})
    try:
        wait_for(lambda: _status(f"http://127.0.0.1:{port}/") == 200, 60, "the dashboard")
        assert _status(f"http://127.0.0.1:{port}/config") == 401
    finally:
        process.terminate()
        process.wait(timeout=30)
    bad = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--auth", "nopassword"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "user:password" in bad.stderr
