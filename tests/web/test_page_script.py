"""app/web/page_script.py: the dashboard's script goes first in the head of the page served at ``GET /``, before any of
Gradio's, with the page's length told right; nothing else is touched."""

from __future__ import annotations

import asyncio

from app.web.page_script import SCRIPT, PageScript

PAGE = b"<!doctype html><html><head><script type=module src=./assets/index.js></script></head><body></body></html>"


def serve(path: str, method: str = "GET", body: bytes = PAGE, content_type: bytes = b"text/html; charset=utf-8"):
    """The messages PageScript sends for one request to an app that answers ``body`` in two chunks."""

    async def app(scope, receive, send):
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        half = len(body) // 2
        await send({"type": "http.response.body", "body": body[:half] if method == "GET" else b"", "more_body": True})
        await send({"type": "http.response.body", "body": body[half:] if method == "GET" else b""})

    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    scope = {"type": "http", "method": method, "path": path, "headers": []}
    asyncio.run(PageScript(app)(scope, receive, send))
    return sent


def test_the_root_page_carries_the_script_first_in_its_head_with_its_length_told():
    start, body = serve("/")
    page = body["body"]
    assert page.startswith(b"<!doctype html><html><head><script>" + SCRIPT + b"</script><script type=module")
    assert page.count(SCRIPT) == 1
    assert dict(start["headers"])[b"content-length"] == str(len(page)).encode()
    assert start["status"] == 200 and not body.get("more_body")


def test_a_head_request_is_told_the_length_the_page_has():
    start, body = serve("/", method="HEAD")
    assert body["body"] == b""
    assert (
        dict(start["headers"])[b"content-length"] == str(len(PAGE) + len(SCRIPT) + len(b"<script></script>")).encode()
    )


def test_other_paths_and_other_kinds_of_answer_pass_as_they_came():
    for path, content_type in (("/gradio_api/info", b"text/html"), ("/", b"application/json")):
        sent = serve(path, content_type=content_type)
        assert b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body") == PAGE
        assert dict(sent[0]["headers"])[b"content-length"] == str(len(PAGE)).encode()
        assert len(sent) == 3  # streamed as it came, chunk by chunk
    assert serve("/", method="POST")[0]["status"] == 200
