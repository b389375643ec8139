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

from tests.conftest import ROOT
from tests.helpers import free_port, wait_for

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


def _read(opener, url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes, dict]:
    try:
        response = opener.open(urllib.request.Request(url, data=data, headers=headers or {}), timeout=30)
        return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def _declared_post(port: int, path: str, length: int, cookie: str) -> bytes:
    """The server's answer to a POST that declares a ``length``-byte body and sends none of it."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\nContent-Length: {length}\r\n"
        sock.sendall((head + "Content-Type: application/json\r\n\r\n").encode())
        return sock.recv(4096)


def _chunked_post(port: int, path: str, body: bytes, cookie: str) -> bytes:
    """The server's answer to ``body`` sent in chunks, without a declared length."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\nTransfer-Encoding: chunked\r\n"
        kind = "multipart/form-data; boundary=grpo-studio-test-boundary"
        sock.sendall((head + f"Content-Type: {kind}\r\n\r\n").encode())
        try:
            for at in range(0, len(body), 65536):
                chunk = body[at : at + 65536]
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server answered and closed before the last chunk: read what it said
            pass
        return sock.recv(4096)


def _multipart(*files: tuple[str, bytes]) -> tuple[bytes, dict]:
    boundary = "grpo-studio-test-boundary"
    body = b"".join(
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + content
        + b"\r\n"
        for name, content in files
    )
    return body + f"--{boundary}--\r\n".encode(), {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def test_logins_are_throttled_the_login_page_hides_the_api_and_uploads_are_capped(tmp_path):
    """Issue 22 items 7 and 8, against the real server: a 1.5 MB upload over --max-upload-size 1MB is refused while
    it arrives and not kept, and so are three files under the cap each in one request and a 10 MB body elsewhere; after 5 wrong passwords the client's logins get 429, the right one included; the login page
    carries no API description, the page after login does."""
    cache = tmp_path / "gradio-cache"
    process, port = _serve("--auth", "ann:secret", "--max-upload-size", "1MB", env={"GRADIO_TEMP_DIR": str(cache)})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _status(base + "/") == 200, 60, "the dashboard")
        anonymous = urllib.request.build_opener()
        status, page, _ = _read(anonymous, base + "/")
        assert status == 200 and b'window.gradio_api_info = {"named_endpoints": {}, "unnamed_endpoints": {}};' in page
        jar = CookieJar()
        ann = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        right = urllib.parse.urlencode({"username": "ann", "password": "secret"}).encode()
        assert _read(ann, base + "/login", right)[0] == 200
        status, page, _ = _read(ann, base + "/")
        empty = b'window.gradio_api_info = {"named_endpoints": {}, "unnamed_endpoints": {}};'
        assert status == 200 and b"window.gradio_api_info = " in page and empty not in page  # the API, after login

        body, headers = _multipart(("big.jsonl", b"x" * 1_500_000))  # one file over the cap: Gradio's own check
        status, _, _ = _read(ann, base + "/gradio_api/upload", body, headers)
        assert status == 413
        kept = [p for p in cache.rglob("*") if p.is_file() and p.stat().st_size >= 1_000_000]
        assert kept == []
        small, headers = _multipart(("small.jsonl", b'{"question": "q", "answer": "1"}\n'))
        assert _read(ann, base + "/gradio_api/upload", small, headers)[0] == 200
        # three files under the cap each, 2.7 MB in one request: the request is what is bounded
        three, _ = _multipart(*[(f"part{i}.jsonl", b"x" * 900_000) for i in range(3)])
        cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
        assert _declared_post(port, "/gradio_api/upload", len(three), cookie).startswith(b"HTTP/1.1 413")
        assert _chunked_post(port, "/gradio_api/upload", three, cookie).startswith(b"HTTP/1.1 413")  # no length given
        # any other route: a 10 MB body is refused from its declared length, before a byte of it is sent
        assert _declared_post(port, "/gradio_api/call/run_rows", 10_000_000, cookie).startswith(b"HTTP/1.1 413")

        wrong = urllib.parse.urlencode({"username": "ann", "password": "nope"}).encode()
        # each guess naming another address through X-Forwarded-For: the address is the connection's all the same
        codes = [_read(anonymous, base + "/login", wrong, {"X-Forwarded-For": f"10.0.0.{i}"})[0] for i in range(6)]
        assert codes == [400] * 5 + [429]
        status, detail, response_headers = _read(anonymous, base + "/login", right)
        assert status == 429 and b"Too many failed logins" in detail and int(response_headers["retry-after"]) > 0
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert output.count("failed logins from 127.0.0.1") == 1  # logged once per lock-out
