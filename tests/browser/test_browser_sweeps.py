"""A sweep defined, launched and read in the dashboard, in headless Chromium against a real `grpo-studio serve`
(issue 41): a 2 x 2 grid typed into New run → Sweep (top_p 1.0, 0.01 × learning_rate 1e-5, 5e-3 on the tiny config, so
the probe skips the two top_p 0.01 points as wasted: every answer of a group is the same, as tests/sweeps/test_sweep_e2e.py
does from the command line), launched, lands on the Sweeps tab; once the server's scheduler has trained the other
two, the table, the parallel coordinates and the curves say what the stored rows say, and the best member is one
click from its Monitor and from Compare.

One sweep serves every test of the module (it trains two 4-step runs and probes four points: the suite's budget,
issue 40); tests/sweeps/test_sweep_view.py holds the same rules as plain functions. Screenshots of the view at 1440×900 and
390×844 go to screenshots/ (docs/dashboard.md shows the copies in docs/screens/).
"""

from __future__ import annotations

import math
import re
import time

import pytest

from tests.browser.harness import (
    CHROMIUM,
    NO_CHROMIUM,
    SCREENSHOTS,
    fill_sweep_form,
    selected_tab,
    start_server,
)
from tests.helpers import BROWSER_TIMEOUT_MS, PAGE_WAIT_S, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]

LAPTOP, PHONE = {"width": 1440, "height": 900}, {"width": 390, "height": 844}
GRID = "top_p = 1.0, 0.01\nlearning_rate = 1e-5, 5e-3"  # a step size that barely moves the adapter, one that does
ROWS = "(sel) => [...document.querySelectorAll(sel + ' .virtual-body [role=row]')].map(r => [...r.querySelectorAll('[role=gridcell]')].map(c => c.innerText.trim()))"
PLOT = "(sel) => { const p = document.querySelector(sel + ' .js-plotly-plot'); return p && p._fullData ? p._fullData.map(t => ({type: t.type, meta: t.meta, name: t.name, width: t.line && t.line.width, color: t.line && Array.from(t.line.color || []), dimensions: (t.dimensions || []).map(d => ({label: d.label, values: Array.from(d.values)}))})) : null; }"


@pytest.fixture(scope="module")
def server(tiny_model_path, module_database):
    yield from start_server("serve-sweeps.log")


def _query(page) -> dict[str, str]:
    return dict(re.findall(r"[?&]([^=&]+)=([^&]*)", page.evaluate("window.location.search")))


@pytest.fixture(scope="module")
def swept(browser, server):
    """The module's sweep, defined in the form and launched from it; yields (page on its Sweeps view, sweep id)
    once every member has ended."""
    from app import actions

    started = time.monotonic()
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    page.goto(server[0])
    page.wait_for_selector("#launch", state="attached")
    fill_sweep_form(page, "ui-grid", GRID)
    page.click("#launch-sweep")
    # four probes first (in one child process), then the Sweeps tab: hang bounds, not speed targets
    wait_for(lambda: selected_tab(page) == "Sweeps", 300, "the Sweeps tab after the launch")
    assert "Launched:" in page.locator("#sweep-status").inner_text()
    assert "4 members, 2 skipped by the probe" in page.locator("#sweep-status").inner_text()
    wait_for(lambda: _query(page).get("tab") == "sweeps" and "sweep" in _query(page), PAGE_WAIT_S, "the address")
    sweep_id = int(_query(page)["sweep"])
    assert len(page.context.pages) == 1  # the same browser tab
    wait_for(lambda: actions.sweep_detail(sweep_id).summary.state == "finished", 600, "every member to end")
    wait_for(lambda: "Finished:" in page.locator("#sweeps-header").inner_text(), PAGE_WAIT_S, "the view to say so")
    print(f"the sweep was defined, launched and ended in {time.monotonic() - started:.0f} s")
    yield page, sweep_id
    context.close()


def _stored_best(sweep_id: int) -> tuple[int, dict[int, float]]:
    """The member with the highest held-out score at its last evaluation, from the stored metric rows (not the
    action's table), and each trained member's score."""
    from app import actions
    from storage import queries
    from storage.db import get_sessionmaker

    ids = [row.run_id for row in actions.sweep_detail(sweep_id).rows]
    with get_sessionmaker().begin() as s:
        last = {}
        for run_id in ids:
            series = queries.metric_series(s, run_id, "heldout/correct")
            if series:
                last[run_id] = series[-1].value
    return max(last, key=lambda r: (last[r], -r)), last


def test_the_table_shows_each_point_its_status_the_probes_reason_and_the_best(swept):
    page, sweep_id = swept
    from app import actions

    table = actions.sweep_detail(sweep_id)
    best, scores = _stored_best(sweep_id)
    ids = [row.run_id for row in table.rows]
    assert set(scores) == set(ids[:2])  # the two skipped never trained
    assert len(set(scores.values())) == 2, scores  # the two step sizes learn apart: "best" is not a tie
    wait_for(lambda: len(page.evaluate(ROWS, "#sweeps-table")) == 4, PAGE_WAIT_S, "four rows")
    rows = page.evaluate(ROWS, "#sweeps-table")
    assert [r[1] for r in rows] == [str(i) for i in ids]
    assert [r[2] for r in rows] == [
        "top_p=1 learning_rate=1e-05",
        "top_p=1 learning_rate=0.005",
        "top_p=0.01 learning_rate=1e-05",
        "top_p=0.01 learning_rate=0.005",
    ]
    assert [r[3] for r in rows] == ["completed", "completed", "stopped", "stopped"]
    assert [r[4] for r in rows] == ["4/4", "4/4", "0/4", "0/4"]
    for row in rows[2:]:
        assert row[10].startswith("skipped before training: the probe says the run would learn nothing (")
    assert [r[0] for r in rows] == ["★ best" if i == best else "" for i in ids]
    assert float(rows[ids.index(best)][5]) == pytest.approx(scores[best], abs=1e-3)
    assert f"best so far: run {best}" in page.locator("#sweeps-header").inner_text()
    # sorted by the objective, best first: the best member leads, the unscored ones last
    page.get_by_label("objective, best first").check()
    wait_for(lambda: page.evaluate(ROWS, "#sweeps-table")[0][1] == str(best), PAGE_WAIT_S, "the table sorted")
    assert [r[5] for r in page.evaluate(ROWS, "#sweeps-table")][2:] == ["", ""]
    page.get_by_label("point order").check()
    wait_for(lambda: page.evaluate(ROWS, "#sweeps-table")[0][1] == str(ids[0]), PAGE_WAIT_S, "the table in point order")


def test_the_parcoords_draws_the_scored_points_coloured_by_the_objective(swept):
    page, sweep_id = swept
    best, scores = _stored_best(sweep_id)
    wait_for(lambda: page.evaluate(PLOT, "#sweeps-parcoords"), PAGE_WAIT_S, "the parallel coordinates")
    (trace,) = page.evaluate(PLOT, "#sweeps-parcoords")
    assert trace["type"] == "parcoords"
    drawn = list(scores)  # the members with a score, in point order
    assert trace["meta"] == drawn
    axes = {d["label"]: d["values"] for d in trace["dimensions"]}
    assert list(axes) == ["top_p", "learning_rate (log)", "heldout/correct (max)"]
    # the learning rates span more than two decades: drawn in log10
    assert axes["top_p"] == [1.0, 1.0] and axes["learning_rate (log)"] == pytest.approx([-5.0, math.log10(5e-3)])
    assert axes["heldout/correct (max)"] == pytest.approx([scores[r] for r in drawn])
    assert trace["color"] == pytest.approx([scores[r] for r in drawn])
    notes = page.locator("#sweeps-parcoords").inner_text()
    assert "not drawn, no heldout/correct yet: runs" in notes
    curves = page.evaluate(PLOT, "#sweeps-curves")
    assert sorted(t["meta"] for t in curves) == sorted(drawn)
    (thick,) = [t for t in curves if t["width"] == 4]
    assert thick["meta"] == best and thick["name"].endswith("(best)")


def test_screenshots_of_the_sweeps_view_at_both_widths(swept):
    page, _ = swept
    SCREENSHOTS.mkdir(exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SCREENSHOTS / "sweeps-laptop.png"), full_page=True)  # the table and both charts
    phone = page.context.browser.new_context(viewport=PHONE).new_page()
    try:
        phone.set_default_timeout(BROWSER_TIMEOUT_MS)
        phone.goto(page.url)
        wait_for(lambda: selected_tab(phone) == "Sweeps", PAGE_WAIT_S, "the phone's Sweeps tab")
        wait_for(lambda: phone.evaluate(PLOT, "#sweeps-parcoords"), PAGE_WAIT_S, "the phone's charts")
        phone.screenshot(path=str(SCREENSHOTS / "sweeps-phone.png"), full_page=False)  # its first screen
        # nothing wider than the phone's screen: the table scrolls inside its box
        assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 1
    finally:
        phone.context.close()


def test_the_best_member_opens_in_compare_and_in_the_monitor_in_this_tab(swept):
    page, sweep_id = swept
    best, _ = _stored_best(sweep_id)
    member = page.locator("#sweeps-member input")
    wait_for(lambda: member.input_value().startswith(f"{best}: "), PAGE_WAIT_S, "the best member picked")
    page.click("#sweeps-compare")
    wait_for(lambda: selected_tab(page) == "Compare", PAGE_WAIT_S, "Compare")
    wait_for(
        lambda: page.locator("#compare-run input").input_value().startswith(f"{best}: "),
        PAGE_WAIT_S,
        "its run in Compare",
    )
    wait_for(lambda: _query(page).get("run") == str(best), PAGE_WAIT_S, "the address")
    page.get_by_role("tab", name="Sweeps").click()
    wait_for(lambda: selected_tab(page) == "Sweeps", PAGE_WAIT_S, "back on Sweeps")
    page.click("#sweeps-monitor")
    wait_for(lambda: selected_tab(page) == "Monitor", PAGE_WAIT_S, "the Monitor")
    wait_for(
        lambda: page.locator("#monitor-run input").input_value().startswith(f"{best}: "), PAGE_WAIT_S, "its run picked"
    )
    wait_for(
        lambda: (_query(page).get("tab"), _query(page).get("run")) == ("monitor", str(best)), PAGE_WAIT_S, "the address"
    )
    header = page.locator("#monitor-progress")
    wait_for(lambda: f"(run {best})" in header.inner_text(), PAGE_WAIT_S, "the Monitor's header naming it")
    assert "step 4 of 4" in header.inner_text()
    assert len(page.context.pages) == 1
