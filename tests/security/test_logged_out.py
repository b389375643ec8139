"""With ``serve --auth``, a visitor who is not logged in reaches the login page and nothing else (issue 58.1): every
route the dashboard's server has is asked for, as Gradio declares it, by a client without a session cookie. The
server is the real dashboard (build_app) started by the same launch() as ``grpo-studio serve``, on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse

import pytest

from app.web import server
from app.web.guard import EMPTY_API, STARTUP_ROUTE, _public
from app.web.pages.data_files import MAX_UPLOAD_BYTES
from tests.helpers import free_port

NOT_LOGGED_IN = {"detail": {"error": "Not authenticated", "auth_message": None}}


@pytest.fixture(scope="module")
def dashboard(module_database):
    """The dashboard behind ``--auth ann:secret``: (its Gradio App, its port)."""
    demo = server.build_app()
    port = free_port()
    server.launch(demo, "127.0.0.1", port, ("ann", "secret"), MAX_UPLOAD_BYTES, block=False)
    yield demo.server_app, port
    demo.close()


def _ask(port: int, method: str, path: str, cookie: str = "", body: bytes | None = None) -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Cookie": cookie} if cookie else {}
    if body is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    answer = response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    connection.close()
    return answer


def _example(template: str) -> str:
    """A path the route with this template answers: each {parameter} filled in (``file=`` and ``proxy=`` routes
    with a file that exists)."""
    path = re.sub(r"\{[^}:]+:path\}", "etc/hostname", template)
    return re.sub(r"\{[^}]+\}", "x", path)


def _routes(routes) -> list:
    """Every route, those of included routers too (FastAPI 0.165 keeps an included router as one entry that holds
    its routes, their paths prefixed already)."""
    found = []
    for route in routes:
        included = getattr(route, "original_router", None)
        found += _routes(included.routes) if included is not None else [route]
    return found


def _every_route(app) -> list[tuple[str, str, str]]:
    """(template, method, path) for every route and method of the server (Starlette gives each GET route HEAD too)."""
    asked = []
    for route in _routes(app.routes):
        template = route.path
        methods = set(getattr(route, "methods", None) or {"GET"})
        asked += [(template, method, _example(template)) for method in sorted(methods)]
    return asked


def test_every_route_but_the_login_page_asks_for_the_login(dashboard):
    app, port = dashboard
    asked = _every_route(app)
    # the routes that described or answered before (issue 58.1) are among those asked, with the login's own
    for template in ("/gradio_api/runs", "/openapi.json", "/gradio_api/app_id", "/gradio_api/heartbeat/{session_hash}"):
        assert template in {t for t, _, _ in asked}
    assert len(asked) > 80  # Gradio 6.31 declares about a hundred
    answered = {}
    for _, method, path in asked:
        if _public(method, path) or path == "/":
            continue
        status, _, body = _ask(port, method, path, body=b"" if method in ("POST", "PUT", "DELETE", "PATCH") else None)
        answered[(method, path)] = (status, json.loads(body) if body else None)
    # Gradio's own 401 (a HEAD's answer has no body)
    refused = {key: v for key, v in answered.items() if v != (401, None if key[0] == "HEAD" else NOT_LOGGED_IN)}
    assert refused == {}, refused
    assert STARTUP_ROUTE in {t for t, _, _ in asked}  # launch() has asked it: now it asks for the login too
    # a path that names no route, and one that would be redirected to a slash-less route, ask for it as well
    assert _ask(port, "GET", "/nothing-here")[0] == 401 and _ask(port, "GET", "/gradio_api/runs/")[0] == 401
    # the way the login page reaches its files does not reach anything else
    assert _ask(port, "GET", "/assets/../gradio_api/runs")[2].find(b"named_endpoints") == -1
    assert _ask(port, "GET", "/static/%2e%2e/%2e%2e/gradio_api/info")[0] in (401, 403, 404)


def test_the_login_page_its_files_and_the_login_are_public(dashboard):
    _, port = dashboard
    status, headers, page = _ask(port, "GET", "/")
    assert status == 200 and f"window.gradio_api_info = {EMPTY_API};".encode() in page
    assert b'"auth_required":true' in page.replace(b" ", b"")
    head_status, head_headers, head_body = _ask(port, "HEAD", "/")
    # HEAD says the length GET sends (it said 0 while GET sent 5,972 bytes: issue 58.7)
    assert (head_status, int(head_headers["content-length"]), head_body) == (200, len(page), b"")
    assert int(headers["content-length"]) == len(page)
    script = re.search(rb'src="\./(assets/index-[^"]+\.js)"', page) or re.search(rb'src="(/?assets/[^"]+\.js)"', page)
    assert script is not None
    assert _ask(port, "GET", "/" + script.group(1).decode().lstrip("/"))[0] == 200
    assert _ask(port, "GET", "/theme.css")[0] == 200
    wrong = urllib.parse.urlencode({"username": "ann", "password": "nope"}).encode()
    assert _ask(port, "POST", "/login", body=wrong)[0] == 400


def test_after_the_login_the_routes_answer_as_gradio_has_them(dashboard):
    _, port = dashboard
    right = urllib.parse.urlencode({"username": "ann", "password": "secret"}).encode()
    status, headers, _ = _ask(port, "POST", "/login", body=right)
    assert status == 200
    cookie = "; ".join(part.split(";")[0] for part in headers["set-cookie"].split(", ") if "access-token" in part)
    status, _, page = _ask(port, "GET", "/gradio_api/runs", cookie)
    assert status == 200 and b'"/launch"' in page  # the API's page, for someone logged in
    status, _, body = _ask(port, "GET", "/gradio_api/app_id", cookie)
    assert status == 200 and "app_id" in json.loads(body)
    status, _, page = _ask(port, "GET", "/", cookie)
    assert status == 200 and f"window.gradio_api_info = {EMPTY_API};".encode() not in page
    _, head_headers, _ = _ask(port, "HEAD", "/", cookie)
    assert int(head_headers["content-length"]) == len(page)
