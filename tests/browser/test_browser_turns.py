"""A tool run turn by turn in real Chromium (issue 42 item 2).

Planted: a run with the calculator, its samples' turns and its tool metrics in a database, and a plain run beside
it. The Monitor of the tool run shows each completion's call and answer as text (a tool answer holding a link, an
image and Markdown builds nothing) and draws the tool chart; the plain run's Monitor has no tool chart.
tests/tools/test_tool_turns.py checks the same without a browser.

Trained, end to end: the served dashboard (started with --allow-custom-rewards) launches two runs through its API,
which its scheduler trains in detached workers on builtin:tiny-tools: the calculator demo's preset with the built-in
calculator, and the same with an environment of the user's own whose tool hangs on subtraction and raises on a sum
over 1000. Both complete; ``/samples`` returns each rollout's turns, every call answered with the value of its
expression (computed here), the time limit's error or the raised one; the Monitor shows a real call and its answer.
The refusal of a user's environment by a dashboard started without the flag is in tests/web/test_api.py."""

from __future__ import annotations

import ast
import re
import time

import pytest

from tests.browser.harness import (
    CHROMIUM,
    NO_CHROMIUM,
    SCREENSHOTS,
    built,
    look_at,
    payload,
    recording_page,
    selected_tab,
    start_server,
)
from tests.helpers import PAGE_WAIT_S, tiny_config, wait_for

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
    yield from start_server("serve-turns.log", "--allow-custom-rewards")


# The user's environment: the tool the built-in model's warm-up calls (``calculator``), which hangs past the time
# limit on a subtraction and raises on a sum over 1000; other sums it answers.
ENVIRONMENT = """
import time


class Flaky:
    def reset(self, **row):
        return None

    def calculator(self, expression: str) -> str:
        \"\"\"Evaluate an arithmetic expression.

        Args:
            expression: The expression, for example "123 + 456".
        \"\"\"
        if "-" in expression:
            time.sleep(30)
        left, right = (int(part) for part in expression.split("+"))
        if left + right > 1000:
            raise OverflowError("over 1000")
        return str(left + right)
"""


def _value(expression: str) -> int | None:
    """What a sum or difference of two whole numbers the model wrote comes to (the test's own arithmetic, not the
    tool's); None for an expression of another shape (the warm-up's calls are all ``a + b`` or ``a - b``)."""
    found = re.fullmatch(r"\s*(\d+)\s*([+-])\s*(\d+)\s*", expression)
    if found is None:
        return None
    left, op, right = found.groups()
    return int(left) + int(right) if op == "+" else int(left) - int(right)


@pytest.fixture(scope="module")
def trained(server, tmp_path_factory):
    """The two runs, launched through the served API and trained by its scheduler; (api, calculator run, flaky run)."""
    import dataclasses

    import yaml

    from trainer.presets import PRESET_DIR, load_preset

    gradio_client = pytest.importorskip("gradio_client")
    api = gradio_client.Client(server[0], verbose=False)
    env_file = tmp_path_factory.mktemp("user-env") / "flaky.py"
    env_file.write_text(ENVIRONMENT)
    preset = load_preset(PRESET_DIR / "tiny-calculator.yaml")
    # two steps of 4 prompts x 8 answers: about one sampled answer in five calls (the warm-up's habit)
    short = dict(max_steps=2, per_device_train_batch_size=32, eval_steps=0, save_steps=100)
    configs = [
        dataclasses.replace(preset, name="served-calculator", **short),
        dataclasses.replace(
            preset, name="served-flaky", tools=[], environment=f"{env_file}:Flaky", tool_timeout_s=1.0, **short
        ),
    ]
    ids = []
    for config in configs:
        launched = api.predict(yaml.safe_dump(config.to_dict()), api_name="/launch")
        assert launched["problems"] == [] and launched["run_id"], launched
        ids.append(launched["run_id"])
    for run_id in ids:  # hang bounds: one at a time, a worker's start and two steps each
        wait_for(
            lambda r=run_id: api.predict(r, api_name="/run")["status"] in ("completed", "failed", "stopped"),
            600,
            f"run {run_id} to end",
            interval=1.0,
        )
    return api, *ids


def _all_turns(api, run_id: int) -> list[list[dict]]:
    turns = []
    for step in api.predict(run_id, None, 1000, api_name="/samples")["sampled_steps"]:
        turns += [s["turns"] for s in api.predict(run_id, step, 1000, api_name="/samples")["samples"]]
    return turns


def _calls(turns: list[dict]) -> list[tuple[dict, dict]]:
    """Each call of a rollout with the tool's answer to it."""
    return [(turn, after) for turn, after in zip(turns, turns[1:]) if turn["role"] == "tool_call"]


def test_a_served_run_with_the_built_in_calculator_stores_and_serves_its_turns(trained):
    api, calculator, _ = trained
    assert api.predict(calculator, api_name="/run")["status"] == "completed"
    rollouts = _all_turns(api, calculator)
    assert rollouts and all(r and r[-1]["role"] == "assistant" for r in rollouts)  # each ends with an answer
    calls = [c for r in rollouts for c in _calls(r)]
    assert calls, "no sampled answer called the calculator"
    checked = 0
    for call, answer in calls:
        assert call["name"] == "calculator" and answer["role"] == "tool" and answer["name"] == "calculator"
        value = _value(call["arguments"]["expression"])
        if value is None:  # another shape of expression: answered with a number or an error, never left unanswered
            assert re.fullmatch(r"-?[\d.]+|error: .+", answer["content"]), (call, answer)
            continue
        assert answer["content"] == str(value), (call, answer)
        checked += 1
    assert checked, calls
    metrics = api.predict(calculator, "tools/call_frequency", -1, api_name="/metrics")
    assert metrics["step"] == [1, 2] and 0 < sum(metrics["tools/call_frequency"])


def test_a_users_environment_whose_tool_hangs_or_raises_does_not_stop_the_run(trained):
    api, _, flaky = trained
    run = api.predict(flaky, api_name="/run")
    assert run["status"] == "completed" and run["step"] == 2, run
    calls = [c for r in _all_turns(api, flaky) for c in _calls(r)]
    assert calls, "no sampled answer called the environment's tool"
    errors = checked = 0
    for call, answer in calls:
        expression = call["arguments"]["expression"]
        value = _value(expression)
        if "-" in expression:  # whatever its shape: the tool sleeps before it reads it
            expected = "error: the tool took longer than 1 s"
        elif value is None:  # another shape: the tool's int() refuses it, or it answers; never left unanswered
            assert re.fullmatch(r"\d+|error: .+", answer["content"]), (call, answer)
            errors += answer["content"].startswith("error:")
            continue
        elif value > 1000:
            expected = "error: OverflowError: over 1000"
        else:
            expected = str(value)
        assert answer["content"] == expected, (call, answer)
        errors += expected.startswith("error:")
        checked += 1
    assert checked and errors, calls  # answered calls, and calls that hung or raised, in a run that completed
    # the worker's own count of error answers (TRL's failure_frequency misses the time limit's), per step
    rates = api.predict(flaky, "tools/error_rate", -1, api_name="/metrics")["tools/error_rate"]
    assert any(rate > 0 for rate in rates if rate is not None), rates


def test_the_monitor_shows_a_trained_runs_call_and_the_calculators_answer(browser, server, trained):
    api, calculator, _ = trained
    shown_step = api.predict(calculator, None, 1000, api_name="/samples")  # the newest step: the Monitor's table
    call, answer = next(c for s in shown_step["samples"] for c in _calls(s["turns"])[:1])
    requests: list[str] = []
    page = recording_page(browser, requests)
    try:
        _monitor(page, server, calculator, "the trained tool run's More charts")
        table = page.locator("#completions-table")
        shown = f"→ calculator(expression={call['arguments']['expression']!r})"
        wait_for(
            lambda: shown in table.inner_text() and f"← {answer['content']}" in table.inner_text(), PAGE_WAIT_S, shown
        )
        table.locator("[role=gridcell]", has_text=shown).first.click()  # the row's detail: the rollout in full
        detail = page.locator("#completion-detail")
        detail.filter(has_text=shown).wait_for()
        SCREENSHOTS.mkdir(exist_ok=True)  # docs/screens/monitor-tools-laptop.png is a copy (README's second demo)
        top, bottom = table.bounding_box(), detail.bounding_box()  # the table and the detail under it
        scrolled = page.evaluate("window.scrollY")  # the boxes are the viewport's; the clip is the page's
        clip = {"x": 0, "y": top["y"] + scrolled - 40, "width": page.viewport_size["width"]}
        clip["height"] = bottom["y"] + scrolled + bottom["height"] - clip["y"] + 10
        page.screenshot(path=str(SCREENSHOTS / "monitor-tools-laptop.png"), full_page=True, clip=clip)
    finally:
        page.close()


def test_compare_samples_both_sides_of_the_calculator_run_with_its_tools(browser, server, trained):
    """Compare on the trained tool run: both sides answer with the calculator, each call shown with the answer the
    calculator gives its expression (computed here), and the panel says the tools were used."""
    from trainer.tools.builtin import calculator as calculate

    _, calculator, _ = trained
    page = recording_page(browser, [])
    try:
        page.goto(f"{server[0]}?tab=compare&run={calculator}")
        wait_for(lambda: selected_tab(page) == "Compare", PAGE_WAIT_S, "the Compare tab")
        wait_for(
            lambda: page.locator("#compare-adapter input").input_value() == "final", PAGE_WAIT_S, "the final adapter"
        )
        page.locator("#compare-prompt textarea").fill("What is 482 + 317?")
        reference = page.locator("#compare-reference input, #compare-reference textarea").first
        reference.fill("799")
        reference.press("Tab")
        n = page.locator("#compare-n input[type=number]")  # 16 a side, so that calls are drawn (one in five)
        n.fill("16")
        n.press("Enter")
        page.click("#compare-go")
        why = page.locator("#compare-why")
        wait_for(lambda: "offered this run's tools" in why.inner_text(), 240, "the two sides and their note")
        lines = [
            line for side in ("base", "tuned") for line in page.locator(f"#compare-{side}").inner_text().splitlines()
        ]
        # a table's text: its cells split by tabs, rows and a cell's own lines by newlines
        calls = [
            (line.split("\t")[-1], after.split("\t")[0])
            for line, after in zip(lines, lines[1:])
            if "→ calculator(" in line
        ]
        assert calls, "neither side called the calculator in 32 sampled answers"
        for line, after in calls:
            called = re.fullmatch(r"→ calculator\(expression=(.*)\)", line.strip())
            assert called, (line, after, lines)
            expression = ast.literal_eval(called.group(1))
            try:
                expected = calculate(expression)
            except (ValueError, ArithmeticError):
                assert after.strip().startswith("← error:"), (line, after)
            else:
                assert after.strip() == f"← {expected}", (line, after)
        for side in ("base", "tuned"):
            assert re.search(r"correct \d+/16", page.locator(f"#compare-{side}-summary").inner_text())
    finally:
        page.close()


def _monitor(page, server, run_id: int, name: str) -> None:
    page.goto(f"{server[0]}?tab=monitor&run={run_id}")
    wait_for(lambda: selected_tab(page) == "Monitor", PAGE_WAIT_S, "the Monitor tab")
    page.locator("#monitor-progress").filter(has_text=f"(run {run_id})").wait_for(timeout=120_000)
    page.locator("#monitor-more button.label-wrap").first.click()  # the tool chart is under "More charts"
    wait_for(
        lambda: page.locator("#chart-entropy .js-plotly-plot, #chart-loss .js-plotly-plot").count(), PAGE_WAIT_S, name
    )


def test_a_tool_runs_monitor_shows_its_turns_and_tool_chart_and_a_plain_runs_has_none(browser, server, planted):
    calc, plain = planted
    requests: list[str] = []
    page = recording_page(browser, requests)
    try:
        _monitor(page, server, calc, "the tool run's More charts")
        legend = page.locator("#chart-tools .legendtext")
        # drawn once on screen, as a person scrolls to it
        wait_for(lambda: look_at(page, "#chart-tools") or legend.count() >= 2, PAGE_WAIT_S, "the tool chart's legend")
        assert set(legend.all_text_contents()) == {"calls per completion", "error answers"}
        table = page.locator("#completions-table")
        wait_for(lambda: table.locator("[role=row]").count() > 2, PAGE_WAIT_S, "completion rows")
        first = table.locator("[data-testid=cell-0-4]").inner_text()
        assert "→ calculator(expression='12+0')" in first and "← 12" in first, first
        table.locator("[data-testid=cell-1-4]").click()
        detail = page.locator("#completion-detail")
        detail.filter(has_text="reference answer").wait_for()
        assert "← answer1 <a id=pwn-answer1" in detail.locator("pre").nth(1).inner_text()
        time.sleep(2 * 2.0)  # two more Monitor ticks redraw what they poll
        assert built(page) == []

        _monitor(page, server, plain, "the plain run's More charts")
        time.sleep(2 * 2.0)
        assert not page.locator("#chart-tools").is_visible()  # no tool chart, not an empty one
        assert page.locator("#chart-entropy").is_visible()
    finally:
        page.close()
