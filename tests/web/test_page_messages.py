"""What the pages say in words, without a browser (issue 29): a verdict is a coloured word (the emoji beside it only
decorates), and an empty Runs table says what to do next."""

from __future__ import annotations

from app.web.widgets.empty_states import NO_RUNS, runs_table_note
from app.web.widgets.verdict import problem, verdict


def test_a_verdict_is_a_coloured_word_with_a_decorating_emoji():
    text = problem("no run with id 7")
    assert text == (
        '<span class="verdict verdict-bad"><span class="verdict-emoji" aria-hidden="true">❌</span> Problem:</span> no run with id 7'
    )
    assert verdict("ok", "Valid:").endswith("Valid:</span>")


def test_runs_table_note_says_what_to_do():
    assert runs_table_note([[1, "a"]], "") == ""
    assert runs_table_note([], None) == NO_RUNS
    assert runs_table_note([["", ""]], "") == NO_RUNS  # Gradio's empty table: one row of empty cells
    assert "No run matches *sweep*" in runs_table_note([], "sweep ")
