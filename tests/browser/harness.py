"""The browser tests' harness: Chromium found and launched, a real `grpo-studio serve` started and stopped, and the
page-level moves every browser module makes (fill a field, pick from a dropdown, open an address, read a chart's
points as Plotly draws them, plant markup and find what it built)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import BROWSER_TIMEOUT_MS, PAGE_WAIT_S, free_port, wait_for


def find_chromium() -> str | None:
    """The Chromium the browser tests drive: ``$CHROMIUM``, Debian's ``/usr/bin/chromium``, or the one
    ``playwright install chromium`` put in Playwright's own cache; None when there is none."""
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            installed = p.chromium.executable_path
    except Exception:  # playwright missing, or its driver can't start
        return None
    return installed if installed and Path(installed).exists() else None


CHROMIUM = find_chromium()
NO_CHROMIUM = "no Chromium: install Debian's chromium, run `playwright install chromium`, or set CHROMIUM=/path"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = ROOT / "test-artifacts"
SCREENSHOTS = ROOT / "screenshots"


def start_server(log_name: str, *flags: str):
    """A real `grpo-studio serve` process on a free port, on this process's database (``flags`` added to its command
    line); yields (url, process)."""
    port = free_port()
    log = open(ARTIFACTS.mkdir(exist_ok=True) or ARTIFACTS / log_name, "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), *flags],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"

    def up():
        try:
            return urllib.request.urlopen(url, timeout=2).status == 200
        except OSError:
            return False

    try:
        wait_for(up, PAGE_WAIT_S, "the dashboard to answer")
        yield url, process
    finally:  # also when the generator is closed by hand (a fixture that wraps it) or the wait fails
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def launch_browser():
    """Headless Chromium (Debian's, with the suite's flags); yields the browser and closes it afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


def open_page(url: str):
    """Headless Chromium on ``url`` with the form drawn; yields the page (one per test module)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.set_default_timeout(BROWSER_TIMEOUT_MS)
        page.goto(url)
        page.wait_for_selector("#launch", state="attached")
        yield page
        browser.close()


def field_box(page, field: str):
    return page.locator(f"#field-{field} input, #field-{field} textarea").first


def set_field(page, field: str, value) -> None:
    box = field_box(page, field)
    box.fill(str(value))
    box.press("Tab")


def selected_tab(page) -> str:
    return page.locator("[role=tab][aria-selected=true]").first.inner_text().strip()


def choose(page, picker: str, label: str, tries: int = 3) -> None:
    """Choose the option that starts with ``label`` in the dropdown ``picker`` (its element id) as a user with a long
    list does: click it, type the label's start and press Enter. Keys wait in the browser's queue while a live page
    redraws; a click aimed at an open list's option missed it where a redraw replaced the list (all three tries in
    one CI run on a loaded machine), or waited out its whole 150 s where the list had been placed outside the
    viewport as the page below it filled in (the learning views' test, twice in six clean-clone runs). A choice that
    did not take is tried again. A multiselect's choice is read from its tokens, a single one's from its box."""

    def chosen() -> bool:
        shown = page.locator(f"{picker} .token").all_inner_texts() or [page.locator(f"{picker} input").input_value()]
        return any(text.strip().startswith(label) for text in shown)

    for attempt in range(tries):
        page.locator(f"{picker} input").click()
        page.keyboard.press("Control+a")  # a single picker's box holds what it shows: typed over, not after
        page.keyboard.type(label)
        page.keyboard.press("Enter")
        page.keyboard.press("Escape")
        try:
            wait_for(chosen, PAGE_WAIT_S, f"{label!r} chosen in {picker}")
            return
        except pytest.fail.Exception:
            if attempt == tries - 1:
                options = page.locator("[role=option]").all_inner_texts()
                pytest.fail(f"{label!r} was not chosen in {picker} after {tries} tries; options shown: {options}")


def pick_run(page, picker: str, run_id: int, tries: int = 3) -> None:
    """Pick run ``run_id`` in the run picker ``picker`` (the dropdown's element id, "#monitor-run") by the start of
    its label ("7: "), as :func:`choose` does."""
    choose(page, picker, f"{run_id}: ", tries)


def look_at(page, box: str) -> None:
    """Scroll the chart box ``box`` (a selector) into view, as a person reading it does: the Monitor draws a chart
    only once its box is on screen (app/web/monitor_charts.js)."""
    page.evaluate("(sel) => document.querySelector(sel)?.scrollIntoView({block: 'nearest'})", box)


def chart_points(page, chart: str) -> int:
    """How many data points a monitor chart draws, from the plot's own data rather than its marker elements: the
    chart is redrawn at every tick, and counting markers while a redraw had two copies on the page once read a count
    the finished chart could not exceed."""
    script = """(sel) => {
        const plot = document.querySelector(sel);
        return (plot && plot._fullData || []).reduce((n, t) => n + (t.y ? t.y.length : 0), 0);
    }"""
    look_at(page, f"#chart-{chart}")
    return page.evaluate(script, f"#chart-{chart} .js-plotly-plot")


def chart_series(page, chart: str, key: str) -> list[float]:
    """The y values Plotly draws for metric ``key`` in a monitor chart, read from the plot's own full data (the
    figure's numpy arrays arrive base64-encoded; Plotly's ``_fullData`` holds them decoded)."""
    script = """([sel, key]) => {
        const plot = document.querySelector(sel);
        const trace = plot && (plot._fullData || []).find(t => t.meta === key);
        return trace ? Array.from(trace.y) : [];
    }"""
    look_at(page, f"#chart-{chart}")
    return page.evaluate(script, [f"#chart-{chart} .js-plotly-plot", key])


TEXT_LINES = """e => {
    const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    const tops = new Set();
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (!node.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        for (const rect of range.getClientRects()) if (rect.width > 0) tops.add(Math.round(rect.top));
    }
    return tops.size;
}"""


def goto(page, query: str) -> None:
    """Open the dashboard at ``?query``; once more if Chromium aborts it (a page still busy replacing its address)."""
    from playwright.sync_api import Error

    url = page.url.split("?")[0] + "?" + query
    # until the DOM is there, not the page's "load" (every subresource): the form's #launch is what the tests wait
    # for, and on a loaded machine a Monitor page's "load" took longer than two tries of 90 s
    try:
        page.goto(url, wait_until="domcontentloaded")
    except Error:
        time.sleep(1.0)
        page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#launch", state="attached")


OUTSIDE = "elsewhere.invalid"


def payload(tag: str) -> str:
    """A value that builds an element with the id ``pwn-<tag>`` (or a link, an image, a math block) wherever it is
    rendered as markup instead of text."""
    return (
        f"{tag} <a id=pwn-{tag} href=//{OUTSIDE}/{tag} style=position:fixed;inset:0;z-index:999>Session expired</a>"
        f"<img id=pwn-img-{tag} src=//{OUTSIDE}/{tag}.png> ![i](//{OUTSIDE}/md-{tag}.png) [l](//{OUTSIDE}/l-{tag}) "
        f"www.{OUTSIDE} https://{OUTSIDE}/auto-{tag} **b-{tag}** $$\\frac{{1}}{{2}}$$"
    )


# Elements a payload built: its ids, an attribute that reaches the other host (Plotly's SVG links included), math
# typeset from it, its bold text
BUILT = """() => {
  const out = [...document.querySelectorAll("[id^=pwn-], .katex, math")];
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      const fetches = /^(xlink:)?href$|^src(set)?$|^style$|^(form)?action$|^poster$|^background$/i;
      if (fetches.test(attr.name) && attr.value.includes("elsewhere")) out.push(el);
    }
    if (el.tagName === "STRONG" && el.textContent.startsWith("b-")) out.push(el);
  }
  return out.map(el => el.outerHTML.slice(0, 160));
}"""


def built(page) -> list[str]:
    """Elements anywhere in the page that a payload built."""
    return page.evaluate(BUILT)


def recording_page(browser, requests: list[str]):
    """A page whose every request is recorded in ``requests``."""
    page = browser.new_page(viewport={"width": 1440, "height": 2400})
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    page.on("request", lambda request: requests.append(request.url))
    return page


# The tiny config of tests/helpers.py, typed into the New run form: a step well under a second, a held-out score at
# steps 0, 2 and 4 (a sweep's objective), a checkpoint at 2 and 4
TINY_FORM = {"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 4, "learning_rate": 1e-3}
TINY_ADVANCED = {"eval_steps": 2, "save_steps": 2, "warmup_ratio": 0}


def fill_sweep_form(page, name: str, grid: str) -> None:
    """Fill the New run form with the tiny config under the run name ``name`` and open its Sweep section on ``grid``
    (the sweep box's text); the caller presses "Launch sweep"."""
    set_field(page, "name", name)
    for field, value in TINY_FORM.items():
        set_field(page, field, value)
    page.get_by_text("Advanced", exact=True).first.click()
    for field, value in TINY_ADVANCED.items():
        set_field(page, field, value)
    page.get_by_text("Sweep: one run per point of some settings").click()
    page.locator("#sweep-settings textarea").fill(grid)
