"""The login throttle's rules without a server (the real server is attacked in tests/web/test_server.py): a lock-out
after a few failures, the right password working again after the cool-down, a success clearing the count."""

from __future__ import annotations

import asyncio
import urllib.parse

from app.web.guard import LoginGuard


class FakeGradio:
    """An ASGI app with the attributes the guard reads from Gradio's App: a password check on POST /login."""

    auth = {"ann": "secret"}
    tokens: dict = {}
    cookie_id = "x"

    async def __call__(self, scope, receive, send):
        body = (await receive())["body"].decode()
        password = urllib.parse.parse_qs(body).get("password", [""])[0]
        status = 200 if password == "secret" else 400
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def _login(guard: LoginGuard, password: str, client: str = "10.0.0.1") -> int:
    sent = []
    app = FakeGradio()
    scope = {"type": "http", "method": "POST", "path": "/login", "client": (client, 1234), "app": app}

    async def receive():
        return {"type": "http.request", "body": f"username=ann&password={password}".encode()}

    async def send(message):
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    return sent[0]["status"]


def test_a_lockout_after_failures_ends_after_the_cooldown(monkeypatch):
    import app.web.guard as guard_module

    now = [1000.0]
    monkeypatch.setattr(guard_module.time, "monotonic", lambda: now[0])
    guard = LoginGuard(FakeGradio(), max_failures=3, window_s=60, cooldown_s=30)
    assert [_login(guard, "nope") for _ in range(3)] == [400, 400, 400]
    assert _login(guard, "secret") == 429  # locked out: the right password too
    assert _login(guard, "secret", client="10.0.0.2") == 200  # another client is not
    now[0] += 31
    assert _login(guard, "secret") == 200  # after the cool-down


def test_failures_outside_the_window_and_after_a_success_do_not_add_up(monkeypatch):
    import app.web.guard as guard_module

    now = [0.0]
    monkeypatch.setattr(guard_module.time, "monotonic", lambda: now[0])
    guard = LoginGuard(FakeGradio(), max_failures=3, window_s=60, cooldown_s=30)
    _login(guard, "nope"), _login(guard, "nope")
    now[0] += 61
    assert _login(guard, "nope") == 400 and _login(guard, "nope") == 400  # the first two fell out of the window
    assert _login(guard, "secret") == 200
    assert _login(guard, "nope") == 400 and _login(guard, "nope") == 400  # the success cleared the count


def test_parallel_guesses_get_no_more_than_sequential_ones():
    """Attempts still being checked count: a client with max_failures logins in flight gets 429 for the next."""
    guard = LoginGuard(FakeGradio(), max_failures=3)
    for _ in range(3):
        assert guard._admit("10.0.0.1", 0.0) == 0.0  # let through, in flight
    assert guard._admit("10.0.0.1", 0.0) > 0
    for _ in range(3):
        guard._count("10.0.0.1", 400, 0.0)
    assert guard._admit("10.0.0.1", 1.0) > 0  # three failures: locked out


def test_many_addresses_share_one_limit_on_failures(monkeypatch):
    import app.web.guard as guard_module

    now = [0.0]
    monkeypatch.setattr(guard_module.time, "monotonic", lambda: now[0])
    guard = LoginGuard(FakeGradio(), max_failures=3, max_failures_all=10)
    codes = [_login(guard, "nope", client=f"2001:db8::{i}") for i in range(12)]
    assert codes == [400] * 10 + [429, 429]  # one guess per address, but ten in all
    assert _login(guard, "secret", client="2001:db8::99") == 429
    now[0] += 61
    assert _login(guard, "secret", client="2001:db8::99") == 200
    assert len(guard.failures) <= 12 and not guard.in_flight


def test_the_server_trusts_no_forwarded_address(monkeypatch):
    """uvicorn would take X-Forwarded-For from a loopback peer (a tunnel): serve turns that off unless set."""
    import app.web.server as server

    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    monkeypatch.setattr(server, "build_app", lambda access: (_ for _ in ()).throw(SystemExit("stop here")))
    monkeypatch.setattr(server.Scheduler, "start", lambda self: None)
    try:
        server.serve()
    except SystemExit:
        pass
    import os

    assert os.environ["FORWARDED_ALLOW_IPS"] == ""
