"""Scripts of the dashboard's own in the page Gradio serves, ahead of Gradio's modules (app/web/status_timer.js).

Gradio adds ``launch(head=...)`` to the page from its own JavaScript once that has loaded (the template,
templates/frontend/index.html, only carries it in ``window.gradio_config``), so a script given there runs after
Gradio's modules have been evaluated, and after what they took from ``window`` as they were (the status tracker
keeps ``window.requestAnimationFrame`` as its module found it). :class:`PageScript`, an ASGI middleware given to
Gradio's FastAPI app with the others (app/web/guard.py), puts the script right after the page's ``<head>``, before
anything of Gradio's, in every HTML page answered to ``GET /``.
"""

from __future__ import annotations

from pathlib import Path

HEAD = b"<head>"
# the status trackers' timer, then the keyboard and ARIA repairs (app/web/a11y.js: the tabs answer the arrow keys, a table
# row opens with Enter or Space, Gradio's empty placeholders get a role for their label)
SCRIPT = b"\n".join((Path(__file__).resolve().parent / name).read_bytes() for name in ("status_timer.js", "a11y.js"))


class PageScript:
    """ASGI middleware: ``script`` (JavaScript source) first in the head of the HTML page served at ``GET /``."""

    def __init__(self, app, script: bytes | None = None) -> None:
        self.app, self.tag = app, b"<script>" + (SCRIPT if script is None else script) + b"</script>"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD") or scope.get("path") != "/":
            return await self.app(scope, receive, send)
        start, body = {}, []

        async def with_script(message):
            if message["type"] == "http.response.start":
                start.update(message)
                if not _is_html(start):
                    await send(message)
            elif message["type"] == "http.response.body" and _is_html(start):
                body.append(message.get("body", b""))
                if not message.get("more_body"):
                    page = b"".join(body).replace(HEAD, HEAD + self.tag, 1)
                    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                    if scope["method"] == "GET":
                        headers.append((b"content-length", str(len(page)).encode()))
                    else:  # HEAD: the length the page would have
                        declared = dict(start.get("headers", [])).get(b"content-length", b"0")
                        headers.append((b"content-length", str(int(declared) + len(self.tag)).encode()))
                    await send({**start, "headers": headers})
                    await send({"type": "http.response.body", "body": page if scope["method"] == "GET" else b""})
            else:
                await send(message)

        await self.app(scope, receive, with_script)


def _is_html(start: dict) -> bool:
    """Whether the response begun by ``start`` is an HTML page."""
    return dict(start.get("headers", [])).get(b"content-type", b"").startswith(b"text/html")
