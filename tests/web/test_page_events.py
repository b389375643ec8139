"""What the page's events ask of Gradio's frontend: which components keep a loading status (app.web.server
untracked_when_hidden). The page rewrites every kept status at each status message of each event, each by a walk of
the whole component tree, so the events that fill the form, and the polls, keep none on its fields."""

from __future__ import annotations

from pathlib import Path

import gradio as gr


def _progress_targets(fn) -> list:
    """The components Gradio's page keeps a loading status on for ``fn``: its show_progress_on, else its outputs."""
    return fn.outputs if fn.show_progress_on is None else fn.show_progress_on


def test_no_event_keeps_loading_statuses_on_the_forms_fields_and_hidden_ones_keep_none(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_STUDIO_HOME", str(tmp_path))
    from app.web import server

    demo = server.build_app()
    fields = {
        block._id
        for block in demo.blocks.values()
        if (getattr(block, "elem_id", None) or "").startswith("field-")
        or any((getattr(parent, "elem_id", None) or "").startswith("field-") for parent in _parents(block))
    }
    assert len(fields) >= 60  # the form's fields, found by their boxes (#field-NAME)
    kept: set[int] = set()
    for fn in demo.fns.values():
        if fn.fn is None:
            continue  # a JavaScript-only step keeps no loading status
        targets = {block._id for block in _progress_targets(fn)}
        if fn.show_progress == "hidden":
            assert targets == set(), (fn.name, len(targets))
        # a file dropped on the data set's field shows its upload there; no event spins over the whole form
        assert len(targets & fields) <= 1, (fn.name, len(targets & fields))
        kept |= targets
    # every status the page can ever keep, over all its events: a few dozen answers and charts, not the form
    assert len(kept) < 60, len(kept)
    # what a page that is only watched keeps: the loads' and the timers' (a spinner on a table or two while it loads)
    by_itself = [fn for fn in demo.fns.values() if fn.fn is not None and _fires_by_itself(fn)]
    assert len(by_itself) >= 8
    assert len({block._id for fn in by_itself for block in _progress_targets(fn)}) <= 4


def _parents(block):
    parent = getattr(block, "parent", None)
    while parent is not None:
        yield parent
        parent = getattr(parent, "parent", None)


def _fires_by_itself(fn) -> bool:
    """An event that runs without a user's action: a page load or a timer's tick."""
    return any(event in ("load", "tick") for _, event in fn.targets)


def test_gradios_page_keeps_statuses_on_show_progress_on_else_the_outputs_and_rewrites_them_all():
    """The frontend code the rule above relies on, as the installed Gradio ships it: an empty show_progress_on
    (truthy in JavaScript) names no component, and each status update walks every kept status."""
    assets = Path(gr.__file__).parent / "templates" / "frontend" / "assets"
    code = "\n".join(path.read_text(errors="replace") for path in assets.glob("Blocks-*.js"))
    assert "get progress_targets(){return this.show_progress_on||this.outputs}" in code
    assert "update_loading_stati_state(){await Promise.all(Object.entries(this.loading_stati.current)" in code
