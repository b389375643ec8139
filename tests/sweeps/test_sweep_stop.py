"""Issue 58.3: a sweep can be stopped, resumed and deleted. Before, stopping or deleting a TPE sweep's members made
the scheduler's pass ask TPE for a new member at once, and no verb stopped the sweep itself."""

from __future__ import annotations

import pytest

from app import actions
from app.actions.sweep_control import STOPPED_WITH_SWEEP
from app.web import api
from storage import queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from storage.models import RunStatus, SweepState
from tests.helpers import tiny_config
from trainer.config import sweep as sw
from trainer.config.access import Access
from trainer.sweeps.tending import tend

TPE = {"method": "tpe", "members": 8, "objective": "heldout/correct", "settings": {"beta": {"low": 0.0, "high": 0.1}}}


def _tpe_sweep(statuses: list[RunStatus]) -> tuple[int, list[int]]:
    """A TPE sweep of 8 members with one member per status given (none ended with a result: TPE asks at random)."""
    spec = sw.parse(TPE)
    with get_sessionmaker().begin() as s:
        sweep = sweep_rows.create_sweep(s, "tpe", spec.to_dict(), tiny_config().to_dict(), spec.objective, "max")
        ids = []
        for i, status in enumerate(statuses):
            run = queries.create_run(
                s, f"tpe-{i + 1}", tiny_config().to_dict(), 4, sweep_id=sweep.id, sweep_point={"beta": i / 100}
            )
            if status.terminal:
                queries.finish_run(s, run, status)
            ids.append(run.id)
        return sweep.id, ids


def _members(sweep_id: int) -> list[tuple[int, str, str | None]]:
    with get_sessionmaker().begin() as s:
        return [(r.id, str(r.status), r.sweep_stop) for r in sweep_rows.member_runs(s, sweep_id)]


def test_stopping_a_tpe_sweeps_members_one_by_one_lets_it_ask_another_which_stopping_the_sweep_does_not():
    """The audit's fault, then the verb: a member stopped by hand is followed at once by a newly asked one; after
    stop_sweep the pass asks none, however often it runs."""
    sweep_id, ids = _tpe_sweep([RunStatus.QUEUED, RunStatus.QUEUED])
    actions.stop(ids[0])
    actions.stop(ids[1])
    with get_sessionmaker().begin() as s:
        tend(s)
    assert len(_members(sweep_id)) == 3  # the sweep went on: a new point asked the moment its members stopped
    changed = actions.stop_sweep(sweep_id)
    assert (changed.state, changed.members) == ("stopped", [_members(sweep_id)[2][0]])
    for _ in range(3):
        with get_sessionmaker().begin() as s:
            tend(s)
    assert [status for _, status, _ in _members(sweep_id)] == ["stopped"] * 3  # nothing asked, nothing queued
    assert _members(sweep_id)[2][2] == STOPPED_WITH_SWEEP


def test_a_stopped_sweep_resumes_the_members_its_stop_ended_and_asks_again():
    sweep_id, ids = _tpe_sweep([RunStatus.COMPLETED, RunStatus.QUEUED])
    actions.stop_sweep(sweep_id)
    with pytest.raises(actions.ActionError, match=f"sweep {sweep_id} is stopped: nothing to stop"):
        actions.stop_sweep(sweep_id)
    changed = actions.resume_sweep(sweep_id)
    assert (changed.state, changed.members) == ("active", [ids[1]])  # the completed member is left as it is
    assert _members(sweep_id) == [(ids[0], "completed", None), (ids[1], "queued", None)]
    with get_sessionmaker().begin() as s:
        assert sweep_rows.get_sweep(s, sweep_id).state == SweepState.ACTIVE
        assert queries.log_tail(s, ids[1])[-1].message == "sweep: resumed with its sweep"
    with pytest.raises(actions.ActionError, match=f"sweep {sweep_id} is active: only a stopped sweep resumes"):
        actions.resume_sweep(sweep_id)


def test_deleting_a_member_of_an_active_sweep_is_refused_and_a_sweep_with_a_live_member_too():
    sweep_id, ids = _tpe_sweep([RunStatus.COMPLETED, RunStatus.QUEUED])
    with pytest.raises(actions.ActionError) as refused:
        actions.delete(ids[0])
    assert refused.value.message == (
        f"run {ids[0]} is a member of sweep {sweep_id}, which is active: deleting it would make the sweep ask another "
        f"point in its place; stop the sweep first (grpo-studio stop_sweep {sweep_id})"
    )
    with pytest.raises(actions.ActionError) as refused:
        actions.delete_sweep(sweep_id)
    assert refused.value.message == (
        f"sweep {sweep_id} has 1 live member (run {ids[1]}): stop it first (grpo-studio stop_sweep {sweep_id})"
    )
    actions.stop_sweep(sweep_id)
    changed = actions.delete_sweep(sweep_id)
    assert changed.members == ids
    with get_sessionmaker().begin() as s:
        assert sweep_rows.get_sweep(s, sweep_id) is None and [queries.get_run(s, i) for i in ids] == [None, None]


def test_the_api_offers_the_three_verbs_with_checked_ids():
    endpoints = api.endpoints(Access())
    sweep_id, ids = _tpe_sweep([RunStatus.QUEUED])
    assert endpoints["stop_sweep"](sweep_id) == {"sweep_id": sweep_id, "state": "stopped", "members": ids}
    assert endpoints["resume_sweep"](sweep_id) == {"sweep_id": sweep_id, "state": "active", "members": ids}
    import gradio as gr

    with pytest.raises(gr.Error, match="no sweep with id 999"):
        endpoints["delete_sweep"](999)
    with pytest.raises(gr.Error, match="sweep_id must be a whole number"):
        endpoints["stop_sweep"](10**30)


def test_the_sweeps_page_asks_for_the_confirmation_naming_the_sweep_before_deleting():
    from app.web.pages.sweeps import delete_label, delete_picked

    sweep_id, ids = _tpe_sweep([RunStatus.COMPLETED])
    actions.stop_sweep(sweep_id)
    refused = delete_picked(sweep_id, False)
    assert f"yes, delete sweep {sweep_id} and every member" in refused and delete_label(sweep_id) in refused
    assert _members(sweep_id) == [(ids[0], "completed", None)]  # nothing deleted
    assert f"sweep {sweep_id} and its 1 members" in delete_picked(sweep_id, True)
    assert actions.sweeps() == []


def test_the_cli_stops_and_resumes_a_sweep(capsys):
    from app.cli.main import main

    sweep_id, ids = _tpe_sweep([RunStatus.QUEUED])
    assert main(["stop_sweep", str(sweep_id)]) == 0
    assert capsys.readouterr().out == (
        f"sweep {sweep_id} stopped: no member is asked or pruned; members stopped: {ids[0]}\n"
    )
    assert main(["resume_sweep", str(sweep_id)]) == 0
    assert capsys.readouterr().out == f"sweep {sweep_id} is active again; members queued to continue: {ids[0]}\n"
