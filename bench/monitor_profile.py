"""Where a Monitor page's time goes, from Chromium's own trace of its main thread (issue 59: when a speed target of
bench/deep_link.py is missed, say where the time still goes, from the browser's profile):

    python bench/monitor_profile.py [--rounds 3] [--runs 12] [--steps 40]

Serves ``--runs`` stored runs (bench/deep_link.py's store), then, ``--rounds`` times each, records a trace
(``devtools.timeline`` and V8's categories, what DevTools' Performance panel records) of the two pages that missed
their targets: a deep link ``?tab=monitor&run=N`` from navigation to its reward chart drawn, and a click on the
Monitor tab of a loaded root page to the same. Each trace's renderer main thread is split by self time (an event's
time less its children's) into what the browser did: evaluating the Plotly bundle, Gradio's and the page's other
script (by the address of the script that ran: Plotly's, Gradio's modules, the page's own), style and layout, paint and compositing, garbage collection, parsing; the rest of the span the main thread
was idle, waiting on the network or the server. Prints the medians in seconds. Needs Chromium and Playwright, as the
browser tests do.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from deep_link import REWARD_POINTS, start_server, store_runs  # noqa: E402

CATEGORIES = [
    "devtools.timeline",
    "disabled-by-default-devtools.timeline",
    "v8",
    "v8.execute",
    "blink",
    "blink.user_timing",
    "loading",
]
# the activities a main thread's self time is put in, by trace event name (what is in none of them is "other work")
KINDS = {
    "style and layout": {"UpdateLayoutTree", "Layout", "RecalculateStyles", "ScheduleStyleRecalculation", "HitTest"},
    "paint and compositing": {"Paint", "PrePaint", "Layerize", "UpdateLayer", "CompositeLayers", "Commit"},
    "garbage collection": {"MajorGC", "MinorGC", "V8.GCScavenger", "V8.GCFinalizeMC", "BlinkGC.AtomicPhase"},
    "parsing HTML and CSS": {"ParseHTML", "ParseAuthorStyleSheet"},
    "script": {
        "EvaluateScript",
        "v8.compile",
        "v8.compileModule",
        "v8.evaluateModule",
        "v8.produceCache",
        "v8.callFunction",
        "FunctionCall",
        "EventDispatch",
        "TimerFire",
        "FireAnimationFrame",
        "RunMicrotasks",
        "V8.Execute",
        "v8.run",
        "XHRReadyStateChange",
        "XHRLoad",
    },
}


def by_word(name: str) -> str | None:
    """The kind of an event that :data:`KINDS` does not name, by a word in its name (Blink's and V8's own)."""
    if name.startswith(("V8.GC", "BlinkGC")):
        return "garbage collection"
    if "Layout" in name or "Style" in name or "style" in name.split("::")[-1]:
        return "style and layout"
    if "Paint" in name or "Composit" in name:
        return "paint and compositing"
    return None


def script_kind(url: str) -> str:
    """What a script at ``url`` is: the Plotly bundle, Gradio's modules, the page's own scripts (inline in the HTML
    page, app/web/page_script.py), or a script of unknown address."""
    if "plotly" in url:
        return "script: the Plotly bundle (evaluating, drawing)"
    if "/assets/" in url or "gradio" in url:
        return "script: Gradio's modules (the page's widgets)"
    if url.startswith("http"):
        return "script: the page's own (inline in it)"
    return "script: address unknown"


def events_of(trace: dict | list) -> list[dict]:
    """A trace's events: Chromium writes them bare or under ``traceEvents``."""
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def main_thread_split(trace: dict, start_us: float, end_us: float) -> dict[str, float]:
    """Seconds of the renderer main thread's self time between ``start_us`` and ``end_us`` (trace clock), by kind;
    script by the address of the script running (an event under a function of Plotly's bundle is Plotly's)."""
    events = events_of(trace)
    mains = {
        (e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name" and e["args"]["name"] == "CrRendererMain"
    }
    spans = sorted(
        (e for e in events if e.get("ph") == "X" and (e["pid"], e["tid"]) in mains and start_us <= e["ts"] <= end_us),
        key=lambda e: (e["pid"], e["tid"], e["ts"], -e.get("dur", 0)),
    )
    split: dict[str, float] = defaultdict(float)
    stack: list[tuple[dict, list[float], str]] = []  # (event, [children's time], the script running, by its address)
    thread = None

    def close(event, children, url):
        own = max(0.0, event.get("dur", 0) - children[0]) / 1e6
        name = event["name"]
        kind = next((kind for kind, names in KINDS.items() if name in names), None) or by_word(name)
        if kind == "script" or (kind is None and url):
            kind = script_kind(url)
        split[kind or f"other work: {name}"] += own

    for event in spans:
        if (event["pid"], event["tid"]) != thread:
            while stack:
                close(*stack.pop())
            thread = (event["pid"], event["tid"])
        while stack and event["ts"] >= stack[-1][0]["ts"] + stack[-1][0].get("dur", 0):
            close(*stack.pop())
        if stack:
            stack[-1][1][0] += event.get("dur", 0)
        url = (event.get("args", {}).get("data") or {}).get("url", "")
        stack.append((event, [0.0], url or (stack[-1][2] if stack else "")))
    while stack:
        close(*stack.pop())
    others = sorted((k for k in split if k.startswith("other work: ")), key=lambda k: -split[k])
    for k in others[5:]:  # the five largest other events by name, the rest together
        split["other work: the rest"] = split.get("other work: the rest", 0.0) + split.pop(k)
    split["busy in all"] = sum(split.values())
    split["idle (network, the server)"] = max(0.0, (end_us - start_us) / 1e6 - split["busy in all"])
    split["span"] = (end_us - start_us) / 1e6
    return dict(split)


def traced(browser, page, act) -> dict[str, float]:
    """``act(page)`` traced; the main thread's split over the span from just before it to its end."""
    browser.start_tracing(page=page, categories=CATEGORIES)
    act(page)
    trace = json.loads(browser.stop_tracing())
    events = events_of(trace)
    marks = [
        e for e in events if e.get("name") in ("bench-start", "bench-end") and e.get("ph") in ("R", "I", "n", "b", "e")
    ]
    stamps = {e["name"]: e["ts"] for e in marks}
    return main_thread_split(trace, stamps["bench-start"], stamps["bench-end"])


def deep_link(url: str, run_id: int):
    def act(page):
        page.goto("about:blank")
        page.evaluate("performance.mark('bench-start')")
        started = time.perf_counter()
        page.goto(f"{url}?tab=monitor&run={run_id}")
        page.wait_for_function(REWARD_POINTS, timeout=120_000, polling=50)
        page.evaluate("performance.mark('bench-end')")
        print(f"  deep link drawn in {time.perf_counter() - started:.2f} s", flush=True)

    return act


def tab_click(url: str):
    def act(page):
        page.goto(url)
        page.wait_for_selector("#launch:not([disabled])", timeout=120_000)
        time.sleep(1.0)  # the page's load events are done, as bench/deep_link.py waits
        page.evaluate("performance.mark('bench-start')")
        started = time.perf_counter()
        page.get_by_role("tab", name="Monitor").click()
        page.wait_for_function(REWARD_POINTS, timeout=120_000, polling=50)
        page.evaluate("performance.mark('bench-end')")
        print(f"  tab click drawn in {time.perf_counter() - started:.2f} s", flush=True)

    return act


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--steps", type=int, default=40)
    opts = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as home:
        os.environ["GRPO_STUDIO_HOME"] = home
        ids = store_runs(opts.runs, opts.steps)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = start_server(port, home=home)
        url = f"http://127.0.0.1:{port}/"
        splits: dict[str, list[dict[str, float]]] = {"deep link": [], "tab click": []}
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                    args=["--headless", "--no-sandbox", "--disable-gpu"],
                )
                warm = browser.new_page()
                warm.goto(url)  # the first load fills the browser's asset cache, as a returning user's has
                warm.wait_for_selector("#launch:not([disabled])", timeout=120_000)
                warm.close()
                for _ in range(opts.rounds):
                    for name, act in (("deep link", deep_link(url, ids[0])), ("tab click", tab_click(url))):
                        page = browser.new_page(viewport={"width": 1440, "height": 900})
                        splits[name].append(traced(browser, page, act))
                        page.close()
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    for name, rounds in splits.items():
        kinds = sorted(
            {kind for split in rounds for kind in split}, key=lambda k: -statistics.median(r.get(k, 0) for r in rounds)
        )
        print(f"{name}, medians of {len(rounds)} (s):")
        for kind in kinds:
            print(f"  {kind:32s} {statistics.median(r.get(kind, 0.0) for r in rounds):6.2f}")
    print(f"{opts.runs} runs x {opts.steps} steps; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
