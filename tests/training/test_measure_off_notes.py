"""A measure of the worker's that turned itself off mid-run (issue 38, item 2): the run's log says so with the reason,
and the KL chart and the token view read it back, instead of an empty line or a word blaming a setting."""

from __future__ import annotations

from app.web.widgets.chart_notes import KL_MEASURED_NOTE, KL_NOTE, add_notes, chart_notes
from app.web.widgets.charts import CHARTS, build_all
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config

KL = [c.name for c in CHARTS].index("kl")
REASON = "RuntimeError: The size of tensor a (21) must match the size of tensor b (16)"


def _run_with_lines(*lines: str) -> int:
    run_id = create_run(tiny_config(beta=0.0))
    with get_sessionmaker().begin() as s:
        for line in lines:
            queries.add_log(s, run_id, line, "WARNING")
    return run_id


def test_the_runs_log_line_is_read_back_per_measure():
    run_id = _run_with_lines(
        "model path: plain",
        queries.measure_off_line("kl_measured", 3, REASON),
        queries.measure_off_line("token_values", 5, "OSError: gone"),
        queries.measure_off_line("kl_measured", 9, "a later line changes nothing"),
    )
    with get_sessionmaker().begin() as s:
        assert queries.measures_off(s, run_id) == {
            "kl_measured": f"at step 3: {REASON}",
            "token_values": "at step 5: OSError: gone",
        }
        assert queries.measures_off(s, _run_with_lines("model path: plain")) == {}


def test_the_kl_chart_says_the_measure_turned_off_and_why():
    off = {"kl_measured": f"at step 3: {REASON}"}
    note = chart_notes({"beta": 0.0}, off)["kl"]
    assert note.startswith("measured KL turned off at step 3, so the line ends there") and REASON in note
    drawn = add_notes(build_all({"run": {"kl_measured": [(1, 0.01, 0.0), (2, 0.02, 1.0)]}}), {"beta": 0}, off=off)
    assert [a.text for a in drawn[KL].layout.annotations] == [note]  # not "this line is measured"
    empty = add_notes(build_all({"run": {}}), {"beta": 0}, off=off)
    assert [a.text for a in empty[KL].layout.annotations] == [note]
    still = add_notes(build_all({"run": {"kl_measured": [(1, 0.01, 0.0)]}}), {"beta": 0})
    assert [a.text for a in still[KL].layout.annotations] == [KL_MEASURED_NOTE] and KL_NOTE != note
    assert "kl" not in chart_notes({"beta": 0.04}, off)  # at beta > 0 the chart is TRL's own KL


def test_the_token_view_says_the_capture_turned_off_from_that_step():
    from app.web.pages.learning import token_view

    run_id = _run_with_lines(queries.measure_off_line("token_values", 4, "OSError: gone"))
    assert token_view(run_id, 4, 0) == (
        "<small>No token values: the token capture turned itself off at step 4: OSError: gone.</small>"
    )
    assert "token_samples_per_step" in token_view(run_id, 3, 0)  # before it turned off: not kept, by the setting
