"""The Sweeps view and the New run form's Sweep section, in process (issue 41): the section's text read into a
``sweep:`` block and launched through app.actions.sweep (the probe faked, as in tests/sweeps/test_sweep_actions.py), the
parallel coordinates' axes, values and colours for a given table, the overlaid curves, which row is best, sorting,
the fork's checkpoint, and the deep link. tests/browser/test_browser_sweeps.py drives the same in Chromium."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from app import actions
from app.actions import jobs
from app.actions.sweeps import MemberRow
from app.web.pages import new_run
from app.web.pages import sweeps as page
from app.web.widgets.sweep_charts import curves_figure, dimension, parcoords_figure, span
from app.web.widgets.sweep_form import probing_text, settings_of, sweep_block
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import tiny_config
from trainer.config.access import Access


def member(run_id, point, now=None, status="completed", best=False, **more) -> MemberRow:
    values = dict(step=4, total_steps=4, objective_best=now, reward=None, kl=None, stop_reason=None, error=None)
    values |= more
    return MemberRow(run_id, f"m-{run_id}", point, status, objective_now=now, best=best, **values)


@pytest.fixture
def probed(monkeypatch):
    """A fake probe: top_p 0.01 is "wasted" (every answer of a group the same), every other point "ok"."""

    def report(config):
        wasted = config.top_p == 0.01
        risks = [SimpleNamespace(message="every group scored alike", fatal=True)] if wasted else []
        # a quarter of the prompts scored apart on the ok points, as a report's signal_share says
        return SimpleNamespace(verdict="wasted" if wasted else "ok", risks=risks, signal_share=0.0 if wasted else 0.25)

    def probe_each(configs, access, prompts=8, on_report=None):
        reports = [report(c) for c in configs]
        for index, found in enumerate(reports):  # each as the child writes it, as app.actions.jobs.probe_each does
            if on_report is not None:
                on_report(index, found)
        return reports

    monkeypatch.setattr(jobs, "probe_each", probe_each)


def _form(**overrides) -> dict:
    return new_run.form_values(tiny_config(**{"name": "form-grid", "eval_steps": 2, **overrides}))


# --- the form's Sweep section ---------------------------------------------------------------------------------------
def test_the_sections_text_reads_as_lists_ranges_with_a_count_and_search_ranges():
    settings, problems = settings_of(
        "beta = 0, 0.04\nlearning_rate=1e-5..1e-3 x3 log\n\n# a note\ntemperature: 0.7..1.2"
    )
    assert problems == []
    assert settings == {
        "beta": ["0", "0.04"],
        "learning_rate": {"low": "1e-5", "high": "1e-3", "count": 3, "scale": "log"},
        "temperature": {"low": "0.7", "high": "1.2"},
    }


def test_a_line_the_section_cannot_read_is_one_sentence_naming_it():
    _, problems = settings_of("beta\nbeta = 0\nbeta = 0.04\ntop_p = 0.5..1 by 3")
    assert problems == [
        "sweep line 1 (beta): expected setting = values (0, 0.04), a range with a count (1e-5..1e-3 x3 log) or a "
        "search range (0.7..1.2)",
        "sweep.settings.beta is given twice: put all its values on one line",
        "sweep.settings.top_p 0.5..1 by 3: expected values (0, 0.04), a range with a count (1e-5..1e-3 x3 log) or a "
        "search range (0.7..1.2)",
    ]


def test_the_block_counts_members_only_for_random_and_tpe():
    grid, _ = sweep_block("beta = 0, 0.04", "grid", 8.0, 0.0, "", "max")
    assert grid == {
        "method": "grid",
        "seed": 0,
        "objective": "heldout/correct",
        "direction": "max",
        "settings": {"beta": ["0", "0.04"]},
    }
    tpe, _ = sweep_block("temperature = 0.7..1.2", "tpe", 6.0, 3.0, "reward", "min")
    assert (tpe["members"], tpe["seed"], tpe["objective"], tpe["direction"]) == (6, 3, "reward", "min")


def test_launch_sweep_creates_every_member_of_the_forms_grid_and_the_probe_skips_the_wasted(probed):
    asked = new_run.SweepAsked("top_p = 1.0, 0.01\nbeta = 0, 0.04")
    text, problems, sweep_id = new_run.launch_sweep(Access(), _form(), asked)
    assert problems == [] and sweep_id is not None
    assert "Launched:" in text and "4 members, 2 skipped by the probe" in text
    table = actions.sweep_detail(sweep_id)
    assert [r.point for r in table.rows] == [
        {"top_p": 1.0, "beta": 0.0},
        {"top_p": 1.0, "beta": 0.04},
        {"top_p": 0.01, "beta": 0.0},
        {"top_p": 0.01, "beta": 0.04},
    ]
    assert [r.status for r in table.rows] == ["queued", "queued", "stopped", "stopped"]
    assert [r.name for r in table.rows] == [f"form-grid-{i}" for i in range(1, 5)]


def test_launch_sweep_says_which_point_is_probed_of_how_many_and_what_each_probe_found(probed):
    """Issue 59: the section showed only a timer while its points were probed. Each news names the point probed
    now, of how many, and what each probe before it found; the launch's answer keeps every finding."""
    heard = []
    asked = new_run.SweepAsked("top_p = 1.0, 0.01")
    text, _, sweep_id = new_run.launch_sweep(Access(), _form(), asked, heard.append)
    said = [re.sub(r"<[^>]+>|⏳ ", "", probing_text(news)) for news in heard]  # the text, without the badge's markup
    assert [len(news.found) for news in heard] == [0, 1, 2]
    assert "Probing: point 1 of 2 (top_p=1)." in said[0] and "- point" not in said[0]
    first = "- point 1 of 2 (top_p=1): ok, answers scored apart on 25% of prompts; it trains"
    second = (
        "- point 2 of 2 (top_p=0.01): would learn nothing, answers scored apart on 0% of prompts; skipped before "
        "training: the probe says the run would learn nothing (every group scored alike)"
    )
    assert "Probing: point 2 of 2 (top_p=0.01)." in said[1] and said[1].endswith(first)
    assert "Probed: all 2 points; creating the sweep." in said[2] and said[2].endswith(first + "\n" + second)
    assert sweep_id is not None and text.endswith(first + "\n" + second)


def test_launch_sweep_says_every_problem_in_a_sentence_and_creates_nothing(probed):
    asked = new_run.SweepAsked("lr = 1e-5, 1e-4\nbeta = 0..1 x40\nname = a, b")
    text, problems, sweep_id = new_run.launch_sweep(Access(), _form(eval_steps=0), asked)
    assert sweep_id is None and "Not valid:" in text
    assert problems == [
        "sweep.settings.lr: no such setting; did you mean learning_rate?",
        "sweep.settings.beta.count 40: expected a whole number from 2 to 32",
        "sweep.settings.name: only numeric and choice settings are swept, and name is neither",
    ]
    assert actions.sweeps() == []
    # the definition is fine, the members are not: the objective needs eval_steps, said once for all of them
    _, problems, sweep_id = new_run.launch_sweep(Access(), _form(eval_steps=0), new_run.SweepAsked("beta = 0, 0.04"))
    assert sweep_id is None and len(problems) == 1 and "set eval_steps" in problems[0]
    assert actions.runs() == []


def test_the_sweepable_settings_are_the_numeric_and_choice_ones():
    names = actions.sweepable()
    assert {"beta", "learning_rate", "top_p", "num_generations", "loss_type", "temperature"} <= set(names)
    assert not {"name", "model_name_or_path", "dataset_name", "reward_funcs", "executor"} & set(names)


# --- the figures ----------------------------------------------------------------------------------------------------
def test_the_parcoords_has_an_axis_per_setting_the_objective_last_and_leaves_out_the_unscored():
    definition = {"settings": {"loss_type": ["dr_grpo", "grpo"], "learning_rate": [1e-5, 1e-4, 1e-3], "beta": [0, 1]}}
    rows = [
        member(1, {"loss_type": "grpo", "learning_rate": 1e-5, "beta": 0.0}, 0.25),
        member(2, {"loss_type": "dr_grpo", "learning_rate": 1e-3, "beta": 0.0}, 0.75, best=True),
        member(3, {"loss_type": "grpo", "learning_rate": 1e-4, "beta": 0.0}, None, status="stopped"),
    ]
    figure = parcoords_figure(rows, definition, "heldout/correct", "max")
    (trace,) = figure.data
    axes = [d.to_plotly_json() for d in trace.dimensions]
    assert [a["label"] for a in axes] == ["loss_type", "learning_rate (log)", "beta", "heldout/correct (max)"]
    # the choice as a categorical axis, in the definition's order
    assert axes[0]["values"] == [1, 0] and axes[0]["tickvals"] == [0, 1] and axes[0]["ticktext"] == ["dr_grpo", "grpo"]
    # two decades and more: drawn in log10, ticked at its values
    assert [round(v, 6) for v in axes[1]["values"]] == [-5, -3]
    assert axes[1]["ticktext"] == ["1e-05", "0.001"]
    assert axes[2]["values"] == [0.0, 0.0] and axes[2]["range"] == [-0.5, 0.5]  # one value: a span around it
    assert axes[3]["values"] == [0.25, 0.75]
    assert trace.line.color == (0.25, 0.75) and trace.line.reversescale is False and trace.line.cmin is None
    assert trace.meta == (1, 2)
    (note,) = figure.layout.annotations
    assert note.text == "not drawn, no heldout/correct yet: run 3"


def test_a_minimised_objective_reverses_the_colours_so_bright_is_better():
    rows = [member(1, {"beta": 0.0}, 2.0), member(2, {"beta": 0.04}, 1.0)]
    (trace,) = parcoords_figure(rows, {"settings": {"beta": [0.0, 0.04]}}, "kl", "min").data
    assert trace.line.reversescale is True and trace.line.color == (2.0, 1.0)


def test_a_parcoords_with_no_scored_member_says_so():
    figure = parcoords_figure([member(1, {"beta": 0.0})], {}, "heldout/correct")
    assert figure.data == () and "no member has a value of heldout/correct yet" in figure.layout.annotations[0].text


def test_true_false_settings_are_categorical_axes():
    axis = dimension("use_vllm", [True, False, True])
    assert axis["values"] == [0, 1, 0] and axis["ticktext"] == ["true", "false"]


def test_the_curves_are_one_line_a_member_the_best_thick_and_on_top():
    curves = {5: [(0, 0.1), (2, 0.4)], 6: [(0, 0.1), (2, 0.6)], 7: []}
    figure = curves_figure(curves, {5: "5: beta=0", 6: "6: beta=0.04"}, 6, "heldout/correct")
    assert [t.meta for t in figure.data] == [5, 6]  # the member with no value has no line
    other, best = figure.data
    assert best.name == "6: beta=0.04 (best)" and best.line.width == 4 and best.opacity == 1.0
    assert other.line.width == 1.5 and other.opacity < 1 and other.y == (0.1, 0.4)


# --- the page's logic -----------------------------------------------------------------------------------------------
def test_the_best_member_is_marked_and_sorting_puts_it_first():
    rows = [
        member(1, {"beta": 0.0}, 0.5),
        member(2, {"beta": 0.04}, 0.75, best=True),
        member(3, {"beta": 0.1}, None, status="running"),
    ]
    assert [r[0] for r in map(page.member_row, rows)] == ["", page.BEST_MARK, ""]
    assert [r.run_id for r in page.sort_members(rows, "objective, best first", "max")] == [2, 1, 3]
    assert [r.run_id for r in page.sort_members(rows, "objective, best first", "min")] == [1, 2, 3]
    assert [r.run_id for r in page.sort_members(rows, "status")] == [3, 1, 2]
    assert [r.run_id for r in page.sort_members(rows[::-1], "point order")] == [1, 2, 3]


def test_a_members_row_says_why_it_stopped_and_its_error():
    row = member(
        4, {"top_p": 0.01}, None, status="failed", step=0, stop_reason=None, error="Traceback\nOOM", seconds=65
    )
    assert page.member_row(row) == ["", 4, "top_p=0.01", "failed", "0/4", "", "", "", "", "1m05s", "error: OOM"]


def test_the_fork_starts_from_the_checkpoint_nearest_the_best_step():
    assert page.best_step([(0, 0.1), (2, 0.7), (4, 0.7), (6, 0.3)], "max") == 2  # the earliest of equals
    assert page.best_step([(0, 0.5), (2, 0.2)], "min") == 2
    assert page.best_step([], "max") is None
    assert page.nearest_checkpoint([2, 4, 6], 3) == 2 and page.nearest_checkpoint([2, 4, 6], 5.5) == 6
    assert page.nearest_checkpoint([2, 4], None) == 4 and page.nearest_checkpoint([], 2) is None
    assert page.fork_settings(4, 4) == "max_steps=8" and page.fork_settings(2, 4) == ""


def test_a_poll_of_the_sweep_picked_draws_it_once_then_sends_nothing_new(probed):
    _, _, sweep_id = new_run.launch_sweep(Access(), _form(), new_run.SweepAsked("top_p = 1.0, 0.01\nbeta = 0, 0.04"))
    first = actions.sweep_detail(sweep_id).rows[0].run_id
    with get_sessionmaker().begin() as s:
        rows = [
            r for step, v in ((0, 0.25), (2, 0.5)) for r in queries.metric_rows(first, step, {"heldout/correct": v}, 1)
        ]
        queries.add_metric_rows(s, rows)
    view = page.refresh(sweep_id, None, None, None)
    assert "Live:" in view.header and f"best so far: run {first}" in view.header and view.live
    assert [r[0] for r in view.rows] == [page.BEST_MARK, "", "", ""]
    assert view.members["value"] == first  # the best member picked
    assert view.parcoords.data[0].meta == (first,)
    again = page.refresh(sweep_id, None, first, view.drawn)
    assert again.drawn == view.drawn and all(v == {"__type__": "update"} for v in (again.rows, again.parcoords))
    assert again.live


def test_the_member_picker_follows_the_best_member_until_the_user_picks_one(probed):
    """A live sweep is first drawn before any member has scored (the first member picked); when a later member
    becomes the best, the picker follows it, unless the user picked a member of their own."""
    _, _, sweep_id = new_run.launch_sweep(Access(), _form(), new_run.SweepAsked("top_p = 1.0, 0.01\nbeta = 0, 0.04"))
    first, second = (r.run_id for r in actions.sweep_detail(sweep_id).rows[:2])
    view = page.refresh(sweep_id, None, None, None)
    assert view.members["value"] == first  # nothing scored yet
    with get_sessionmaker().begin() as s:
        scores = ((first, 0, 0.25), (first, 2, 0.25), (second, 0, 0.25), (second, 2, 0.75))
        queries.add_metric_rows(
            s, [r for run, step, v in scores for r in queries.metric_rows(run, step, {"heldout/correct": v}, 1)]
        )
    assert page.refresh(sweep_id, None, None, view.drawn).members["value"] == second  # the best now
    assert page.refresh(sweep_id, None, first, view.drawn).members["value"] == first  # the user's own pick stays


def test_without_sweeps_the_view_says_how_to_make_one():
    view = page.refresh(None, None, None, None)
    assert "New run → Sweep" in view.header and "grpo-studio sweep tiny-grid" in view.header


def test_the_address_names_the_sweep_a_page_load_lands_on():
    from app.web.server import landing

    assert landing({"tab": "sweeps", "sweep": "2"}, [], [3, 2]).sweep == 2
    assert landing({"tab": "sweeps"}, [], [3, 2]).sweep == 3  # none named: the newest
    missing = landing({"tab": "sweeps", "sweep": "9"}, [], [3, 2])
    assert missing.sweep is None and "there is no sweep 9" in missing.notice
    assert "is not a sweep id" in landing({"tab": "sweeps", "sweep": "x"}, [], [3]).notice


def test_a_setting_with_one_value_gets_a_span_around_it():
    assert span([0.89, 0.89]) == {"range": [0.801, 0.979]} and span([0.0]) == {"range": [-0.5, 0.5]}
    assert span([0.0, 0.04]) == {} and span([]) == {}


def test_a_skipped_members_reason_is_said_once():
    reason = "skipped before training: the probe says the run would learn nothing (...)"
    row = member(3, {"top_p": 0.01}, None, status="stopped", step=0, stop_reason=reason, error=reason)
    assert page.member_row(row)[-1] == reason


def test_once_a_finished_sweep_is_drawn_a_tick_reads_nothing(monkeypatch):
    def unread(sweep_id):
        raise AssertionError("read again")

    monkeypatch.setattr(actions, "sweep_detail", unread)
    drawn = (3, None, (), (), False)  # sweep 3, drawn once every member had ended
    view = page.refresh(3, None, None, drawn)
    assert view.drawn == drawn and view.rows == {"__type__": "update"}
    with pytest.raises(AssertionError, match="read again"):  # a live one, or another sort, is read
        page.refresh(3, None, None, (3, None, (), (), True))


def test_fork_from_best_forks_the_member_at_its_checkpoint_nearest_its_best_step(probed, monkeypatch):
    _, _, sweep_id = new_run.launch_sweep(Access(), _form(), new_run.SweepAsked("beta = 0, 0.04"))
    run_id = actions.sweep_detail(sweep_id).rows[1].run_id
    with get_sessionmaker().begin() as s:
        scores = ((0, 0.2), (2, 0.4), (4, 0.7), (6, 0.5))  # best at step 4
        queries.add_metric_rows(
            s, [r for step, v in scores for r in queries.metric_rows(run_id, step, {"heldout/correct": v}, 1)]
        )
    forked = []
    monkeypatch.setattr(actions, "checkpoints", lambda r: [3, 6] if r == run_id else [])
    monkeypatch.setattr(actions, "fork", lambda *args: forked.append(args) or 99)
    said = page.fork_from_best(Access(), sweep_id, run_id, "max_steps=12")
    assert [args[:3] for args in forked] == [(run_id, 3, "max_steps=12")]  # 3 is nearer 4 than 6 is
    assert "Queued:" in said and "run 99" in said and "step 3" in said and "at step 4" in said
    assert page.fork_hint(sweep_id, run_id) == ""  # step 3 leaves steps to train
    monkeypatch.setattr(actions, "checkpoints", lambda r: [])
    assert "has saved no checkpoint yet" in page.fork_from_best(Access(), sweep_id, run_id, "")
