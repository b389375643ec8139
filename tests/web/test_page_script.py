"""app/web/page_script.py: the dashboard's script goes first in the head of the page served at ``GET /``, before any of
Gradio's, with the page's length told right; nothing else is touched."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from app.web import page_script
from app.web.page_script import PLOTLY_FILE, PLOTLY_URL, SCRIPT, VENDORED, PageScript, PlotlyBundle
from app.web.widgets.charts import CHARTS, build_figure, heldout_figure
from app.web.widgets.charts_learning import learning_heatmap, signal_figure
from storage.learning import HeldOutPoint, ScoredSample
from trainer.insight.learning_map import build_map

PAGE = b"<!doctype html><html><head><script type=module src=./assets/index.js></script></head><body></body></html>"


def serve(path: str, method: str = "GET", body: bytes = PAGE, content_type: bytes = b"text/html; charset=utf-8"):
    """The messages PageScript sends for one request to an app that answers ``body`` in two chunks."""

    async def app(scope, receive, send):
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        half = len(body) // 2
        await send({"type": "http.response.body", "body": body[:half] if method == "GET" else b"", "more_body": True})
        await send({"type": "http.response.body", "body": body[half:] if method == "GET" else b""})

    return asyncio.run(_call(PageScript(app), path, method))


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


# --- the Plotly bundle ------------------------------------------------------------------------------------------------
def _registered_traces(bundle: Path) -> set[str]:
    """The trace types a plotly.js bundle registers (each trace module says ``moduleType:"trace",name:"…"``)."""
    return set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', bundle.read_text(encoding="utf-8")))


def test_the_bundle_served_draws_every_trace_the_monitors_figures_hold():
    steps = [(1, 0.5, 100.0), (2, 0.75, 101.0)]
    rows = [ScoredSample(step, 0, "p", {"correctness": 2.0 * (step > 1)}, 2.0 * (step > 1)) for step in (1, 2)]
    learning = build_map(rows, [HeldOutPoint(0, 0, "held", 1.0)])
    figures = [
        build_figure(CHARTS[0], {"1: run": {"reward": steps, "rewards/correctness/mean": steps}}),
        heldout_figure([("correctness", 0.25, 0.5)], 10),
        learning_heatmap(learning),
        signal_figure(learning),
    ]
    drawn = {trace.type or "scatter" for figure in figures for trace in figure.data}
    assert drawn == {"scatter", "bar", "heatmap"}
    assert PLOTLY_FILE == VENDORED and drawn <= _registered_traces(VENDORED)
    assert len(_registered_traces(VENDORED)) == 12  # the cartesian bundle: a third of the package's 4.8 MB


def test_the_bundle_is_served_at_an_address_naming_its_version_and_kept_a_year():
    assert PLOTLY_URL == "/grpo-studio/plotly-cartesian-4.1.1.min.js"
    sent = asyncio.run(_call(PlotlyBundle(_not_found), PLOTLY_URL))
    headers = dict(sent[0]["headers"])
    assert sent[0]["status"] == 200 and headers[b"content-type"].startswith(b"text/javascript")
    assert headers[b"cache-control"] == b"public, max-age=31536000, immutable"
    assert sent[1]["body"] == VENDORED.read_bytes() and int(headers[b"content-length"]) == VENDORED.stat().st_size
    head = asyncio.run(_call(PlotlyBundle(_not_found), PLOTLY_URL, "HEAD"))
    assert head[1]["body"] == b"" and dict(head[0]["headers"])[b"content-length"] == headers[b"content-length"]
    assert asyncio.run(_call(PlotlyBundle(_not_found), "/grpo-studio/plotly-4.1.1.min.js"))[0]["status"] == 404


def test_figures_written_for_another_major_plotly_take_the_packages_own_bundle(monkeypatch):
    monkeypatch.setattr(page_script, "get_plotlyjs_version", lambda: "5.0.2")
    bundle, url = page_script._plotly_bundle()
    assert url == "/grpo-studio/plotly-5.0.2.min.js"
    assert bundle.name == "plotly.min.js" and bundle.parent.name == "package_data" and bundle.is_file()
    assert len(_registered_traces(bundle)) > 40  # every trace plotly.js has
    monkeypatch.setattr(page_script, "get_plotlyjs_version", lambda: "4.9.0")  # a newer minor: the bundle still fits
    assert page_script._plotly_bundle() == (VENDORED, "/grpo-studio/plotly-cartesian-4.1.1.min.js")


async def _not_found(scope, receive, send):
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _call(app, path: str, method: str = "GET") -> list[dict]:
    """The messages ``app`` sends for one request to ``path``."""
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    await app({"type": "http", "method": method, "path": path, "headers": []}, receive, send)
    return sent
