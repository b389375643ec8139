"""Every control does what it says, for the run the user meant (issue 36), in headless Chromium against a real
`grpo-studio serve` on the session database (the shared finished run): a prompt pasted over a picked one in Compare
is not scored against the picked problem's reference; the Monitor's learning panel follows a launched run; a deep
link to a run or a tab that is not here says so.

One server and one browser for the module; each test opens its own page. tests/web/test_controls_logic.py holds the
same rules as plain functions.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.browser.harness import CHROMIUM, NO_CHROMIUM, look_at, selected_tab, set_field, start_server
from tests.conftest import use_database
from tests.helpers import BROWSER_TIMEOUT_MS, PAGE_WAIT_S, run_row, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]

LAPTOP = {"width": 1440, "height": 900}
# what a paste does to a text box: the whole text in, as one input event (no key events), as Chromium fires it
PASTE = """([selector, text]) => {
    const box = document.querySelector(selector);
    box.focus();
    box.setRangeText(text, 0, box.value.length, "end");
    box.dispatchEvent(new InputEvent("input", {bubbles: true, inputType: "insertFromPaste", data: text}));
}"""


@pytest.fixture(scope="module")
def server(trained_run, session_database):
    use_database(session_database)
    yield from start_server("serve-controls.log")


@pytest.fixture
def open_at(browser, server):
    """A fresh browser context (one per test: its own tabs) opened at ``?query``; closed afterwards."""
    contexts = []

    def open_page(query: str = ""):
        context = browser.new_context(viewport=LAPTOP)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(BROWSER_TIMEOUT_MS)
        page.goto(server[0] + (f"?{query}" if query else ""))
        page.wait_for_selector("#launch", state="attached")
        return page

    yield open_page
    for context in contexts:
        context.close()


def _screenshot_live(page, run_id: int) -> None:
    """The live run's Monitor at both widths, once its reward chart has points (docs/dashboard.md shows them, copied
    to docs/screens/): this page at the laptop's, a phone's page on the same address beside it."""
    from tests.browser.harness import SCREENSHOTS, chart_points

    wait_for(lambda: chart_points(page, "reward") > 0, 300, "the live run's first points")  # a hang bound
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "monitor-laptop.png"), full_page=False)
    phone = page.context.new_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    try:
        phone.goto(page.url)
        wait_for(lambda: chart_points(phone, "reward") > 0, PAGE_WAIT_S, "the phone's reward chart")
        phone.screenshot(path=str(SCREENSHOTS / "monitor-phone.png"), full_page=False)
    finally:
        phone.close()


def _query(page) -> dict[str, str]:
    return dict(re.findall(r"[?&]([^=&]+)=([^&]*)", page.evaluate("window.location.search")))


def test_compare_scores_a_pasted_prompt_without_the_picked_problems_reference(open_at, trained_run):
    """Item 1: pick a held-out problem (its prompt and reference fill in), paste another prompt over it: the picker
    and the reference let go, and Sample both scores the pasted prompt with no reference (correct n/a), not against
    the picked problem's answer."""
    run_id = trained_run[0]
    page = open_at(f"tab=compare&run={run_id}")
    wait_for(lambda: selected_tab(page) == "Compare", PAGE_WAIT_S, "the Compare tab")
    wait_for(lambda: page.locator("#compare-adapter input").input_value() == "final", PAGE_WAIT_S, "the final adapter")
    page.locator("#compare-example input").click()
    page.locator("[role=option]").first.click()
    prompt = page.locator("#compare-prompt textarea")
    reference = page.locator("#compare-reference input, #compare-reference textarea").first
    wait_for(
        lambda: prompt.input_value().strip() and reference.input_value().strip(), PAGE_WAIT_S, "the picked problem"
    )
    picked_answer = reference.input_value().strip()

    page.evaluate(PASTE, ["#compare-prompt textarea", "What is 20 + 10?"])
    wait_for(lambda: reference.input_value() == "", PAGE_WAIT_S, "the picked problem's reference to go")
    wait_for(lambda: page.locator("#compare-example input").input_value() == "", PAGE_WAIT_S, "the picker to let go")
    assert prompt.input_value() == "What is 20 + 10?"

    page.locator("#compare-greedy input, label:has-text('Greedy decoding') input").first.check()
    page.click("#compare-go")
    for side in ("base", "tuned"):
        summary = page.locator(f"#compare-{side}-summary")
        wait_for(lambda s=summary: "mean reward" in s.inner_text(), 240, f"the {side} column")
        assert "correct n/a (no reference answer)" in summary.inner_text(), summary.inner_text()
        assert "correctness=n/a" in page.locator(f"#compare-{side}").inner_text()
    assert picked_answer  # it was there to be wrongly kept

    # a reference typed by hand after the paste counts: the same prompt, scored against it
    reference.fill("30")
    reference.press("Tab")
    page.click("#compare-go")
    summary = page.locator("#compare-base-summary")
    wait_for(lambda: re.search(r"correct \d/1", summary.inner_text()), 240, "the base column against 30")


def test_the_learning_panel_of_a_launched_run_follows_it(open_at):
    """Item 6: the learning panel of a run picked before it sampled fills in as the run samples, without a press of
    Refresh."""
    page = open_at()
    set_field(page, "name", "launched-here")
    set_field(page, "max_steps", 8)
    page.click("#launch")
    status = page.locator("#new-run-status").filter(has_text="(launched-here)")
    # attached, not visible: the launch opens the Monitor, and the answer may land on the New run tab behind it
    status.wait_for(state="attached")
    run_id = int(re.search(r"Run (\d+)", status.inner_text()).group(1))
    # item 4: the launch leads to this run's Monitor in this browser tab, and the address says so
    wait_for(lambda: selected_tab(page) == "Monitor", PAGE_WAIT_S, "the launched run's Monitor")
    wait_for(
        lambda: page.locator("#monitor-run input").input_value().startswith(f"{run_id}: "),
        PAGE_WAIT_S,
        "its run picked",
    )
    wait_for(lambda: _query(page) == {"tab": "monitor", "run": str(run_id)}, PAGE_WAIT_S, "the address")
    assert len(page.context.pages) == 1
    _screenshot_live(page, run_id)

    summary = page.locator("#learning-summary")
    # drawn when the run was picked: queued, no samples yet (unless the worker was quicker than the picker)
    wait_for(
        lambda: "Training prompts:" not in summary.inner_text() or run_row(run_id).current_step,
        PAGE_WAIT_S,
        "the panel",
    )
    # hang bound, not a speed target: a loaded 2-core machine needs a while for a worker's first steps
    wait_for(lambda: "Training prompts:" in summary.inner_text(), 300, "the learning map to follow the run")
    wait_for(lambda: run_row(run_id).status == "completed", 300, "the run to end")


@pytest.mark.parametrize(
    "query, said",
    [
        ("tab=monitor&run=999", "there is no run 999"),
        ("tab=monitor&run=abc", "is not a run id"),
        ("tab=nonsense", "there is no tab"),
    ],
)
def test_a_deep_link_to_what_is_not_here_says_so_and_keeps_the_link(open_at, query, said):
    """Item 10: what is missing is said, and no other run stands in for a missing one. (The address still loses a
    missing run's id once the page has landed: not fixed here.)"""
    page = open_at(query)
    notice = page.locator("#landing-notice")
    wait_for(lambda: said in notice.inner_text(), PAGE_WAIT_S, "the notice")
    assert "Not found" in notice.inner_text()
    wanted = "Monitor" if "monitor" in query else "New run"
    wait_for(lambda: selected_tab(page) == wanted, PAGE_WAIT_S, f"the {wanted} tab")
    if "run=" in query:
        assert page.locator("#monitor-run input").input_value() == ""
        # the header is drawn by the Monitor's first poll, which may still be on its way when the tab opens (its
        # hidden loading timer, "2.6s", is all the box's text until then)
        header = page.locator("#monitor-progress")
        wait_for(lambda: "Pick a run" in header.inner_text(), PAGE_WAIT_S, "the Monitor's header asking for a run")


# what a box's bottom edge is, in the page's own pixels (a chart's box: its plot and legend)
BOTTOM = "(sel) => { const r = document.querySelector(sel).getBoundingClientRect(); return r.bottom + window.scrollY; }"
FIRST_CHARTS = ("reward", "heldout", "kl", "reward_std")


@pytest.mark.parametrize("width", ["laptop", "phone"])
def test_the_monitors_first_screen_holds_the_state_the_alerts_and_four_charts(browser, server, trained_run, width):
    """Items 13 and 12: at 1440 x 900 the run's state, its alerts and the reward, held-out, KL and std charts are all
    on the first screen; the other charts wait closed under "More charts", undrawn until it opens; a phone stacks
    the four at its full width with nothing wider than the screen. Item 15: the overlay does not offer the run shown."""
    run_id = trained_run[0]
    viewport = LAPTOP if width == "laptop" else {"width": 390, "height": 844}
    context = browser.new_context(viewport=viewport)
    try:
        page = context.new_page()
        page.set_default_timeout(BROWSER_TIMEOUT_MS)
        page.goto(f"{server[0]}?tab=monitor&run={run_id}")
        page.wait_for_selector("#launch", state="attached")
        wait_for(lambda: selected_tab(page) == "Monitor", PAGE_WAIT_S, "the Monitor tab")
        drawn = "(sel) => !!document.querySelector(sel + ' .js-plotly-plot')"
        # each drawn once on screen: a phone stacks them, and a person scrolls down to the last
        wait_for(
            lambda: all(look_at(page, f"#chart-{c}") or page.evaluate(drawn, f"#chart-{c}") for c in FIRST_CHARTS),
            PAGE_WAIT_S,
            "the first charts",
        )
        assert not page.evaluate(drawn, "#chart-loss") and not page.evaluate(drawn, "#chart-entropy")
        if width == "laptop":
            bottoms = {c: page.evaluate(BOTTOM, f"#chart-{c}") for c in FIRST_CHARTS}
            bottoms |= {box: page.evaluate(BOTTOM, f"#monitor-{box}") for box in ("progress", "health")}
            assert max(bottoms.values()) <= viewport["height"], bottoms
        else:
            widths = [page.locator(f"#chart-{c}").bounding_box()["width"] for c in FIRST_CHARTS]
            assert min(widths) >= 0.8 * viewport["width"], widths
            assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"]
        page.locator("#monitor-more button.label-wrap").first.click()
        # drawn once opened and on screen, as a person scrolls to it
        wait_for(
            lambda: look_at(page, "#chart-loss") or page.evaluate(drawn, "#chart-loss"),
            PAGE_WAIT_S,
            "More charts drawn once opened",
        )
        # the Run picker offers the run shown; the overlay picker the other runs (the session's), never that one
        page.locator("#monitor-run input").click()
        options = page.locator("[role=option]")
        label = re.compile(rf"(^|\s){run_id}: ")  # the picked option's text starts with a check mark
        wait_for(lambda: any(label.search(t) for t in options.all_inner_texts()), PAGE_WAIT_S, "the run offered")
        page.keyboard.press("Escape")
        page.locator("#monitor-overlay input").click()
        time.sleep(1.0)  # the list opens at once; nothing to wait for when no other run is there
        labels = options.all_inner_texts()
        assert not any(label.search(text) for text in labels), labels
        page.keyboard.press("Escape")
    finally:
        context.close()
