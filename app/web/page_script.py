"""Scripts of the dashboard's own in the page Gradio serves, ahead of Gradio's modules (app/web/status_timer.js), and
the one Plotly bundle the Monitor's charts are drawn with (app/web/monitor_charts.js).

Gradio adds ``launch(head=...)`` to the page from its own JavaScript once that has loaded (the template,
templates/frontend/index.html, only carries it in ``window.gradio_config``), so a script given there runs after
Gradio's modules have been evaluated, and after what they took from ``window`` as they were (the status tracker
keeps ``window.requestAnimationFrame`` as its module found it). :class:`PageScript`, an ASGI middleware given to
Gradio's FastAPI app with the others (app/web/guard.py), puts the script right after the page's ``<head>``, before
anything of Gradio's, in every HTML page answered to ``GET /``.
"""

from __future__ import annotations

import re
from pathlib import Path

import plotly
from plotly.offline import get_plotlyjs_version

HEAD = b"<head>"
HERE = Path(__file__).resolve().parent
# The Plotly the Monitor draws with: plotly.js's cartesian bundle (npm's plotly.js-cartesian-dist-min, MIT, kept in
# app/web/vendor/ with its licence). It has every trace the Monitor draws (scatter, bar, heatmap) in 1.5 MB where the
# plotly package's full bundle is 4.8 MB, and a browser evaluates it in half the time (0.5 s beside 1.0-1.2 s on a
# quiet core, docs/benchmarks.md), which a deep link and the first click on the Monitor paid before their first chart.
# The figures are written by the installed plotly package: where its plotly.js is of another major version than the
# bundle's, the page takes the package's own full bundle instead. Served at an address naming the bundle and its
# version, so a browser keeps it a year without asking again (PlotlyBundle) and a new version is a new address.
VENDORED = HERE / "vendor" / "plotly-cartesian.min.js"


def _bundle_version(path: Path) -> str:
    """The plotly.js version in ``path``'s header comment (``* plotly.js (cartesian - minified) v4.1.1``)."""
    with path.open("rb") as bundle:
        head = bundle.read(200).decode("ascii", "replace")
    return re.search(r"plotly\.js .*?v(\d+\.\d+\.\d+)", head).group(1)


def _plotly_bundle() -> tuple[Path, str]:
    """The bundle file the page loads and the address it is served at."""
    written_for = get_plotlyjs_version()
    vendored = _bundle_version(VENDORED)
    if vendored.split(".")[0] == written_for.split(".")[0]:
        return VENDORED, f"/grpo-studio/plotly-cartesian-{vendored}.min.js"
    full = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
    return full, f"/grpo-studio/plotly-{written_for}.min.js"


PLOTLY_FILE, PLOTLY_URL = _plotly_bundle()
# the status trackers' timer, the keyboard and ARIA repairs (app/web/a11y.js: the tabs answer the arrow keys, a table
# row opens with Enter or Space, Gradio's empty placeholders get a role for their label), then the Monitor's charts
SCRIPT = b"\n".join(
    (HERE / name).read_bytes().replace(b"__PLOTLY_URL__", PLOTLY_URL.encode())
    for name in ("status_timer.js", "a11y.js", "monitor_charts.js")
)


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


class PlotlyBundle:
    """ASGI middleware: the Plotly bundle at :data:`PLOTLY_URL`, cached by the browser for a year (the address names
    the version, so it never changes under it). The page loads it once, when the Monitor first draws a chart
    (app/web/monitor_charts.js); Gradio's own (its Plot component's module) is left to the plots of the other panels."""

    def __init__(self, app) -> None:
        self.app, self.body = app, None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD") or scope.get("path") != PLOTLY_URL:
            return await self.app(scope, receive, send)
        if self.body is None:  # read on first use: a server nobody opens the Monitor of never holds it
            self.body = PLOTLY_FILE.read_bytes()
        headers = [
            (b"content-type", b"text/javascript; charset=utf-8"),
            (b"content-length", str(len(self.body)).encode()),
            (b"cache-control", b"public, max-age=31536000, immutable"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.body if scope["method"] == "GET" else b""})
