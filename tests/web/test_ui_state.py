"""The dashboard's state and feedback without a browser: what a queued run says, the ETA, where form problems are
shown, what the address lands on, and the export box's wording (issue 14)."""

from __future__ import annotations

from app.web.widgets.charts import CHARTS
from app.web.widgets.verdict import problem
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config
from trainer.config.access import Access


def test_a_queued_run_says_what_it_waits_for_instead_of_empty_charts():
    from app.web.pages.monitor import refresh

    first, second = create_run(tiny_config(name="ahead")), create_run(tiny_config(name="behind"))
    with get_sessionmaker().begin() as s:
        queries.mark_running(s, queries.get_run(s, first), 1, "/tmp/x", None)
    view = refresh(second, [], 0.0, "step", 0, {})
    from app.web.widgets.styles import CHART_NONE

    # no empty chart boxes: every chart cleared and hidden
    hidden = {"__type__": "update", "value": None, "elem_classes": [CHART_NONE]}
    assert f"waiting behind run {first} (running)" in view.header and view.figures == [hidden] * len(CHARTS)


def test_eta_goes_by_the_pace_between_logged_steps():
    import numpy as np

    from app.actions.monitor_state import eta

    # step 1 logged 300 s after the start (loading, warm-up); then 2 s a step, one slow checkpoint step
    logged = np.array([[1, 0.5, 300.0], [2, 0.5, 302.0], [3, 0.5, 304.0], [4, 0.5, 314.0], [5, 0.5, 316.0]])
    assert eta(10, 316.0, 5, logged) == 20.0  # median 2 s a step, not 316 s / 5 steps
    assert eta(10, 316.0, 1, logged[:1]) is None  # one step says nothing about the pace yet
    assert eta(10, 100.0, 5, None) == 200.0  # without a series: the pace so far


def test_push_without_a_token_asks_to_paste_one(monkeypatch):
    from app.web.pages.compare import push_to_hub

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    message = push_to_hub(1, "final", "me/adapter", "", False)
    assert message.startswith(problem("paste a Hugging Face token")) and "--token" not in message


def test_form_problems_are_placed_beside_the_fields_they_name():
    from app.web.pages import new_run
    from app.web.widgets.form import problems_by_field

    values = new_run.form_values(tiny_config(num_generations=1, beta=-0.5))
    _, problems = new_run.validate(Access(), values)
    found = problems_by_field(problems, new_run.NAMES)
    assert found["num_generations"][0].startswith("group size 1") and found["beta"][0].startswith("beta -0.5")
    marks = new_run.field_marks(problems)
    beta = marks[new_run.NAMES.index("beta")]
    assert beta["info"].startswith("Problem: beta -0.5") and beta["elem_classes"] == ["field-invalid"]
    assert marks[new_run.NAMES.index("name")]["elem_classes"] == []


def test_a_problem_is_placed_by_the_field_it_names_not_by_its_words():
    """Issue 60.2: "group size 300: at most 256 completions per prompt" names no setting in its words, and the form
    found its field by the words "group size". The problem names its field now (trainer.config.rules.Problem), and
    the range it states is the one num_generations declares."""
    import dataclasses

    from app.web.widgets.form import problems_by_field
    from trainer.config import RunConfig

    declared = {f.name: f for f in dataclasses.fields(RunConfig)}["num_generations"].metadata["max"]
    problems = tiny_config(num_generations=declared + 1).field_problems()
    sentence = f"group size {declared + 1}: at most {declared} completions per prompt"
    assert problems == [sentence] and problems[0].field == "num_generations"
    assert problems_by_field(problems, ["num_generations", "per_device_train_batch_size"]) == {
        "num_generations": [sentence]
    }


def test_the_address_names_the_tab_and_run_a_page_load_lands_on():
    from app.web.server import Landing, landing
    from storage.summaries import run_summaries

    older, newer = create_run(tiny_config(name="older")), create_run(tiny_config(name="newer"))
    with get_sessionmaker().begin() as s:
        summaries = run_summaries(s)
    assert landing({"tab": "monitor", "run": str(older)}, summaries) == Landing("monitor", older, None)
    # no run named: the newest, and nothing to compare (no run has ended)
    assert landing({"tab": "runs"}, summaries) == Landing("runs", newer, None)
    assert landing({}, []) == Landing("new", None, None)
    # what the address names and is not here is said (issue 36), and no other run stands in for it: New run, no run
    lost = landing({"tab": "nope", "run": "x"}, summaries)
    assert (lost.tab, lost.shown, lost.compared) == ("new", None, None)
    assert "there is no tab `nope` (the tabs are new, runs, monitor, compare, sweeps)" in lost.notice
    assert "`x` is not a run id" in lost.notice
    gone = landing({"tab": "monitor", "run": "999"}, summaries)
    assert (gone.tab, gone.shown, gone.compared) == ("monitor", None, None) and "there is no run 999" in gone.notice
    assert "&lt;b&gt;" in landing({"tab": "<b>"}, summaries).notice  # the address's text is shown, never markup


def test_log_tail_shows_our_lines_and_the_raw_output_only_on_request(tmp_path):
    from app.web.pages.monitor import refresh
    from trainer.supervise.run_files import RunFiles

    run_id = create_run(tiny_config(name="logged"))
    with get_sessionmaker().begin() as s:
        queries.mark_running(s, queries.get_run(s, run_id), 1, str(tmp_path), None)
        queries.add_log(s, run_id, "data: builtin:arithmetic (1257 prompts, 2 per step)")
    RunFiles(tmp_path).log.write_text("FutureWarning: `gradient_checkpointing` is deprecated\n{'loss': 0.0}\n")
    ours = refresh(run_id, [], 0.0, "step", 0, {}).log
    raw = refresh(run_id, [], 0.0, "step", 0, {}, raw=True).log
    assert "data: builtin:arithmetic" in ours and "FutureWarning" not in ours
    assert "data: builtin:arithmetic" in raw and "--- raw worker output ---\nFutureWarning" in raw
