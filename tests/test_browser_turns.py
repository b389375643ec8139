"""A tool run turn by turn in real Chromium (issue 42 item 2): a run with the calculator, its samples' turns and its
tool metrics planted in a database, and a plain run beside it. The Monitor of the tool run shows each completion's
call and answer as text (a tool answer holding a link, an image and Markdown builds nothing) and draws the tool
chart; the plain run's Monitor has no tool chart. tests/test_tool_turns.py checks the same without a browser."""

from __future__ import annotations

import time

import pytest

from .helpers import tiny_config, wait_for
from .test_browser_markup import _built, _page, payload
from .test_browser_ux import _selected_tab
from .test_dashboard_browser import CHROMIUM, NO_CHROMIUM, launch_browser, start_server

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]


def _turns(i: int) -> list[dict]:
    return [
        {"role": "assistant", "content": "Let me add."},
        {"role": "tool_call", "content": "", "name": "calculator", "arguments": {"expression": f"12+{i}"}},
        {"role": "tool", "content": payload(f"answer{i}") if i else "12", "name": "calculator"},
        {"role": "assistant", "content": f"<answer>{12 + i}</answer>"},
    ]


@pytest.fixture(scope="module")
def planted(module_database):
    """A finished tool run with turns and tool metrics at steps 1-2, and a finished plain run."""
    from storage import queries
    from storage.db import get_sessionmaker
    from storage.models import RunStatus

    ids = []
    with get_sessionmaker().begin() as session:
        for name, tools in (("calc-run", ["builtin:calculator"]), ("plain-run", [])):
            config = tiny_config(name=name, tools=tools, reward_funcs=["correctness"]).to_dict()
            run = queries.create_run(session, name, config, 2)
            run.status, run.current_step = RunStatus.COMPLETED, 2
            rows = []
            for step in (1, 2):
                logs = {"reward": 0.5 * step}
                if tools:
                    logs |= {"tools/call_frequency": 1.0, "tools/error_rate": 0.25 * step}
                rows += queries.metric_rows(run.id, step, logs, time.time() + step)
            queries.add_metric_rows(session, rows)
            queries.add_sample_rows(
                session,
                [
                    {
                        "run_id": run.id,
                        "step": 2,
                        "group_index": 0,
                        "prompt": "What is 12 + 3?",
                        "completion": "<answer>15</answer>",
                        "rewards": {"correctness": 2.0 * (i == 0)},
                        "total_reward": 2.0 * (i == 0),
                        "advantage": 0.75 if i == 0 else -0.75,
                        "reference_answer": "15",
                        "turns": _turns(i) if tools else None,
                    }
                    for i in (0, 1)
                ],
            )
            ids.append(run.id)
    return ids


@pytest.fixture(scope="module")
def server(planted, module_database):
    yield from start_server("serve-turns.log")


@pytest.fixture(scope="module")
def browser():
    yield from launch_browser()


def _monitor(page, server, run_id: int, name: str) -> None:
    page.goto(f"{server[0]}?tab=monitor&run={run_id}")
    wait_for(lambda: _selected_tab(page) == "Monitor", 30, "the Monitor tab")
    page.locator("#monitor-progress").filter(has_text=f"(run {run_id})").wait_for(timeout=120_000)
    page.locator("#monitor-more button.label-wrap").first.click()  # the tool chart is under "More charts"
    wait_for(lambda: page.locator("#chart-entropy .js-plotly-plot, #chart-loss .js-plotly-plot").count(), 60, name)


def test_a_tool_runs_monitor_shows_its_turns_and_tool_chart_and_a_plain_runs_has_none(browser, server, planted):
    calc, plain = planted
    requests: list[str] = []
    page = _page(browser, requests)
    try:
        _monitor(page, server, calc, "the tool run's More charts")
        legend = page.locator("#chart-tools .legendtext")
        wait_for(lambda: legend.count() >= 2, 60, "the tool chart's legend")
        assert set(legend.all_text_contents()) == {"calls per completion", "error answers"}
        table = page.locator("#completions-table")
        wait_for(lambda: table.locator("[role=row]").count() > 2, 60, "completion rows")
        first = table.locator("[data-testid=cell-0-4]").inner_text()
        assert "→ calculator(expression='12+0')" in first and "← 12" in first, first
        table.locator("[data-testid=cell-1-4]").click()
        detail = page.locator("#completion-detail")
        detail.filter(has_text="reference answer").wait_for()
        assert "← answer1 <a id=pwn-answer1" in detail.locator("pre").nth(1).inner_text()
        time.sleep(2 * 2.0)  # two more Monitor ticks redraw what they poll
        assert _built(page) == []

        _monitor(page, server, plain, "the plain run's More charts")
        time.sleep(2 * 2.0)
        assert not page.locator("#chart-tools").is_visible()  # no tool chart, not an empty one
        assert page.locator("#chart-entropy").is_visible()
    finally:
        page.close()
