"""The dashboard in Chromium (issue 29) at a laptop's 1440x900 and a phone's 390x844: tables that scroll
sideways with readable columns, run pickers that show the name, a deep link's charts saying they are loading, charts
that explain a flat clip ratio and an empty KL chart, a std and a share on two axes, smoothing that leaves the
held-out curve and a faded raw line alone, no "best" answer in a tie, the Runs table's periodic held-out score,
Compare's prompt picker, aligned tables and one greedy row, verdicts as coloured words, empty states that say what to
do next, and a server log without a traceback at the end of it all.

One server on the session database (the shared 6-step run) and one more real run of the tiny model, trained once
for the module with beta 0 and a held-out curve (eval_steps 2); an empty database's server for the empty states.
Screenshots go to the test's tmp directory (``widths-shots``), named by item and width.
"""

from __future__ import annotations

import re
import time

import pytest

from app.web.page_script import PLOTLY_URL
from tests.browser.harness import (
    CHROMIUM,
    NO_CHROMIUM,
    SCREENSHOTS,
    TEXT_LINES,
    chart_points,
    look_at,
    selected_tab,
    set_field,
    start_server,
)
from tests.conftest import use_database
from tests.helpers import BROWSER_TIMEOUT_MS, PAGE_WAIT_S, create_run, run_row, tiny_config, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]

WIDTHS = {"laptop": (1440, 900), "phone": (390, 844)}
VERDICT_RED, VERDICT_GREEN = "rgb(185, 28, 28)", "rgb(21, 128, 61)"  # app/web/widgets/styles.py's "bad" and "ok"


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("widths-shots")


@pytest.fixture(scope="module")
def beta0_run(trained_run, session_database):
    """A second real run beside the shared one: beta 0 (no KL term), a held-out score every 2 steps, 4 steps."""
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.supervise.start import start_worker

    use_database(session_database)
    config = tiny_config(name="round2-beta0", beta=0.0, eval_steps=2, max_steps=4, save_steps=2)
    run_id = create_run(config)
    with get_sessionmaker().begin() as s:
        start_worker(s, queries.get_run(s, run_id))
    wait_for(lambda: run_row(run_id).status in ("completed", "failed", "stopped"), 600, "the beta-0 run to end")
    assert run_row(run_id).status == "completed", run_row(run_id).error
    return run_id


@pytest.fixture(scope="module")
def server(beta0_run, session_database):
    use_database(session_database)
    yield from start_server("serve-widths.log")


@pytest.fixture
def open_at(browser, server):
    """Open the dashboard at a width (``laptop`` or ``phone``) and an address query; closes its pages afterwards."""
    pages = []

    def open_page(width: str, query: str = ""):
        w, h = WIDTHS[width]
        page = browser.new_page(viewport={"width": w, "height": h})
        page.set_default_timeout(BROWSER_TIMEOUT_MS)
        pages.append(page)
        page.goto(server[0] + (f"?{query}" if query else ""))
        page.wait_for_selector("#launch", state="attached")
        return page

    yield open_page
    for page in pages:
        page.close()


def _metric(run_id: int, key: str) -> list[float]:
    from storage import queries
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as s:
        return [p.value for p in queries.metric_series(s, run_id, key)]


def _trace(page, chart: str, meta: str) -> dict | None:
    """A monitor chart's trace by its meta (the metric key), as Plotly holds it: y values, axis, colour, opacity."""
    script = """([sel, meta]) => {
        const plot = document.querySelector(sel);
        const t = plot && (plot._fullData || []).find(t => t.meta === meta);
        return t ? {y: Array.from(t.y), yaxis: t.yaxis, color: t.line.color, opacity: t.opacity, dash: t.line.dash} : null;
    }"""
    look_at(page, f"#chart-{chart}")
    return page.evaluate(script, [f"#chart-{chart} .js-plotly-plot", meta])


def _annotations(page, chart: str) -> list[str]:
    script = "(sel) => (document.querySelector(sel)?._fullLayout?.annotations || []).map(a => a.text)"
    look_at(page, f"#chart-{chart}")
    return page.evaluate(script, f"#chart-{chart} .js-plotly-plot")


def _monitor(open_at, width: str, run_id: int):
    page = open_at(width, f"tab=monitor&run={run_id}")
    wait_for(lambda: selected_tab(page) == "Monitor", PAGE_WAIT_S, "the Monitor tab from the address")
    wait_for(lambda: chart_points(page, "reward") > 0, PAGE_WAIT_S, "the reward chart")
    return page


@pytest.mark.parametrize("width", list(WIDTHS))
def test_tables_scroll_sideways_with_readable_columns_and_pickers_show_the_name(open_at, beta0_run, shots, width):
    """Item 1 (and 9's "completed" wrapping mid-word): every header of the Runs table on one line, the table scrolling
    inside its box on a phone with its first columns pinned, and the Monitor's picker showing the whole run label."""
    page = open_at(width, "tab=runs")
    wait_for(lambda: selected_tab(page) == "Runs", PAGE_WAIT_S, "the Runs tab")
    table = page.locator("#runs-table")
    wait_for(lambda: "round2-beta0" in table.inner_text(), PAGE_WAIT_S, "the run in the table")
    for header in ("id", "status", "step", "duration"):
        cell = table.locator("th[role=columnheader]", has_text=header).first
        assert cell.evaluate(TEXT_LINES) == 1, (width, header)
    status = table.locator(".body-cell", has_text="completed").first
    assert status.evaluate(TEXT_LINES) == 1, width  # "completed" never breaks mid-word
    if width == "laptop":  # issue 36 item 15: a step count and a data set name each on one line at 1440 px
        for text in ("/", "builtin:arithmetic"):
            cell = table.locator(".body-cell", has_text=text).first
            assert cell.evaluate(TEXT_LINES) == 1, text
        # and the beta-0 run's KL column is the KL its worker measured (TRL logs none at beta 0), as stored
        row = table.locator(".virtual-body [role=row]", has_text="round2-beta0").first
        cells = [c.strip() for c in row.locator(".body-cell").all_inner_texts()]
        measured = _metric(beta0_run, "kl_measured")
        assert _metric(beta0_run, "kl") == []
        shown = cells[5]  # the KL column (app/web/pages/runs.py COLUMNS)
        assert (float(shown) == pytest.approx(round(measured[-1], 4), abs=1e-4)) if measured else shown == "", cells
    scroller = table.locator("table").first.evaluate_handle(
        "t => { let e = t.parentElement; while (e && e.scrollWidth <= e.clientWidth) e = e.parentElement; return e; }"
    )
    if width == "phone":  # too wide for the phone: it scrolls, and the id column stays in view
        assert scroller.evaluate("e => e !== null && e.scrollWidth > e.clientWidth + 100")
        id_header = table.locator("th[role=columnheader]", has_text="id").first
        id_cell = table.locator(".virtual-body [role=row] .body-cell.first-column").first
        status = table.locator(".virtual-body [role=row] .body-cell", has_text="completed").first
        before = id_header.bounding_box()["x"], id_cell.bounding_box()["x"], status.bounding_box()["x"]
        scroller.evaluate("e => { e.scrollLeft = 400; }")
        time.sleep(0.3)
        after = id_header.bounding_box()["x"], id_cell.bounding_box()["x"], status.bounding_box()["x"]
        assert abs(after[0] - before[0]) < 2 and abs(after[1] - before[1]) < 2, "the id column scrolled away"
        assert after[2] < before[2] - 100, "the table did not scroll"
    page.screenshot(path=str(shots / f"item1-runs-{width}.png"), full_page=True)

    page = _monitor(open_at, width, beta0_run)
    picker = page.locator("#monitor-run input")
    assert picker.input_value() == f"{beta0_run}: round2-beta0 (completed)"
    assert picker.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the run label is cut"
    table = page.locator("#completions-table")
    wait_for(lambda: table.locator("[role=row]").count() > 1, PAGE_WAIT_S, "completion rows")
    for header in ("step", "group", "mark", "total", "advantage"):  # the best/worst marks' column is named
        assert table.locator("th[role=columnheader]", has_text=header).first.evaluate(TEXT_LINES) == 1, header
    page.screenshot(path=str(shots / f"item1-monitor-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", list(WIDTHS))
def test_a_deep_link_says_its_charts_are_loading_until_they_are_drawn(open_at, browser, server, beta0_run, width):
    """Item 2: until Plotly has drawn a chart its box says "Loading chart…" (here the Plotly bundle is held back until
    the words were seen, as a loaded machine delays it); then the chart, and no loading words."""
    w, h = WIDTHS[width]
    context = browser.new_context(viewport={"width": w, "height": h})  # a cache of its own: the bundle is fetched
    page = context.new_page()
    try:
        held = []  # the requests for the Plotly bundle, held until the loading words were seen
        page.route(re.compile(".*" + re.escape(PLOTLY_URL)), lambda route: held.append(route))
        page.goto(server[0] + f"?tab=monitor&run={beta0_run}")
        page.locator("#monitor-progress").filter(has_text="round2-beta0").wait_for()
        before = "e => getComputedStyle(e, '::before').content"
        assert page.locator("#chart-reward").evaluate(before) == '"Loading chart…"'
        assert page.locator("#chart-kl").evaluate(before) == '"Loading chart…"'
        # page.wait_for_timeout, not a sleep: the sync API hands a route over only while inside one of its calls
        wait_for(lambda: page.wait_for_timeout(100) or held, PAGE_WAIT_S, "the page to ask for the Plotly bundle")
        for route in held:
            route.continue_()
        page.unroute(re.compile(".*" + re.escape(PLOTLY_URL)))
        wait_for(lambda: chart_points(page, "reward") > 0, 90, "the reward chart")
        assert page.locator("#chart-reward").evaluate(before) == "none"
    finally:
        context.close()


@pytest.mark.parametrize("width", list(WIDTHS))
def test_charts_explain_themselves(open_at, beta0_run, shots, width):
    """Item 7 on a real beta-0 run with num_iterations 1: the flat clip chart and the empty KL chart say why; the std
    and the share of zero-std groups have an axis each; smoothing 0.8 leaves the held-out curve as measured and the
    raw reward behind the smoothed one, faded; the reward chart's series differ in colour."""
    page = _monitor(open_at, width, beta0_run)
    wait_for(lambda: _annotations(page, "kl"), PAGE_WAIT_S, "the KL chart's words")
    assert any("beta = 0" in a and "no KL term" in a for a in _annotations(page, "kl"))
    page.locator("#monitor-more button.label-wrap").first.click()  # the clip chart is under "More charts"
    wait_for(lambda: _annotations(page, "clip_ratio"), PAGE_WAIT_S, "the clip chart, once More charts is open")
    assert any("num_iterations = 1" in a and "exactly 1" in a for a in _annotations(page, "clip_ratio"))
    std, share = _trace(page, "reward_std", "reward_std"), _trace(page, "reward_std", "frac_reward_zero_std")
    assert std["yaxis"] == "y" and share["yaxis"] == "y2"
    titles = page.evaluate(
        "() => { const l = document.querySelector('#chart-reward_std .js-plotly-plot')._fullLayout;"
        " return [l.yaxis.title.text, l.yaxis2.title.text]; }"
    )
    assert titles == ["std (points)", "share of groups"]
    colours = page.evaluate(
        "() => document.querySelector('#chart-reward .js-plotly-plot')._fullData.map(t => t.line.color)"
    )
    assert len(colours) >= 3 and len(set(colours)) == len(colours), colours
    # issue 36 item 15: a series on the very line of an earlier one says which it lies under, and only then
    drawn = page.evaluate(
        "() => document.querySelector('#chart-reward .js-plotly-plot')._fullData"
        ".filter(t => t.showlegend !== false).map(t => [t.name, Array.from(t.y)])"
    )
    seen = []
    for name, ys in drawn:
        twin = next((earlier for earlier, values in seen if values == ys), None)
        assert ("(under " in name) == (twin is not None), (name, twin)
        seen.append((name, ys))

    smoothing = page.locator("#monitor-smoothing input[type=number]")
    smoothing.fill("0.8")
    smoothing.press("Enter")
    wait_for(lambda: _trace(page, "reward", "reward (raw)"), PAGE_WAIT_S, "the faded raw reward line")
    heldout = _metric(beta0_run, "heldout/correct")
    assert len(heldout) >= 2 and _trace(page, "heldout", "heldout/correct")["y"] == pytest.approx(heldout)
    assert _trace(page, "heldout", "heldout/correct (raw)") is None  # nothing smoothed, nothing left behind
    raw, smoothed = _trace(page, "reward", "reward (raw)"), _trace(page, "reward", "reward")
    rewards = _metric(beta0_run, "reward")
    assert raw["y"] == pytest.approx(rewards) and raw["opacity"] == pytest.approx(0.25)
    assert raw["color"] == smoothed["color"] and smoothed["y"] != pytest.approx(rewards)
    page.screenshot(path=str(shots / f"item7-monitor-{width}.png"), full_page=True)


def test_a_tie_has_no_best_answer(open_at, beta0_run):
    """Item 8: in the completions table a group marks a best and a worst answer only when its totals differ; a group
    whose answers all scored alike is a tie (checked on every step the real run sampled)."""
    page = _monitor(open_at, "laptop", beta0_run)
    table = page.locator("#completions-table")
    rows = table.locator(".virtual-body [role=row]")  # the data rows (not the hidden rows that size the columns)
    wait_for(lambda: rows.count() >= 4, PAGE_WAIT_S, "completion rows")
    groups: dict[str, list[tuple[str, float]]] = {}
    for i in range(rows.count()):
        cells = rows.nth(i).locator(".body-cell").all_inner_texts()
        groups.setdefault(cells[1].strip(), []).append((cells[2].strip(), float(cells[7])))
    assert groups
    for group, answers in groups.items():
        totals = [t for _, t in answers]
        marks = [m for m, _ in answers]
        if max(totals) == min(totals):
            assert set(marks) == {"= tie"}, (group, answers)
        else:
            assert all((m == "▲ best") == (t == max(totals)) for m, t in answers), (group, answers)
            assert all((m == "▼ worst") == (t == min(totals)) for m, t in answers), (group, answers)


def test_the_runs_table_shows_the_periodic_heldout_score(open_at, beta0_run):
    """Item 9: a run without an evaluation job shows the held-out score it logged while training."""
    page = open_at("laptop", "tab=runs")
    last = _metric(beta0_run, "heldout/correct")[-1]
    row = page.locator("#runs-table .virtual-body [role=row]", has_text="round2-beta0").first
    wait_for(lambda: row.count() > 0, PAGE_WAIT_S, "the run's row")
    assert f"{last:.1%} (while training)" in row.inner_text()


@pytest.mark.parametrize("width", list(WIDTHS))
def test_compare_lets_go_of_a_picked_prompt_lines_up_and_samples_greedy_once(open_at, beta0_run, shots, width):
    """Item 10: typing a prompt clears the held-out picker and its reference answer; greedy with N = 4 gives one row a side; the two tables
    start at the same height on a laptop (the explanation sits under both)."""
    page = open_at(width, f"tab=compare&run={beta0_run}")
    wait_for(lambda: selected_tab(page) == "Compare", PAGE_WAIT_S, "the Compare tab")
    wait_for(lambda: page.locator("#compare-adapter input").input_value() == "final", PAGE_WAIT_S, "the final adapter")
    page.locator("#compare-example input").click()
    page.locator("[role=option]").first.click()
    prompt = page.locator("#compare-prompt textarea")
    wait_for(lambda: prompt.input_value().strip(), PAGE_WAIT_S, "the picked prompt")
    assert page.locator("#compare-example input").input_value()
    prompt.fill("What is 12 + 30?")
    prompt.press("End")
    prompt.type(" ")
    wait_for(lambda: page.locator("#compare-example input").input_value() == "", PAGE_WAIT_S, "the picker to let go")
    reference = page.locator("#compare-reference input, #compare-reference textarea").first
    wait_for(lambda: reference.input_value() == "", PAGE_WAIT_S, "the picked problem's reference answer to go")
    assert prompt.input_value() == "What is 12 + 30? "
    page.locator("#compare-greedy input, label:has-text('Greedy decoding') input").first.check()
    page.click("#compare-go")
    for side in ("base", "tuned"):
        summary = page.locator(f"#compare-{side}-summary")
        wait_for(lambda s=summary: "mean reward" in s.inner_text(), 240, f"the {side} column")
        # the typed prompt let go of the picked problem's answer: correctness is not scored against it, nor against any
        assert re.search(r"format \d/1 · correct n/a \(no reference answer\)", summary.inner_text())
        assert page.locator(f"#compare-{side} .virtual-body [role=row]").count() == 1
    assert "Greedy decoding: one answer a side" in page.locator("#compare-why").inner_text()
    # issue 36 item 15: every header on one line at both widths (the table scrolls sideways on a phone), and the
    # Run picker shows its whole label
    for side in ("base", "tuned"):
        for header in ("#", "rewards", "total"):
            cell = page.locator(f"#compare-{side} th[role=columnheader]", has_text=header).first
            assert cell.evaluate(TEXT_LINES) == 1, (side, header)
    assert page.locator("#compare-run input").evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the label is cut"
    if width == "laptop":
        base, tuned = (page.locator(f"#compare-{s}").bounding_box()["y"] for s in ("base", "tuned"))
        assert abs(base - tuned) < 2, (base, tuned)
    page.screenshot(path=str(shots / f"item10-compare-{width}.png"), full_page=True)
    SCREENSHOTS.mkdir(exist_ok=True)  # docs/dashboard.md shows these (copied to docs/screens/)
    page.screenshot(path=str(SCREENSHOTS / f"compare-{width}.png"), full_page=False)


@pytest.mark.parametrize("width", list(WIDTHS))
def test_verdicts_are_coloured_words(open_at, shots, width):
    """Item 12: Validate's verdict says "Not valid" in red and "Valid" in green; the emoji beside it only decorates
    (hidden from screen readers)."""
    page = open_at(width)
    set_field(page, "num_generations", 1)
    page.click("#validate")
    bad = page.locator("#new-run-status .verdict-bad")
    bad.wait_for()
    assert bad.inner_text().strip().endswith("Not valid:")
    assert bad.evaluate("e => getComputedStyle(e).color") == VERDICT_RED
    assert bad.locator(".verdict-emoji").inner_text() == "❌"  # beside the word, not instead of it
    page.screenshot(path=str(shots / f"item12-invalid-{width}.png"), full_page=False)
    set_field(page, "num_generations", 4)
    page.click("#validate")
    good = page.locator("#new-run-status .verdict-ok")
    good.wait_for()
    assert good.inner_text().strip().endswith("Valid:")
    assert good.evaluate("e => getComputedStyle(e).color") == VERDICT_GREEN


@pytest.fixture(scope="module")
def empty_server(studio_home, session_database):
    """A second dashboard, on a database with no run at all."""
    use_database(f"sqlite:///{studio_home / 'widths-empty.db'}")
    try:
        yield from start_server("serve-widths-empty.log")
    finally:
        use_database(session_database)


@pytest.mark.parametrize("width", list(WIDTHS))
def test_empty_states_say_what_to_do_next(browser, empty_server, shots, width):
    """Item 13: with no runs, the Runs tab says to launch the demo (and its run id box is empty, not 0), and the
    Monitor says so in place of 11 empty chart boxes."""
    w, h = WIDTHS[width]
    page = browser.new_page(viewport={"width": w, "height": h})
    try:
        page.goto(empty_server[0] + "?tab=runs")
        page.wait_for_selector("#launch", state="attached")
        wait_for(lambda: selected_tab(page) == "Runs", PAGE_WAIT_S, "the Runs tab")
        page.locator("#runs-empty").filter(has_text="No runs yet").wait_for()
        assert "Tiny offline demo" in page.locator("#runs-empty").inner_text()
        assert page.locator("#runs-run-id input").input_value() == ""
        page.screenshot(path=str(shots / f"item13-runs-{width}.png"), full_page=True)
        page.get_by_role("tab", name="Monitor").click()
        page.locator("#monitor-progress").filter(has_text="No runs yet").wait_for()
        wait_for(lambda: not page.locator("#chart-reward").is_visible(), PAGE_WAIT_S, "the empty chart boxes to go")
        assert not any(page.locator(f"#chart-{name}").is_visible() for name in ("kl", "loss", "step_time"))
        page.screenshot(path=str(shots / f"item13-monitor-{width}.png"), full_page=True)
        # issue 36 item 14: Compare says what is missing, and there is nothing to press
        page.get_by_role("tab", name="Compare").click()
        page.locator("#compare-ready").filter(has_text="Nothing to sample yet").wait_for()
        assert page.locator("#compare-go").is_disabled()
        # and New run starts here: the demo in the form and in the preset box, Launch on the first screen
        page.get_by_role("tab", name="New run").click()
        page.locator("#start-here").filter(has_text="Start here").wait_for()
        assert page.locator("#preset input").input_value() == "Tiny offline demo (CPU)"
        launch = page.locator("#launch").bounding_box()
        assert launch["y"] + launch["height"] <= h, launch
        page.screenshot(path=str(shots / f"item14-new-run-{width}.png"), full_page=False)
        SCREENSHOTS.mkdir(exist_ok=True)  # docs/dashboard.md shows these (copied to docs/screens/)
        page.screenshot(path=str(SCREENSHOTS / f"new-run-{width}.png"), full_page=False)
    finally:
        page.close()


def test_the_server_log_has_no_traceback_after_the_journey(open_at, server):
    """Item 11, last in the module: the preset picker left without a choice and cleared by hand (Gradio's dropdown
    sends "input" on every blur: apply_preset(None) raised KeyError, an empty value a gradio.exceptions.Error, each a
    traceback in the log), and the server's log of everything above is clean."""
    page = open_at("laptop")
    box = page.locator("#preset input")
    box.click()  # into the picker and out again, nothing chosen: before the fix, apply_preset(None)'s KeyError
    page.locator("#validate").click()
    time.sleep(1.0)
    box.click()
    page.locator('[role=option][aria-label^="Tiny offline demo"]').click()
    time.sleep(1.0)
    box.fill("")
    box.press("Tab")
    time.sleep(1.0)
    box.click()
    box.press("Escape")
    page.locator("#validate").click()
    page.locator("#new-run-status").filter(has_text="Valid").wait_for()
    time.sleep(2.0)
    from tests.browser.harness import ARTIFACTS

    log = (ARTIFACTS / "serve-widths.log").read_text()
    assert "Traceback" not in log and "gradio.exceptions.Error" not in log, log[-3000:]
