"""What stands in front of Gradio's own routes: request bodies bounded, failed logins slowed down, and the login page
kept to a login page.

Gradio 6.31 checks an upload's size per file (``max_file_size``), not per request, and reads any other request's body
whole: a 100 MB JSON body to an API route was accepted, and one upload of eight files under the cap each was too.
:class:`BodyLimit` refuses a body over its limit (413) from its Content-Length, or as its bytes arrive when it has none:
uploads up to ``serve --max-upload-size`` plus room for the form's framing, every other request up to
``MAX_BODY_BYTES`` (the largest real one, a config with a 20,000-character system prompt, is a few dozen KB).

Gradio 6.31 checks a password on ``POST /login`` as often as it is asked (routes.py:495-537): 300 wrong passwords
took 12 s here, so a password can be guessed at that rate. And its ``GET /`` embeds the app's whole API description
(``window.gradio_api_info``, every endpoint and its parameters: templates/frontend/index.html:76, routes.py:746-757)
in the page it serves visitors who are not logged in. :class:`LoginGuard` is an ASGI middleware, given to Gradio's
FastAPI app through ``launch(app_kwargs={"middleware": ...})``, that

- counts failed logins per client address: after ``MAX_FAILURES`` within ``WINDOW_S`` the client's logins are
  answered 429 (with ``Retry-After``) for ``COOLDOWN_S``, logged once per lock-out; the right password works again
  after it, and a success clears the count;
- serves the login page with an empty API description to a visitor without a valid session cookie, its ``HEAD``
  saying the length its ``GET`` sends;
- answers everything else such a visitor asks for with Gradio's own 401, but what :data:`PUBLIC` and
  :data:`PUBLIC_FILES` name (and Gradio's own start-up call, :data:`STARTUP_ROUTE`, until it has been made).

Gradio asks for the login only on the routes it marks (``Depends(login_check)``): logged out, ``/gradio_api/runs``
answered with the whole API's description (33 KB: every endpoint and its parameters), FastAPI's ``/openapi.json``
with every route's, and ``/gradio_api/app_id``, ``/token``, ``/user``, ``/heartbeat``, ``/cancel``, ``/reset``
answered too (issue 58.1). So the guard turns that around: a visitor who is not logged in reaches only the login
page, the login and the logout, and the files the login page loads (Gradio's scripts, styles and fonts under
``/assets/`` and ``/static/``: the same for every app, found from a headless Chromium's requests on the login page).
A path under those two is answered by Gradio's file routes alone (no route declared before them matches one, and
they serve files of Gradio's package, refusing ``..``), so a path can't name a file to the guard and reach a route.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import defaultdict, deque
from http.cookies import SimpleCookie

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8_000_000
UPLOAD_FRAMING_BYTES = 1_000_000  # multipart boundaries and headers around an upload's files
MAX_FAILURES = 5
WINDOW_S = 60.0
COOLDOWN_S = 30.0
# Failed logins from all clients together within WINDOW_S before every login waits: a guesser with many addresses
# (an IPv6 /64 holds 2**64) must not get MAX_FAILURES guesses per address.
MAX_FAILURES_ALL = 50
EMPTY_API = json.dumps({"named_endpoints": {}, "unnamed_endpoints": {}})
# What a visitor who is not logged in may ask for: the login page (its API description emptied), the login and the
# logout, and the files the login page loads.
PUBLIC = frozenset(
    {("GET", "/"), ("HEAD", "/"), ("POST", "/login"), ("POST", "/login/"), ("GET", "/logout")}
    | {("GET", "/theme.css"), ("GET", "/favicon.ico")}
)
PUBLIC_FILES = ("/assets/", "/static/")  # GET and HEAD
# Gradio's launch() asks this of its own server once, without a cookie, to start the queue (gradio 6.31
# blocks.py:3557-3565, routes.py:2128-2135); it answers only until that has happened.
STARTUP_ROUTE = "/gradio_api/startup-events"
NOT_LOGGED_IN = json.dumps({"detail": {"error": "Not authenticated", "auth_message": None}}).encode()
_API_INFO = re.compile(rb"window\.gradio_api_info = .*?;</script>", re.DOTALL)


class BodyLimit:
    """ASGI middleware: a request body over its limit is answered 413, before or while it arrives."""

    def __init__(self, app, max_upload_bytes: int, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app, self.max_upload_bytes, self.max_body_bytes = app, max_upload_bytes, max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        upload = scope.get("path", "").rstrip("/").endswith("/upload")
        limit = self.max_upload_bytes + UPLOAD_FRAMING_BYTES if upload else self.max_body_bytes
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return await _too_large(send, limit)
        state = {"received": 0, "exceeded": False, "started": False}

        async def counted():
            if state["exceeded"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:  # a body without a length, or longer than it said
                    state["exceeded"] = True
                    return {"type": "http.disconnect"}
            return message

        async def answer(message):
            if state["exceeded"]:
                return  # the app's reply to a body cut short is not sent: the 413 below is
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, counted, answer)
        except Exception:
            if not state["exceeded"]:
                raise
        if state["exceeded"] and not state["started"]:
            await _too_large(send, limit)


async def _too_large(send, limit: int) -> None:
    body = json.dumps({"detail": f"Request too large: at most {limit / 1e6:g} MB."}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class LoginGuard:
    """ASGI middleware: failed-login throttling and an API-free login page (see the module docstring)."""

    def __init__(
        self,
        app,
        max_failures: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        cooldown_s: float = COOLDOWN_S,
        max_failures_all: int = MAX_FAILURES_ALL,
    ):
        self.app = app
        self.max_failures, self.window_s, self.cooldown_s = max_failures, window_s, cooldown_s
        self.max_failures_all = max_failures_all
        self.failures: dict[str, deque[float]] = defaultdict(deque)
        self.all_failures: deque[float] = deque()
        self.in_flight: dict[str, int] = defaultdict(int)
        self.locked_until: dict[str, float] = {}
        self.everyone_locked = False
        self.lock = threading.Lock()

    async def __call__(self, scope, receive, send):
        gradio = scope.get("app")
        if scope["type"] not in ("http", "websocket") or getattr(gradio, "auth", None) is None:
            return await self.app(scope, receive, send)
        path, method = scope.get("path", ""), scope.get("method", "")
        if method == "POST" and path in ("/login", "/login/"):  # throttled whoever asks
            return await self._login(scope, receive, send)
        if _logged_in(scope, gradio):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})  # policy violation: log in first
        if path == "/" and method in ("GET", "HEAD"):
            return await self._login_page(scope, receive, send)
        if _public(method, path) or path == STARTUP_ROUTE and not getattr(gradio, "startup_events_triggered", True):
            return await self.app(scope, receive, send)
        return await _not_logged_in(send)

    async def _login(self, scope, receive, send):
        client = (scope.get("client") or ("unknown",))[0]
        wait = self._admit(client, time.monotonic())
        if wait > 0:
            return await _refuse(send, wait)
        status = {}

        async def watch(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self._count(client, status.get("code"), time.monotonic())

    def _admit(self, client: str, now: float) -> float:
        """0 to let this login attempt through (counted as in flight until it is answered), else the seconds to
        wait. Attempts still being checked count as failures, so parallel guesses get no more than sequential ones."""
        with self.lock:
            wait = self.locked_until.get(client, 0.0) - now
            if wait > 0:
                return wait
            self.locked_until.pop(client, None)
            for failures in (self.failures.get(client, deque()), self.all_failures):
                while failures and failures[0] < now - self.window_s:
                    failures.popleft()
            if client in self.failures and not self.failures[client]:
                del self.failures[client]  # many addresses must not grow the table for good
            if len(self.all_failures) >= self.max_failures_all:
                if not self.everyone_locked:
                    log.warning(
                        "%d failed logins from all clients within %.0f s: every login waits until they age out",
                        len(self.all_failures),
                        self.window_s,
                    )
                    self.everyone_locked = True
                return self.all_failures[0] + self.window_s - now
            self.everyone_locked = False
            if len(self.failures.get(client, ())) + self.in_flight.get(client, 0) >= self.max_failures:
                return 1.0  # earlier attempts of this client are still being checked
            self.in_flight[client] += 1
            return 0.0

    def _count(self, client: str, code: int | None, now: float) -> None:
        with self.lock:
            self.in_flight[client] -= 1
            if not self.in_flight[client]:
                del self.in_flight[client]
            if code == 200:
                self.failures.pop(client, None)
                return
            if code not in (400, 401):
                return
            failures = self.failures[client]
            failures.append(now)
            self.all_failures.append(now)
            if len(failures) >= self.max_failures:
                self.locked_until[client] = now + self.cooldown_s
                failures.clear()
                log.warning(
                    "%d failed logins from %s within %.0f s: its logins are refused for %.0f s",
                    self.max_failures,
                    client,
                    self.window_s,
                    self.cooldown_s,
                )

    async def _login_page(self, scope, receive, send):
        """The page Gradio serves at / with its API description emptied. A HEAD is answered from the page a GET
        gets (asked of Gradio as a GET, its body not sent): Gradio's HEAD carries no body to measure, and a
        Content-Length of 0 beside a GET of 5,972 bytes was a header that lied (issue 58.7)."""
        start, body = {}, []

        async def hold(message):
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                body.append(message.get("body", b""))
                if not message.get("more_body"):
                    page = _API_INFO.sub(f"window.gradio_api_info = {EMPTY_API};</script>".encode(), b"".join(body))
                    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                    headers.append((b"content-length", str(len(page)).encode()))
                    await send({**start, "headers": headers})
                    await send({"type": "http.response.body", "body": page if scope["method"] == "GET" else b""})
            else:
                await send(message)

        await self.app({**scope, "method": "GET"} if scope.get("method") == "HEAD" else scope, receive, hold)


def _public(method: str, path: str) -> bool:
    """Whether a visitor who is not logged in may ask for this."""
    return (method, path) in PUBLIC or method in ("GET", "HEAD") and path.startswith(PUBLIC_FILES)


async def _not_logged_in(send) -> None:
    """Gradio's own answer to a request that needs the login (routes.py login_check), so that its page and
    gradio_client read it as they read Gradio's."""
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(NOT_LOGGED_IN)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": NOT_LOGGED_IN})


def _logged_in(scope, gradio) -> bool:
    """Whether the request carries one of Gradio's session cookies for a live session (routes.py get_current_user)."""
    cookies = SimpleCookie()
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            try:
                cookies.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header: not logged in
                return False
    cookie_id = getattr(gradio, "cookie_id", "")
    tokens = getattr(gradio, "tokens", {})
    names = (f"access-token-{cookie_id}", f"access-token-unsecure-{cookie_id}")
    return any(name in cookies and cookies[name].value in tokens for name in names)


async def _refuse(send, wait: float) -> None:
    body = json.dumps({"detail": f"Too many failed logins: try again in {wait:.0f} s."}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(max(1, round(wait))).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
