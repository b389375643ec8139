"""Accessibility in real Chromium (issue 59): axe-core on every page of the dashboard at a laptop's 1440x900 and a
phone's 390x844, failing on any serious or critical violation, and the main journey (New run → Launch → Monitor →
open a completion → Compare) done with the keyboard alone.

axe-core is the registry's file kept in the test tree (tests/browser/vendor/axe.min.js, MPL-2.0), injected into the page
from disk: nothing is fetched and nothing on the machine changes. The pages are shown with content, not empty: a
finished run planted with metrics, completions, a log and a final adapter (so Compare's "Sample both" is enabled,
where axe judges its colours), and a finished sweep of two members. One server and one browser for the module; each
width loads the page once and visits the five tabs by their buttons. Every serious and critical violation is
collected before the test fails, named by rule with the elements it hit; test-artifacts/axe-<width>.json keeps all of
them, minor and moderate included (the counts in docs/dashboard.md come from these files).
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.browser.harness import ARTIFACTS, CHROMIUM, NO_CHROMIUM, chart_points, start_server
from tests.helpers import BROWSER_TIMEOUT_MS, PAGE_WAIT_S, run_row, tiny_config, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
AXE_VERSION = "4.14.1"
WIDTHS = {"laptop": (1440, 900), "phone": (390, 844)}
FAILING = ("serious", "critical")
VERDICT_RED, VERDICT_GREEN = "rgb(185, 28, 28)", "rgb(21, 128, 61)"  # app/web/widgets/styles.py's "bad" and "ok"
# What each tab shows once its content has arrived: axe judges the page as a user finds it, not Gradio's skeleton.
TABS = ("New run", "Runs", "Monitor", "Compare", "Sweeps")


@pytest.fixture(scope="module")
def planted(module_database, tmp_path_factory):
    """A completed run with two steps of metrics, four completions, a log line and a final adapter on disk, and a
    finished sweep of two completed members; returns the run's id."""
    from storage import queries
    from storage import sweeps as sweep_rows
    from storage.db import get_sessionmaker
    from storage.models import RunStatus, SweepState

    adapter_root = tmp_path_factory.mktemp("a11y-run")
    (adapter_root / "adapter").mkdir()
    (adapter_root / "adapter" / "adapter_config.json").write_text("{}")  # enough for Compare to offer "final"
    now = datetime.now(UTC)
    config = tiny_config(name="a11y-run", max_steps=2)
    with get_sessionmaker().begin() as session:
        sweep = sweep_rows.create_sweep(session, "a11y-sweep", {"method": "grid"}, config.to_dict(), "reward", "max")
        sweep.state = SweepState.FINISHED.value
        runs = [queries.create_run(session, "a11y-run", config.to_dict(), 2)]
        for i, beta in enumerate((0.0, 0.04)):
            member = config.to_dict() | {"beta": beta, "name": f"a11y-sweep-{i + 1}"}
            runs.append(
                queries.create_run(session, member["name"], member, 2, sweep_id=sweep.id, sweep_point={"beta": beta})
            )
        for run in runs:
            run.status, run.current_step = RunStatus.COMPLETED, 2
            run.started_at, run.finished_at = now - timedelta(minutes=2), now
            rows = []
            for step in (1, 2):
                logs = {"reward": 0.25 * step, "reward_std": 0.3, "kl": 0.01 * step, "loss": 0.1, "learning_rate": 1e-4}
                rows += queries.metric_rows(run.id, step, logs, time.time() - 60 + step)
            queries.add_metric_rows(session, rows)
        runs[0].output_dir = str(adapter_root)
        queries.add_sample_rows(
            session,
            [
                {
                    "run_id": runs[0].id,
                    "step": 2,
                    "group_index": group,
                    "prompt": f"What is {group} + 2?",
                    # one long line: the detail's code block scrolled sideways, out of the keyboard's reach
                    "completion": f"<answer>{group + 2 + i}</answer> " + "+".join(["1"] * 150),
                    "rewards": {"correctness": float(i == 0)},
                    "total_reward": float(i == 0),
                    "advantage": 0.7 * (1 if i == 0 else -1),
                    "reference_answer": str(group + 2),
                }
                for group in (0, 1)
                for i in (0, 1)
            ],
        )
        queries.add_log(session, runs[0].id, "step 2 of 2")
        return runs[0].id


@pytest.fixture(scope="module")
def server(planted, tiny_model_path, module_database):
    """The dashboard on this module's database (the keyboard journey launches a real run of the tiny model)."""
    yield from start_server("serve-a11y.log")


def _selected_tab(page) -> str:
    return page.locator("[role=tab][aria-selected=true]").first.inner_text().strip()


def _shown(page, tab: str, run_id: int) -> None:
    """Wait until ``tab``'s content has arrived (its charts drawn, its tables filled)."""
    if tab == "New run":
        page.locator("#launch").wait_for()  # visible, the form drawn above it
    elif tab == "Runs":
        wait_for(lambda: "a11y-run" in page.locator("#runs-table").inner_text(), PAGE_WAIT_S, "the runs table")
    elif tab == "Monitor":
        wait_for(lambda: chart_points(page, "reward") == 2, PAGE_WAIT_S, "the reward chart")
        wait_for(lambda: "What is" in page.locator("#completions-table").inner_text(), PAGE_WAIT_S, "completions")
    elif tab == "Compare":
        wait_for(lambda: page.locator("#compare-run input").input_value().startswith(f"{run_id}: "), PAGE_WAIT_S, "run")
        page.locator("#compare-prompt textarea").fill("What is 2 + 2?")  # a prompt enables Sample both
        wait_for(lambda: page.locator("#compare-go").is_enabled(), PAGE_WAIT_S, "Sample both to be enabled")
    elif tab == "Sweeps":
        wait_for(lambda: "completed" in page.locator("#sweeps-table").inner_text(), PAGE_WAIT_S, "its members")


# Opens every closed section (a Gradio accordion) shown on the page, so that axe judges what they hold as well.
OPEN_SECTIONS = """() => {
    const closed = [...document.querySelectorAll("button.label-wrap")].filter(b => b.offsetParent && !b.classList.contains("open"));
    closed.forEach(b => b.click());
    return closed.length;
}"""
# Whether a CSS transition is under way: axe reads colours as they are drawn, and a button just enabled is still
# fading from its disabled shade (Sample both read #f4a77d, between the two).
TRANSITIONS = (
    "() => document.getAnimations().filter(a => a instanceof CSSTransition && a.playState === 'running').length"
)


def axe_violations(page) -> list[dict]:
    """axe-core's violations on the page as it is now (its default rules), each with its rule, impact and the
    elements it hit."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    assert page.evaluate("() => axe.version") == AXE_VERSION
    script = """async () => {
        const result = await axe.run(document, {resultTypes: ["violations"]});
        return result.violations.map(v => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => ({target: n.target.join(" "), html: n.html.slice(0, 160), summary: n.failureSummary})),
        }));
    }"""
    return page.evaluate(script)


def counts(found: dict[str, list[dict]]) -> dict[str, dict[str, int]]:
    """Nodes per impact and rule over every page: {"serious": {"color-contrast": 12}, ...}."""
    out: dict[str, dict[str, int]] = {}
    for violations in found.values():
        for v in violations:
            by_rule = out.setdefault(v["impact"], {})
            by_rule[v["id"]] = by_rule.get(v["id"], 0) + len(v["nodes"])
    return out


@pytest.mark.parametrize("width", list(WIDTHS))
def test_no_serious_or_critical_axe_violation_on_any_page(browser, server, planted, width):
    """Every tab, with content, at this width: axe-core finds nothing serious or critical."""
    w, h = WIDTHS[width]
    page = browser.new_page(viewport={"width": w, "height": h})
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    found: dict[str, list[dict]] = {}
    try:
        page.goto(f"{server[0]}?run={planted}")
        page.wait_for_selector("#launch", state="attached")
        for tab in TABS:
            if _selected_tab(page) != tab:
                page.get_by_role("tab", name=tab).click()
                wait_for(lambda t=tab: _selected_tab(page) == t, PAGE_WAIT_S, f"the {tab} tab")
            _shown(page, tab, planted)
            page.evaluate(OPEN_SECTIONS)
            if tab == "Monitor":  # a completion read in full: its detail's blocks are shown too
                page.locator("#completions-table [data-testid=cell-0-4]").click()
                page.locator("#completion-detail pre").first.wait_for()
            wait_for(lambda: page.evaluate(TRANSITIONS) == 0, PAGE_WAIT_S, "the page's transitions to end")
            found[tab] = axe_violations(page)
    finally:
        page.close()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"axe-{width}.json").write_text(json.dumps({"counts": counts(found), "pages": found}, indent=1))
    failing = [
        f"{tab}: {v['impact']} {v['id']} ({v['help']}) on {[n['target'] for n in v['nodes']][:6]}"
        for tab, violations in found.items()
        for v in violations
        if v["impact"] in FAILING
    ]
    assert failing == [], "\n".join(failing)


FOCUSED = "(sel) => !!document.activeElement && document.activeElement.matches(sel)"


def tab_to(page, selector: str, back: bool = False, limit: int = 400) -> None:
    """Press Tab (Shift+Tab when ``back``) until the focused element matches ``selector``, as a keyboard user walks
    the page; fails naming where the focus went instead."""
    for _ in range(limit):
        if page.evaluate(FOCUSED, selector):
            return
        page.keyboard.press("Shift+Tab" if back else "Tab")
    where = page.evaluate("() => document.activeElement?.outerHTML.slice(0, 160)")
    pytest.fail(f"{selector} not reached by {limit} presses of {'Shift+Tab' if back else 'Tab'}; at {where}")


def _detail_row(page) -> tuple[str, str]:
    """The prompt and the completion the completion detail shows (its two code blocks)."""
    blocks = page.locator("#completion-detail pre")
    return tuple(" ".join(blocks.nth(i).inner_text().split()) for i in (0, 1))


def _cell(page, row: int, column: int) -> str:
    """A completions table cell's text, its white space as one space (the table shows a completion's lines run
    together, the detail as written)."""
    return " ".join(page.locator(f"#completions-table [data-testid=cell-{row}-{column}]").inner_text().split())


# a hang bound, not a speed target: a real two-step run of the tiny model and a sample of both sides
@pytest.mark.timeout(600)
def test_the_main_journey_by_keyboard_alone(browser, server, planted):
    """New run → Launch → Monitor → open a completion row → Compare → Sample both, with the keyboard alone: the
    tabs answer the arrow keys, a completion row opens with Enter and with Space, and no element is clicked."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        page.goto(server[0])
        page.wait_for_selector("#launch")
        # New run: a name and two steps typed into the form, then Launch pressed with Enter
        tab_to(page, "#field-name :is(input, textarea)")
        page.keyboard.press("Control+a")
        page.keyboard.type("keyboard-journey")
        tab_to(page, "#field-max_steps input")
        page.keyboard.press("Control+a")
        page.keyboard.type("2")
        tab_to(page, "#launch")
        page.keyboard.press("Enter")
        status = page.locator("#new-run-status")
        status.filter(has_text="(keyboard-journey)").wait_for(state="attached")
        run_id = int(re.search(r"Run (\d+)", status.inner_text()).group(1))
        assert run_row(run_id).config["max_steps"] == 2  # what was typed is what runs

        # Monitor, opened by the launch: its completions reached by Tab, a row opened with Enter, the next with Space
        wait_for(lambda: _selected_tab(page) == "Monitor", PAGE_WAIT_S, "the launched run's Monitor")
        wait_for(lambda: run_row(run_id).status == "completed", 300, "the two-step run to complete")
        grid = page.locator("#completions-table")
        wait_for(lambda: grid.locator("[role=row]").count() >= 3, PAGE_WAIT_S, "its completion rows")
        tab_to(page, "#completions-table [role=gridcell]")
        page.keyboard.press("Enter")
        wait_for(lambda: _detail_row(page)[0] == _cell(page, 0, 3), PAGE_WAIT_S, "the first row's detail")
        assert _detail_row(page)[1] == _cell(page, 0, 4)
        page.keyboard.press("ArrowDown")
        page.keyboard.press(" ")
        wait_for(lambda: _detail_row(page)[1] == _cell(page, 1, 4), PAGE_WAIT_S, "the second row's detail")

        # Compare: back to the tabs, one arrow key to the right; the run picked and sampled by the keyboard
        tab_to(page, "button[role=tab][aria-selected=true]", back=True)
        page.keyboard.press("ArrowRight")
        wait_for(lambda: _selected_tab(page) == "Compare", PAGE_WAIT_S, "Compare opened by the arrow key")
        assert page.evaluate(FOCUSED, "button[role=tab][aria-selected=true]")  # the focus moved with it
        tab_to(page, "#compare-run input")

        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        def picked() -> bool:
            """Type the run's label into the picker and press Enter; the run list refreshes every 3 s, so the run
            just launched may not be offered yet: then the picker keeps the page's first run and this says so."""
            page.keyboard.press("Control+a")
            page.keyboard.type(f"{run_id}: ")
            page.keyboard.press("Enter")
            page.keyboard.press("Escape")
            try:
                page.wait_for_function(
                    "([sel, want]) => document.querySelector(sel).value.startsWith(want)",
                    arg=["#compare-run input", f"{run_id}: "],
                    timeout=2_000,
                )
            except PlaywrightTimeout:
                return False
            return True

        wait_for(picked, PAGE_WAIT_S, "the launched run picked in Compare", interval=1)
        wait_for(lambda: page.locator("#compare-adapter input").input_value() == "final", PAGE_WAIT_S, "its adapter")
        tab_to(page, "#compare-prompt textarea")
        page.keyboard.type("What is 12 + 30?")
        tab_to(page, "#compare-go")
        page.keyboard.press("Enter")
        for side in ("base", "tuned"):
            summary = page.locator(f"#compare-{side}-summary")
            wait_for(lambda s=summary: "mean reward" in s.inner_text(), 180, f"the {side} column")
        # and the arrow keys go round the tabs: End to the last, Right from there to the first
        tab_to(page, "button[role=tab][aria-selected=true]", back=True)
        page.keyboard.press("End")
        wait_for(lambda: _selected_tab(page) == "Sweeps", PAGE_WAIT_S, "Sweeps by End")
        page.keyboard.press("ArrowRight")
        wait_for(lambda: _selected_tab(page) == "New run", PAGE_WAIT_S, "New run by ArrowRight from the last tab")
    finally:
        page.close()


# How a verdict's mark is drawn: its own text's size (0: the emoji is not drawn), its box, its fill, and what its two
# pseudo-elements write.
MARK = """(el) => {
    const style = getComputedStyle(el), before = getComputedStyle(el, "::before"), after = getComputedStyle(el, "::after");
    return {font: style.fontSize, width: el.getBoundingClientRect().width, fill: style.backgroundColor,
            before: before.content, after: after.content, after_border: after.borderRightWidth,
            after_transform: after.transform};
}"""


def test_valid_and_not_valid_marks_are_drawn_without_an_emoji_font(browser, server):
    """Validate's "Valid:" and "Not valid:" carry a mark drawn by CSS in the verdict's colour (a tick, a cross), the
    emoji beside the word kept in the page but not drawn: Chromium without an emoji font drew an empty box there."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        page.goto(server[0])
        page.wait_for_selector("#launch")
        status = page.locator("#new-run-status")
        page.click("#validate")
        status.filter(has_text="Valid: the config is valid.").wait_for()
        tick = status.locator(".verdict-ok .verdict-emoji")
        assert tick.inner_text() == "✅"  # still in the page, for copying; aria-hidden
        drawn = tick.evaluate(MARK)
        assert drawn["font"] == "0px" and drawn["width"] == pytest.approx(17.6, abs=0.5)  # 1.1rem at 16 px
        assert drawn["fill"] == VERDICT_GREEN
        assert (drawn["after"], drawn["after_border"], drawn["before"]) == ('""', "2px", "none")  # a tick of borders
        assert drawn["after_transform"] != "none"

        box = page.locator("#field-num_generations input")
        box.fill("1")
        box.press("Tab")
        page.click("#validate")
        status.filter(has_text="Not valid:").wait_for()
        cross = status.locator(".verdict-bad .verdict-emoji")
        drawn = cross.evaluate(MARK)
        assert drawn["font"] == "0px" and drawn["fill"] == VERDICT_RED
        assert (drawn["before"], drawn["after"]) == ('""', '""')  # two bars, no character
    finally:
        page.close()
