"""The Monitor's state line names no run but the one picked (issue 59): a poll that fails says so for the run picked,
rather than leave the line as it was (another run's state, or "Reading run N…" for ever)."""

from __future__ import annotations

from app import actions
from app.web.pages import monitor


def test_a_poll_that_fails_says_so_for_the_run_picked(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(actions, "monitor_view", broken)
    view = monitor.refresh(7, [], 0.0, "step", 0, {})
    assert "the Monitor could not read run 7; the server's log says why" in view.header
    assert view.live is None  # the polls keep their pace
