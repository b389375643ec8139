"""The dashboard's logic without a browser: form generation, validation on launch, figure builders, health alerts,
incremental polling, queue scheduling, and the server's settings."""

from __future__ import annotations

import dataclasses
import math

import pytest

from app.actions.monitor_state import RunCache, progress_text
from app.web.server import parse_auth
from app.web.widgets.charts import CHARTS, build_all, build_figure, chart_keys, smooth
from app.web.widgets.form import config_from_form, form_fields, grouped_fields, named
from app.web.widgets.verdict import verdict
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config
from trainer import review
from trainer.config import RunConfig
from trainer.config.access import Access
from trainer.insight.health import health_alerts
from trainer.presets import presets


def series(**keys):
    """{key: [(step, value, wall)]} from {key: [values]}, steps from 1."""
    return {k: [(i + 1, float(v), 100.0 + i) for i, v in enumerate(vals)] for k, vals in keys.items()}


# --- the form -------------------------------------------------------------------------------------------------------
def test_every_config_field_gets_a_widget_with_its_help_and_range():
    specs = {s.name: s for s in form_fields()}
    assert set(specs) == {f.name for f in dataclasses.fields(RunConfig)}
    assert specs["num_generations"].kind == "int" and "(2 to 256)" in specs["num_generations"].help
    assert specs["loss_type"].kind == "choice" and specs["reward_funcs"].kind == "rewards"
    assert specs["use_vllm"].advanced and not specs["beta"].advanced


def test_sections_keep_advanced_fields_last():
    sections = grouped_fields()
    assert [g for g, _ in sections][-1] == "advanced"
    assert "seed" in [s.name for s in sections[-1][1]] and "scale_rewards" in [s.name for s in sections[-1][1]]


def test_form_values_become_a_config_and_every_problem_is_listed():
    names = ["name", "num_generations", "beta", "lora_target_modules", "reward_funcs"]
    config, problems = config_from_form(dict(zip(names, ["x", 4, 0.02, "q_proj, v_proj", ["correctness"]])))
    assert problems == [] and config.lora_target_modules == ["q_proj", "v_proj"] and config.num_generations == 4
    _, problems = config_from_form(dict(zip(names, ["", 3, -1, "", []])))
    assert len(problems) == 5, problems


def test_the_values_of_a_set_of_inputs_are_read_by_setting_name():
    """An event on a set of inputs gets one dict keyed by component; the form reads it by name, leaving out the
    inputs that are no setting (the operator's rules)."""
    rules, beta, name = object(), object(), object()
    assert named({rules: "rules", name: "x", beta: 0.04}, {"name": name, "beta": beta}) == {"name": "x", "beta": 0.04}


def test_presets_are_valid_and_the_tiny_ones_are_offline():
    all_presets = presets()
    assert len(all_presets) == 6
    for name, config in all_presets.items():
        assert review.problems(config) == [], name
    tiny = all_presets["Tiny offline demo (CPU)"]
    assert (tiny.model_name_or_path, tiny.dataset_name, tiny.use_vllm) == ("builtin:tiny", "builtin:arithmetic", False)
    tools = all_presets["Tiny calculator demo (CPU)"]
    assert (tools.model_name_or_path, tools.dataset_name, tools.tools, tools.use_vllm) == (
        "builtin:tiny-tools",
        "builtin:arithmetic3",
        ["builtin:calculator"],
        False,
    )
    real = all_presets["Real model on a CPU: SmolLM2-135M-Instruct on GSM8K-format problems"]
    assert (real.model_name_or_path, real.dataset_name, real.use_vllm) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "builtin:word-problems",
        False,
    )


def test_launch_with_problems_starts_nothing():
    from app.web.pages import new_run

    with get_sessionmaker().begin() as s:
        before = len(queries.list_runs(s))
    values = new_run.form_values(RunConfig(num_generations=3, beta=-1.0))
    message = new_run.launch(Access(), values)
    assert (
        message.startswith(verdict("bad", "Not valid:", "**2 problems:**"))
        and "group size 3" in message
        and "beta -1" in message
    )
    with get_sessionmaker().begin() as s:
        assert len(queries.list_runs(s)) == before


def test_custom_rewards_need_the_server_flag(tmp_path):
    from app.web.pages import new_run

    values = new_run.form_values(tiny_config(reward_funcs=["mine.py:f"]))
    assert "--allow-custom-rewards" in new_run.check(Access(), values)


# --- charts ---------------------------------------------------------------------------------------------------------
def test_reward_chart_draws_total_and_each_reward_mean():
    data = series(reward=[1, 2], **{"rewards/correctness/mean": [0, 2], "rewards/int/mean": [0.5, 0.5], "kl": [0, 0.1]})
    fig = build_figure(CHARTS[0], {"run": data})
    assert [t.name for t in fig.data] == ["total reward", "correctness", "int"]
    assert [t.meta for t in fig.data] == ["reward", "rewards/correctness/mean", "rewards/int/mean"]
    # one run: its series differ by colour as well as dash (dash alone was hard to tell apart)
    assert [t.line.dash for t in fig.data] == ["solid", "dash", "dot"] and len({t.line.color for t in fig.data}) == 3
    assert list(fig.data[0].x) == [1, 2] and list(fig.data[0].y) == [1.0, 2.0]


def test_overlay_prefixes_run_labels_and_time_axis_is_minutes():
    a, b = series(kl=[0.1, 0.2]), series(kl=[0.3])
    fig = build_figure(next(c for c in CHARTS if c.name == "kl"), {"1: a": a, "2: b": b}, x_axis="time")
    assert [t.name for t in fig.data] == ["1: a · KL", "2: b · KL"]
    assert fig.data[0].line.color != fig.data[1].line.color  # one colour per run
    assert fig.data[0].marker.symbol == fig.data[1].marker.symbol == "circle"  # the same series, the same symbol
    assert fig.layout.yaxis.title.text == "KL (nats per token)" and fig.layout.yaxis.exponentformat == "e"
    assert fig.layout.legend.y < 0  # under the plot, not over it
    assert list(fig.data[0].x) == [0.0, pytest.approx(1 / 60)]


def test_clip_chart_takes_every_clip_key():
    keys = chart_keys(
        next(c for c in CHARTS if c.name == "clip_ratio"), ["clip_ratio/low_mean", "clip_ratio/high_max", "kl"]
    )
    assert keys == ["clip_ratio/high_max", "clip_ratio/low_mean"]


def test_smoothing_is_a_debiased_ema_that_skips_nan():
    assert smooth([1.0, 2.0], 0.0) == [1.0, 2.0]
    out = smooth([2.0, math.nan, 2.0], 0.9)
    assert out[0] == pytest.approx(2.0) and math.isnan(out[1]) and out[2] == pytest.approx(2.0)


def test_all_charts_build_from_an_empty_run():
    figures = build_all({"run": {}})
    assert len(figures) == len(CHARTS) and all(len(f.data) == 0 for f in figures)


# --- health ---------------------------------------------------------------------------------------------------------
def test_healthy_run_has_no_alerts():
    assert health_alerts(series(frac_reward_zero_std=[0.1] * 20, kl=[0.01] * 20, loss=[0.0] * 20)) == []


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (series(frac_reward_zero_std=[0.9] * 5), "zero_std"),
        (series(kl=[0.05] * 10 + [1.0] * 10), "kl_climb"),
        (series(**{"completions/clipped_ratio": [0.6] * 5}), "length_limit"),
        (series(**{"completions/mean_length": [100] * 10 + [150] * 10}, reward=[1.0] * 20), "length_bias"),
        (series(loss=[0.1, math.nan]), "loss_nan"),
    ],
)
def test_each_failure_sign_raises_its_alert(data, name):
    assert [a.name for a in health_alerts(data)] == [name]


# --- polling --------------------------------------------------------------------------------------------------------
def test_poll_reads_only_new_steps():
    run_id = create_run(tiny_config(name="poll"))
    cache = RunCache(run_id)
    with get_sessionmaker().begin() as s:
        queries.add_metric_rows(s, queries.metric_rows(run_id, 1, {"reward": 1.0, "kl": 0.0}, 1.0))
    with get_sessionmaker().begin() as s:
        assert cache.poll(s) == 2
        assert cache.poll(s) == 0  # nothing new, nothing read twice
        queries.add_metric_rows(s, queries.metric_rows(run_id, 2, {"reward": 2.0}, 2.0))
    with get_sessionmaker().begin() as s:
        assert cache.poll(s) == 1
    assert cache.series["reward"].tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]] and cache.last_step == 2


def test_progress_text_gives_an_eta():
    from datetime import UTC, datetime, timedelta

    from storage.models import Run

    now = datetime(2026, 1, 1, tzinfo=UTC)
    run = Run(id=1, name="r", status="running", current_step=10, total_steps=40, started_at=now - timedelta(seconds=60))
    assert progress_text(run, now) == "**r** (run 1) — running — step 10 of 40 · 1m00s elapsed · ETA 3m00s"


# --- queue ----------------------------------------------------------------------------------------------------------
def test_schedule_starts_queued_runs_in_order_within_the_limit(fresh_db, monkeypatch):
    from trainer.supervise import schedule, workers

    alive: set[int] = set()

    def fake_start(session, run):  # a worker that stays alive until the test "ends" it
        run.pid = 1000 + run.id
        alive.add(run.id)

    monkeypatch.setattr(schedule, "start_worker", fake_start)
    monkeypatch.setattr(workers, "is_alive", lambda run: run.id in alive)
    ids = [create_run(tiny_config(name=f"q{i}")) for i in range(3)]
    with get_sessionmaker().begin() as s:
        assert schedule.schedule(s, max_concurrent=1) == [ids[0]]
    with get_sessionmaker().begin() as s:
        assert schedule.schedule(s, max_concurrent=1) == []  # the slot is taken: the others wait
        queries.finish_run(s, queries.get_run(s, ids[0]), queries.RunStatus.COMPLETED)
    alive.discard(ids[0])
    with get_sessionmaker().begin() as s:
        assert schedule.schedule(s, max_concurrent=2) == [ids[1], ids[2]]  # in order, as slots allow


def test_parse_auth():
    assert parse_auth("ann:secret") == ("ann", "secret") and parse_auth(None) is None
    with pytest.raises(ValueError):
        parse_auth("nopassword")


def test_long_series_are_thinned_but_keep_spikes_nans_and_ends():
    import numpy as np

    from app.web.widgets.charts import keep_indices

    values = np.zeros(10_000)
    values[5_000], values[7_777] = 50.0, math.nan
    keep = keep_indices(values, max_points=1200)
    assert len(keep) <= 1200 + 3
    assert {0, 5_000, 7_777, 9_999} <= set(keep.tolist())
    fig = build_figure(CHARTS[0], {"r": {"reward": [(i + 1, float(v), float(i)) for i, v in enumerate(values)]}})
    assert len(fig.data[0].x) == len(keep) and 50.0 in list(fig.data[0].y)


def test_example_files_match_the_presets():
    from pathlib import Path

    from trainer.presets import preset_files, tiny_demo

    examples = Path(__file__).resolve().parents[2] / "examples"
    assert RunConfig.load(examples / "tiny-offline.yaml") == (tiny_demo(), [])
    reference, notes = RunConfig.load(examples / "gsm8k-llama3b.yaml")
    assert notes == [] and reference == presets()["Reference: Llama-3.2-3B-Instruct on GSM8K"]
    # every preset is in examples/ and every example is a preset, byte for byte
    shipped = {path.name: path.read_bytes() for path in preset_files()}
    assert {path.name: path.read_bytes() for path in examples.glob("*.yaml")} == shipped


def test_presets_ship_as_package_data():
    """The preset files are declared package data, so an installed grpo-studio (wheel, Docker image) has them."""
    import tomllib

    from tests.conftest import ROOT

    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "*.yaml" in package_data["trainer.presets"]


def test_runs_table_shows_held_out_base_to_tuned():
    from app.web.pages.runs import COLUMNS, run_rows

    run_id = create_run(tiny_config(name="evaluated"))
    with get_sessionmaker().begin() as s:
        queries.add_evaluation(s, run_id, "final", 200, 4, {"base": {"correct": 0.535}, "tuned": {"correct": 0.544}})
    row = next(r for r in run_rows() if r[0] == run_id)
    assert row[COLUMNS.index("held-out correct")] == "53.5% → 54.4%"  # as Compare shows it, not "54% → 54%"


def test_completions_follow_the_newest_step_unless_pinned():
    from app.web.pages.monitor import refresh

    run_id = create_run(tiny_config(name="follow"))
    with get_sessionmaker().begin() as s:
        for step in (1, 2):
            queries.add_metric_rows(s, queries.metric_rows(run_id, step, {"reward": float(step)}, float(step)))
            queries.add_sample_rows(
                s,
                [
                    {
                        "run_id": run_id,
                        "step": step,
                        "group_index": 0,
                        "prompt": "p",
                        "completion": f"c{step}",
                        "rewards": {"correctness": 0.0},
                        "total_reward": 0.0,
                        "advantage": 0.0,
                        "reference_answer": "1",
                    }
                ],
            )
    following = refresh(run_id, [], 0.0, "step", 1, {}, False)
    pinned = refresh(run_id, [], 0.0, "step", 1, {}, True)
    assert following.step["value"] == 2 and following.table[0][4] == "c2"
    assert pinned.step["value"] == 1 and pinned.table[0][4] == "c1"
    assert following.header.startswith("**follow** (run ") and "step 0 of 4" in following.header


def test_held_out_chart_groups_base_and_tuned_per_metric():
    from app.web.widgets.charts import heldout_figure

    fig = heldout_figure([("correct (greedy)", 0.5, 0.75), ("format", 0.25, 1.0)], problems=200)
    base, tuned = fig.data
    assert (base.name, list(base.x), list(base.y)) == ("base", ["correct (greedy)", "format"], [0.5, 0.25])
    assert (tuned.name, list(tuned.y)) == ("tuned", [0.75, 1.0])
    assert tuple(fig.layout.yaxis.range) == (0, 1) and fig.layout.title.text == "Held-out: 200 problems"


def test_new_run_page_returns_its_form_widgets_in_field_order():
    """Clone fills the form with config_values(), one value per name in NAMES: the widgets must come in that order."""
    import gradio as gr

    from app.web.pages import new_run

    with gr.Blocks():
        form = new_run.build(Access())
    assert [widget.elem_id for widget in form.fields] == [f"field-{name}" for name in new_run.NAMES]
    assert form.status.elem_id == "new-run-status"


def test_server_hands_the_new_run_form_to_the_runs_page(monkeypatch):
    from app.web import server
    from app.web.pages import new_run, runs

    seen = {}
    build_form, build_runs = new_run.build, runs.build

    def form_page(access):
        seen["form"] = build_form(access)
        return seen["form"]

    def runs_page(form, config_values, tabs, access):
        seen["runs"] = (form, config_values)
        seen["access"] = access
        return build_runs(form, config_values, tabs, access)

    monkeypatch.setattr(new_run, "build", form_page)
    monkeypatch.setattr(runs, "build", runs_page)
    access = server.Access(allow_custom_rewards=True)
    server.build_app(access)
    assert seen["runs"] == (seen["form"], new_run.config_values)
    assert seen["access"] is access  # the Runs page's Fork obeys the operator's rules too


def test_monitor_without_a_run_clears_every_chart():
    from app.web.pages.monitor import refresh
    from app.web.widgets.empty_states import NO_RUNS_MONITOR
    from app.web.widgets.styles import CHART_NONE

    view = refresh(None, [], 0.0, "step", 0, {})  # an empty database: the header says to launch the demo
    assert view.header == NO_RUNS_MONITOR and view.table == []
    # every chart cleared, and its box hidden (no row of empty boxes under the header)
    assert view.figures == [{"__type__": "update", "value": None, "elem_classes": [CHART_NONE]}] * len(CHARTS)


def test_a_pages_polls_run_only_while_its_tab_is_shown():
    """The Monitor's poll and the learning map's follow run while the Monitor is shown, the held-out evaluation's
    while Compare is, the Sweeps view's while Sweeps is; none runs under New run or Runs, and none before its tab opens. The run lists' tick (every
    tab's pickers) always runs."""
    import gradio as gr

    from app.web import server

    demo = server.build_app()
    timers = {block._id: block for block in demo.blocks.values() if isinstance(block, gr.Timer)}
    assert sorted(timer.value for timer in timers.values()) == [2.0, 2.0, 3.0, 4.0, 5.0]
    assert [t.value for t in timers.values() if t.active] == [3.0]  # on load: the run lists only (New run is shown)
    tabs = {block._id: block.id for block in demo.blocks.values() if isinstance(block, gr.Tab)}
    running, switched = {}, set()
    for fn in demo.fns.values():
        if len(fn.targets) == 1 and fn.targets[0][1] == "select" and fn.targets[0][0] in tabs and fn.fn is not None:
            updates = fn.fn()
            switched |= {out._id for out in fn.outputs}
            running[tabs[fn.targets[0][0]]] = {out._id for out, update in zip(fn.outputs, updates) if update.active}
    assert switched == {i for i, t in timers.items() if t.value != 3.0}  # every poll but the run lists' is switched
    assert running["new"] == running["runs"] == set()
    assert sorted(timers[i].value for i in running["monitor"]) == [2.0, 5.0]
    assert [timers[i].value for i in running["compare"]] == [2.0] and not running["compare"] & running["monitor"]
    assert [timers[i].value for i in running["sweeps"]] == [4.0]  # the Sweeps view's, on its tab only


def test_the_monitors_poll_sets_its_own_pace_and_the_learning_panels(monkeypatch):
    """Each Monitor poll sets the Monitor's timer and the learning panel's to the live pace (2 s and 5 s) while a run it
    draws is queued or running, and both to 15 s otherwise (no run, a finished one); a database error leaves them."""
    import gradio as gr

    from app.web import server
    from app.web.pages import monitor
    from storage import queries
    from storage.db import get_sessionmaker
    from storage.models import RunStatus

    demo = server.build_app()
    timers = {block._id for block in demo.blocks.values() if isinstance(block, gr.Timer) and block.value in (2.0, 5.0)}
    (poll,) = [
        fn
        for fn in demo.fns.values()
        if getattr(fn.fn, "__qualname__", "") == "build.<locals>.show"
        and any(event == "tick" for _, event in fn.targets)
        and len(fn.outputs) > 10
    ]
    paced = [out for out in poll.outputs if isinstance(out, gr.Timer)]
    assert {out._id for out in paced} <= timers and len(paced) == 2  # the Monitor's 2 s poll and the panel's 5 s

    def sent(run_id) -> list[float]:
        inputs = [run_id, [], 0.0, "step", 0, {}, False, False, [], False]
        shown = poll.fn(*inputs)
        return sorted(shown[timer]["value"] for timer in paced)

    assert sent(None) == [15.0, 15.0]
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "paced", {"beta": 0.0}, 2).id
    assert sent(run_id) == [2.0, 5.0]  # queued
    with get_sessionmaker().begin() as s:
        queries.finish_run(s, queries.get_run(s, run_id), RunStatus.FAILED, "gone")
    assert sent(run_id) == [15.0, 15.0]
    assert monitor.paces(True) == (2.0, 5.0) and monitor.paces(False) == (15.0, 15.0)
    from sqlalchemy.exc import OperationalError

    def down(*args, **kwargs):
        raise OperationalError("SELECT", {}, Exception("database is locked"))

    monkeypatch.setattr(monitor.actions, "monitor_view", down)
    shown = poll.fn(run_id, [], 0.0, "step", 0, {}, False, False, [], False)
    assert not any(timer in shown for timer in paced) and "locked" in shown[poll.outputs[0]]


def test_the_dashboard_tells_no_one_it_runs_even_where_gradio_analytics_are_on(monkeypatch):
    """Gradio's analytics are off in the dashboard's own Blocks, whatever GRADIO_ANALYTICS_ENABLED says: no version
    check is started (it would ask api.gradio.app) and nothing is reported as the page is built."""
    import gradio.analytics as analytics

    from app.web import server

    asked = []
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "True")
    monkeypatch.setattr(analytics, "version_check", lambda: asked.append("version"))
    monkeypatch.setattr(analytics, "_do_analytics_request", lambda topic, data: asked.append(topic))
    demo = server.build_app()
    assert demo.analytics_enabled is False and asked == []
