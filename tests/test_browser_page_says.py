"""What the page says while things start (issue 59), in Chromium against `grpo-studio serve`: one server and one
browser for the module, its rows planted from here as the launcher, the worker and the scheduler write them.

- Sweeps → "Open in Monitor" on a member: the Monitor shows that member's run and its status now, and a "waiting
  behind run N" names only a run that is still live (the report: the address said run=7 while the page still said
  "(run 6) — queued … waiting behind run 3 (running)", runs 3 and 6 stopped minutes before).
"""

from __future__ import annotations

import os
import re

import pytest

from storage import queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from storage.models import RunStatus
from trainer.supervise.processes import process_start_time

from .helpers import BROWSER_TIMEOUT_MS, PAGE_WAIT_S, tiny_config, wait_for
from .test_browser_ux import _selected_tab
from .test_dashboard_browser import CHROMIUM, NO_CHROMIUM, launch_browser, start_server

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]
LAPTOP = {"width": 1440, "height": 900}


@pytest.fixture(scope="module")
def server(tiny_model_path, module_database):
    yield from start_server("serve-page-says.log")


@pytest.fixture(scope="module")
def browser():
    yield from launch_browser()


def _page(browser):
    page = browser.new_page(viewport=LAPTOP)
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    return page


def _plant_sweep() -> tuple[int, list[int]]:
    """A 3-point sweep: member 1 running (this process stands in for its worker, so the scheduler leaves it alone and
    its one slot is taken), member 2 queued behind it, member 3 skipped by the probe (ended before it started)."""
    me = os.getpid()
    base = tiny_config(name="says")
    with get_sessionmaker().begin() as s:
        sweep = sweep_rows.create_sweep(
            s,
            "says",
            {"method": "grid", "settings": {"beta": [0, 0.01, 0.02]}},
            base.to_dict(),
            "heldout/correct",
            "max",
        )
        ids = []
        for index, beta in enumerate((0.0, 0.01, 0.02), 1):
            config = tiny_config(name=f"says-{index}", beta=beta)
            run = queries.create_run(s, config.name, config.to_dict(), 4, sweep_id=sweep.id, sweep_point={"beta": beta})
            ids.append(run.id)
        first, _, third = (queries.get_run(s, i) for i in ids)
        queries.worker_launched(s, first, me, process_start_time(me), "/tmp/page-says")
        queries.mark_running(s, first, me, "/tmp/page-says", process_start_time(me))
        queries.sweep_stopped(s, third, "skipped before training: the probe says the run would learn nothing (x)")
        return sweep.id, ids


def _stop(*run_ids: int) -> None:
    with get_sessionmaker().begin() as s:
        for run_id in run_ids:
            queries.finish_run(s, queries.get_run(s, run_id), RunStatus.STOPPED)


def test_open_in_monitor_shows_the_members_run_and_no_ended_run_to_wait_behind(server, browser):
    """The report's journey: the Monitor showed a queued member waiting behind a running one; both are stopped; the
    Sweeps tab opens another member in the Monitor, which says that member and its status, and waits behind no one."""
    url, _ = server
    sweep_id, (running, queued, skipped) = _plant_sweep()
    page = _page(browser)
    try:
        page.goto(f"{url}?tab=monitor&run={queued}")
        header = page.locator("#monitor-progress")
        wait_for(lambda: f"waiting behind run {running} (running)" in header.inner_text(), PAGE_WAIT_S, "the queue")
        assert f"(run {queued}) — queued" in header.inner_text()
        overlay = page.locator("#monitor-overlay input")
        overlay.click()
        page.get_by_role("option", name=re.compile(rf"^{skipped}: ")).click()
        page.keyboard.press("Escape")
        _stop(queued, running)  # as the Runs tab's Stop does: the queued one first, so no worker takes it
        page.get_by_role("tab", name="Sweeps").click()
        wait_for(lambda: _selected_tab(page) == "Sweeps", PAGE_WAIT_S, "the Sweeps tab")
        member = page.locator("#sweeps-member input")
        wait_for(lambda: member.input_value(), PAGE_WAIT_S, "a member picked")
        rows = page.locator("#sweeps-table .virtual-body [role=row]")
        wait_for(lambda: rows.count() == 3, PAGE_WAIT_S, "the members' rows")
        rows.nth(2).locator("[role=gridcell]").nth(2).click()  # the skipped member's point
        wait_for(lambda: member.input_value().startswith(f"{skipped}: "), PAGE_WAIT_S, "the member picked")
        page.click("#sweeps-monitor")
        wait_for(lambda: _selected_tab(page) == "Monitor", PAGE_WAIT_S, "the Monitor")
        text = wait_for(
            lambda: f"(run {skipped})" in header.inner_text() and header.inner_text(),
            PAGE_WAIT_S,
            "the member's run in the header",
        )
        assert re.search(rf"says-3\*?\*? \(run {skipped}\) — stopped", text), text
        assert "waiting behind" not in text and "queued" not in text
    finally:
        page.close()


# What the Sweep section said, every text it took in order (a MutationObserver: a probe of the tiny model takes
# seconds, and a poll of the page could miss a news between two looks)
RECORD = """(selector) => {
    const box = document.querySelector(selector);
    window.saidThere = [];
    new MutationObserver(() => {
        const text = box.innerText.trim();
        if (text && window.saidThere[window.saidThere.length - 1] !== text) window.saidThere.push(text);
    }).observe(box, {subtree: true, childList: true, characterData: true});
}"""


def test_launch_sweep_says_which_point_it_probes_of_how_many_and_what_each_found(server, browser):
    """The report: only a timer for 10 minutes while the sweep probed its 4 points. Now the section names the point
    probed, of how many, and each probe's finding as it finishes (top_p 0.01: every answer of a group the same, so
    that probe says the point would learn nothing)."""
    from app import actions

    from .test_browser_sweeps import ADVANCED, SETTINGS
    from .test_dashboard_browser import _set

    url, _ = server
    page = _page(browser)
    try:
        page.goto(url)
        page.wait_for_selector("#launch", state="attached")
        _set(page, "name", "says-grid")
        for name, value in SETTINGS.items():
            _set(page, name, value)
        page.get_by_text("Advanced", exact=True).first.click()
        for name, value in ADVANCED.items():
            _set(page, name, value)
        page.get_by_text("Sweep: one run per point of some settings").click()
        page.locator("#sweep-settings textarea").fill("top_p = 1.0, 0.01")
        page.evaluate(RECORD, "#sweep-status")
        page.click("#launch-sweep")
        wait_for(lambda: _selected_tab(page) == "Sweeps", 300, "the Sweeps tab after the launch")  # a hang bound
        said = [re.sub(r"^[^A-Za-z]+", "", text) for text in page.evaluate("window.saidThere")]
    finally:
        page.close()
    (swept,) = [s for s in actions.sweeps() if s.name == "says-grid"]
    actions.stop_sweep(swept.id)  # its one trained member is not this test's: no worker trains it meanwhile
    first = "point 1 of 2 (top_p=1): ok, answers scored apart on"
    second = "point 2 of 2 (top_p=0.01): would learn nothing, answers scored apart on 0% of prompts; skipped"
    probing = [text for text in said if text.startswith("Probing:")]
    assert probing[0].startswith("Probing: point 1 of 2 (top_p=1).") and first not in probing[0], said
    assert probing[-1].startswith("Probing: point 2 of 2 (top_p=0.01).") and first in probing[-1], said
    assert said.index(probing[-1]) > said.index(probing[0])
    assert said[-1].startswith("Launched:") and "2 members, 1 skipped by the probe" in said[-1], said
    assert first in said[-1] and second in said[-1] and said[-1].index(first) < said[-1].index(second)
