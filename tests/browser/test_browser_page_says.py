"""What the page says while things start (issue 59), in Chromium against `grpo-studio serve`: one server and one
browser for the module, its rows planted from here as the launcher, the worker and the scheduler write them.

- Sweeps → "Open in Monitor" on a member: the Monitor shows that member's run and its status now, and a "waiting
  behind run N" names only a run that is still live (the report: the address said run=7 while the page still said
  "(run 6) — queued … waiting behind run 3 (running)", runs 3 and 6 stopped minutes before).
- Launch sweep: the section names the point probed, of how many, and what each probe found as it finishes (it showed
  only a timer for 10 minutes while 4 points were probed).
- Compare's Sample both: each side's phase (base, then tuned: loading, sampling, scoring) while it runs, the button
  disabled and a Cancel that stops it (it showed "processing | 812 s" for minutes, the button still pressable).
"""

from __future__ import annotations

import os
import re

import pytest

from storage import queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from storage.models import RunStatus
from tests.browser.harness import CHROMIUM, NO_CHROMIUM, selected_tab, start_server
from tests.helpers import BROWSER_TIMEOUT_MS, FIXTURES, PAGE_WAIT_S, tiny_config, wait_for
from trainer.supervise.processes import process_start_time

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]
LAPTOP = {"width": 1440, "height": 900}


@pytest.fixture(scope="module")
def server(tiny_model_path, module_database):
    yield from start_server("serve-page-says.log")


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


# The Monitor's picked run and its header at every frame, as (picker text, header text) each time either changes: a
# stale header lasts as long as a round trip to the server, which a look every 0.2 s from here can miss
WATCH_MONITOR = """() => {
    window.monitorSeen = [];
    const look = () => {
        const run = document.querySelector('#monitor-run input');
        const header = document.querySelector('#monitor-progress');
        const now = [run ? run.value : '', header ? header.innerText.trim() : ''];
        const last = window.monitorSeen[window.monitorSeen.length - 1];
        if (!last || last[0] !== now[0] || last[1] !== now[1]) window.monitorSeen.push(now);
        requestAnimationFrame(look);
    };
    look();
}"""


def test_open_in_monitor_shows_the_members_run_and_no_ended_run_to_wait_behind(server, browser):
    """The report's journey: the Monitor showed a queued member waiting behind a running one; both are stopped; the
    Sweeps tab opens another member in the Monitor, which says that member and its status, and waits behind no one."""
    url, _ = server
    sweep_id, (running, queued, skipped) = _plant_sweep()
    page = _page(browser)
    try:
        page.goto(f"{url}?tab=monitor&run={queued}")
        header = page.locator("#monitor-progress")
        said = wait_for(
            lambda: (lambda text: f"waiting behind run {running} (running)" in text and text)(header.inner_text()),
            PAGE_WAIT_S,
            "the queue",
        )
        assert f"(run {queued}) — queued" in said
        overlay = page.locator("#monitor-overlay input")
        overlay.click()
        page.get_by_role("option", name=re.compile(rf"^{skipped}: ")).click()
        page.keyboard.press("Escape")
        _stop(queued, running)  # as the Runs tab's Stop does: the queued one first, so no worker takes it
        page.get_by_role("tab", name="Sweeps").click()
        wait_for(lambda: selected_tab(page) == "Sweeps", PAGE_WAIT_S, "the Sweeps tab")
        member = page.locator("#sweeps-member input")
        wait_for(lambda: member.input_value(), PAGE_WAIT_S, "a member picked")
        rows = page.locator("#sweeps-table .virtual-body [role=row]")
        wait_for(lambda: rows.count() == 3, PAGE_WAIT_S, "the members' rows")
        rows.nth(2).locator("[role=gridcell]").nth(2).click()  # the skipped member's point
        wait_for(lambda: member.input_value().startswith(f"{skipped}: "), PAGE_WAIT_S, "the member picked")
        page.evaluate(WATCH_MONITOR)
        page.click("#sweeps-monitor")
        wait_for(lambda: selected_tab(page) == "Monitor", PAGE_WAIT_S, "the Monitor")
        text = wait_for(
            lambda: f"(run {skipped})" in header.inner_text() and header.inner_text(),
            PAGE_WAIT_S,
            "the member's run in the header",
        )
        assert re.search(rf"says-3\*?\*? \(run {skipped}\) — stopped", text), text
        assert "waiting behind" not in text and "queued" not in text
        # every frame since the click: once the picker names the member, the header names no other run beyond the
        # frame in which the picker changed (the page's change handler runs after it has drawn the new value) and
        # says it is reading the member until the poll answers (the report's page: the address said run=7 and, 33 s
        # on, the header "(run 6) — queued … waiting behind run 3 (running)")
        seen = page.evaluate("window.monitorSeen")
        after = [header for run, header in seen if run.startswith(f"{skipped}: ")]
        assert after, seen
        stale = [i for i, header in enumerate(after) if f"(run {skipped})" not in header]
        assert stale and stale == list(range(len(stale))), seen  # the first frames only, before the poll answered
        assert after[stale[-1]] == f"Reading run {skipped}…", seen
        assert all(f"run {queued}" not in header for header in after[1:]), seen
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
    from tests.browser.harness import fill_sweep_form

    url, _ = server
    page = _page(browser)
    try:
        page.goto(url)
        page.wait_for_selector("#launch", state="attached")
        fill_sweep_form(page, "says-grid", "top_p = 1.0, 0.01")
        page.evaluate(RECORD, "#sweep-status")
        page.click("#launch-sweep")
        wait_for(lambda: selected_tab(page) == "Sweeps", 300, "the Sweeps tab after the launch")  # a hang bound
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


@pytest.fixture(scope="module")
def compared(module_database, tiny_model_path):
    """A finished run of the tiny model with a saved adapter (LoRA at rank 2 on two projections, random weights:
    the tuned side differs from the base without training), whose rewards are correctness and the gated one
    (tests/fixtures/gated_reward.py). Yields the run's id; the gate is closed."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from storage.db import data_dir
    from tests.fixtures.gated_reward import gate

    output = data_dir() / "runs" / "says-compare"
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_path),
        # init_lora_weights=False: random B as well as A, so the adapter changes the logits
        LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    model.save_pretrained(output / "adapter")
    rewards = ["correctness", f"{FIXTURES / 'gated_reward.py'}:gated"]
    config = tiny_config(name="says-compare", reward_funcs=rewards, reward_weights=[])
    with get_sessionmaker().begin() as s:
        run = queries.create_run(s, config.name, config.to_dict(), 4)
        queries.set_output_dir(s, run, str(output))
        queries.finish_run(s, run, RunStatus.COMPLETED)
        run_id = run.id
    gate().unlink(missing_ok=True)
    yield run_id
    gate().touch()  # no call left waiting


def test_sample_both_says_each_sides_phase_is_disabled_while_it_runs_and_cancels(server, browser, compared):
    """Held in the base side's scoring by the gated reward: the page says the base is scoring and the tuned side
    waits, Sample both cannot be pressed and Cancel can; Cancel stops it there (the tuned side is never sampled).
    Then, the gate open, a whole comparison says each side's phases in order and ends with both sides drawn."""
    from tests.fixtures.gated_reward import gate

    url, _ = server
    page = _page(browser)
    try:
        page.goto(f"{url}?tab=compare&run={compared}")
        wait_for(lambda: selected_tab(page) == "Compare", PAGE_WAIT_S, "the Compare tab")
        adapter = page.locator("#compare-adapter input")
        wait_for(lambda: adapter.input_value() == "final", PAGE_WAIT_S, "the final adapter")
        page.locator("#compare-prompt textarea").fill("What is 482 + 317?")
        n = page.locator("#compare-n input[type=number]")
        n.fill("2")  # two completions a side: enough to be a group, few for the tiny model's CPU time
        n.press("Enter")
        go, cancel, progress = (
            page.locator("#compare-go"),
            page.locator("#compare-cancel"),
            page.locator("#compare-progress"),
        )
        wait_for(go.is_enabled, PAGE_WAIT_S, "Sample both to be pressable")
        assert cancel.is_disabled()
        page.evaluate(RECORD, "#compare-progress")
        go.click()

        def text() -> str:
            return re.sub(r"\s+", " ", progress.inner_text())

        wait_for(lambda: "Base: scoring (now)" in text(), PAGE_WAIT_S, "the base side scoring")
        assert "Tuned: adapter loaded; waiting for the base side (now)" in text()
        assert go.is_disabled() and cancel.is_enabled()
        cancel.click()
        wait_for(lambda: "Cancelling:" in progress.inner_text(), PAGE_WAIT_S, "the cancel heard")
        gate().touch()
        said = wait_for(
            lambda: "Cancelled:" in progress.inner_text() and progress.inner_text(), PAGE_WAIT_S, "the cancel"
        )
        assert "stopped during base: scoring;" in said, said
        assert go.is_enabled() and cancel.is_disabled()
        assert "gated=" not in page.locator("#compare-tuned").inner_text()  # no row: the tuned side never scored
        history = [re.sub(r"\s+", " ", text) for text in page.evaluate("window.saidThere")]
        assert not any("Tuned: sampling" in text for text in history), history

        page.evaluate(RECORD, "#compare-progress")
        go.click()
        wait_for(lambda: "Sampled:" in progress.inner_text(), 240, "both sides")  # a hang bound
        history = [re.sub(r"\s+", " ", text) for text in page.evaluate("window.saidThere")]
        base_sampling = _first(history, "Base: sampling 2 completions (now)")
        base_done = _first(history, "Base: done: 2 completions sampled and scored")
        tuned_sampling = _first(history, "Tuned: sampling 2 completions (now)")
        tuned_scoring = _first(history, "Tuned: scoring (now)")
        assert base_sampling < base_done <= tuned_sampling < tuned_scoring, history
        # the model is loaded already (by the cancelled comparison): the tuned side waits for the base from the start
        assert "Tuned: waiting for the base side" in history[base_sampling - 1], history
        assert go.is_enabled() and cancel.is_disabled()
        for side in ("base", "tuned"):
            assert "mean reward" in page.locator(f"#compare-{side}-summary").inner_text()
            assert len(re.findall(r"gated=0", page.locator(f"#compare-{side}").inner_text())) == 2
    finally:
        page.close()


def _first(history: list[str], said: str) -> int:
    """The index of the first text in ``history`` that holds ``said``."""
    found = [i for i, text in enumerate(history) if said in text]
    assert found, (said, history)
    return found[0]
