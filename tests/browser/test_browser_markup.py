"""User, data and model text in real Chromium (issue 35 item 1): a run's name, its fork's name, its error, model path
and log lines, a metric key, a reward name, a prompt, a completion holding three backticks and a reference answer,
each holding a link, an image, Markdown and math, are planted straight into a database; the Monitor (opened on the
fork, so both names reach the chart legends), its completion detail and learning panel, and the Runs page with its
Clone message are shown. No element built from a payload may exist, and no request may leave the dashboard's origin
(every request the page makes is recorded)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.browser.harness import (
    CHROMIUM,
    NO_CHROMIUM,
    built,
    payload,
    recording_page,
    selected_tab,
    start_server,
)
from tests.helpers import PAGE_WAIT_S, tiny_config, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]


@pytest.fixture(scope="module")
def planted(module_database):
    """A finished parent run and its finished fork, every user-written field holding a payload."""
    from storage import queries
    from storage.db import get_sessionmaker
    from storage.models import RunStatus

    config = tiny_config(name=payload("name"), reward_funcs=["correctness"]).to_dict()
    now = datetime.now(UTC)
    with get_sessionmaker().begin() as session:
        parent = queries.create_run(session, payload("name"), config, 2)
        fork = queries.create_fork(session, parent, 1, payload("fork"), config)
        for run in (parent, fork):
            run.status, run.current_step = RunStatus.FAILED, 2
            run.started_at, run.finished_at = now - timedelta(minutes=2), now
            run.error = "Traceback\n" + payload("error")
            run.backend = payload("backend")
            rows = []
            for step in (1, 2):
                logs = {"reward": 0.5 * step, f"rewards/{payload('reward-key')}/mean": 0.1, payload("key"): 1.0}
                rows += queries.metric_rows(run.id, step, logs, time.time() + step)
            queries.add_metric_rows(session, rows)
            samples = [
                {
                    "run_id": run.id,
                    "step": 2,
                    "group_index": group,
                    "prompt": payload("prompt"),
                    "completion": f"```\n</code></pre>{payload('completion')}\n```\nafter the fence {payload('tail')}",
                    "rewards": {payload("reward"): float(i)},
                    "total_reward": float(i),
                    "advantage": 0.7 * (1 if i else -1),
                    "reference_answer": "`" + payload("reference"),
                }
                for group in (0, 1)
                for i in (0, 1)
            ]
            queries.add_sample_rows(session, samples)
            queries.add_log(session, run.id, payload("log"))
        ids = parent.id, fork.id
    return ids


@pytest.fixture(scope="module")
def server(planted, module_database):
    yield from start_server("serve-markup.log")


def test_planted_markup_builds_nothing_and_calls_no_other_host(browser, server, planted):
    parent, fork = planted
    origin = server[0].rstrip("/")
    requests: list[str] = []
    page = recording_page(browser, requests)
    try:
        page.goto(f"{server[0]}?tab=monitor&run={fork}")
        wait_for(lambda: selected_tab(page) == "Monitor", PAGE_WAIT_S, "the Monitor tab")
        header = page.locator("#monitor-progress")
        header.filter(has_text=f"(run {fork})").wait_for(timeout=120_000)  # a loaded machine takes its time
        assert payload("fork") in header.inner_text()  # shown as written, the payload's text is all there
        assert "https://elsewhere.invalid/auto-error" in header.inner_text()
        legend = page.locator("#chart-reward .legendtext")
        wait_for(lambda: legend.count() >= 2, PAGE_WAIT_S, "the reward chart's legend, parent and fork")
        names = legend.all_text_contents()
        assert any(n.startswith(f"{fork}: fork <a id=pwn-fork") for n in names), names
        assert any(n.endswith("· " + payload("reward-key")) for n in names), names  # a reward's name as its key has it
        # the other metrics' list and the log wait under closed headings, as a user finds them: opened
        for section in ("#monitor-more", "#monitor-log-section"):
            page.locator(f"{section} button.label-wrap").first.click()
        other = page.locator("#monitor-other-list")
        wait_for(lambda: "pwn-key" in other.inner_text(), PAGE_WAIT_S, "the other metrics' list")
        log = page.locator("#monitor-log textarea")
        wait_for(lambda: "pwn-log" in log.input_value(), PAGE_WAIT_S, "the log line")
        table = page.locator("#completions-table")
        wait_for(lambda: table.locator("[role=row]").count() > 1, PAGE_WAIT_S, "completion rows")
        table.locator("[data-testid=cell-0-4]").click()  # the first row's completion
        detail = page.locator("#completion-detail")
        detail.filter(has_text="reference answer").wait_for()
        blocks = detail.locator("pre")
        assert blocks.count() == 2  # prompt and completion, the completion's own fences inside its block
        assert "after the fence tail" in blocks.nth(1).inner_text()
        assert "</code></pre>" in blocks.nth(1).inner_text()
        assert detail.locator("code").last.inner_text() == "`" + payload("reference")
        # the planted prompt is seen once: the map draws it as a row's label (as text), the summary only counts it
        panel = page.locator("#learning-panel")
        wait_for(lambda: "prompt <a id=pwn-prompt" in panel.inner_text(), 120, "the learning map")  # a hang bound
        time.sleep(2 * 2.0)  # two more Monitor ticks redraw what they poll
        assert built(page) == []

        page.close()  # a fresh page for the Runs tab (the Monitor's page may have a navigation of its own in flight)
        page = recording_page(browser, requests)
        page.goto(f"{server[0]}?tab=runs")
        wait_for(lambda: selected_tab(page) == "Runs", PAGE_WAIT_S, "the Runs tab")
        row = page.locator("#runs-table .virtual-body [role=row]", has_text="pwn-fork").first
        wait_for(lambda: row.count() > 0, PAGE_WAIT_S, "the fork's row")
        page.locator("#runs-run-id input").fill(str(parent))
        page.locator("#runs-clone").click(no_wait_after=True)
        told = page.locator("#new-run-status").filter(has_text="Cloned run")  # Clone opens the New run tab
        told.wait_for(timeout=120_000)
        assert payload("name") + "-copy" in told.inner_text()
        assert built(page) == []
    finally:
        page.close()
    outside = [url for url in requests if not url.startswith((origin, "data:", "blob:"))]
    assert outside == [], outside
