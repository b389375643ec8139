"""Creating and reading a sweep (app/actions/sweeps.py, issue 41) through the action, the command line and the API:
every member is checked, and probed, before anything is created; members are queued runs that know their sweep and
point; a member the probe finds wasted is written already stopped with the probe's reason; the table marks the best.
The probe is replaced by a fake here (a real one starts a child process and loads the model: the slow test in
tests/sweeps/test_sweep_e2e.py runs it)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from app import actions
from app.actions import jobs
from app.cli.main import main
from app.web.api import endpoints
from storage import queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from storage.models import RunStatus
from tests.helpers import tiny_config
from trainer.config.access import Access

GRID = "beta=0,0.04 learning_rate=1e-5,5e-5"
WASTED = "every group scored alike: no advantage is ever non-zero"


@pytest.fixture
def probed(monkeypatch):
    """A fake probe: the point with beta 0.04 and learning rate 5e-5 is "wasted", every other "ok". Returns the
    configs probed, in order."""
    seen = []

    def report(config):
        seen.append(config)
        wasted = config.beta == 0.04 and config.learning_rate == 5e-5
        risks = [SimpleNamespace(message=WASTED, fatal=True)] if wasted else []
        return SimpleNamespace(verdict="wasted" if wasted else "ok", risks=risks)

    monkeypatch.setattr(
        jobs, "probe_each", lambda configs, access, prompts=8, on_report=None: [report(c) for c in configs]
    )
    return seen


def _text(**overrides) -> str:
    return json.dumps(tiny_config(**{"name": "grid", "eval_steps": 2, **overrides}).to_dict())


def _counts() -> tuple[int, int]:
    with get_sessionmaker().begin() as s:
        return len(sweep_rows.list_sweeps(s)), len(queries.list_runs(s))


def test_a_grid_creates_one_queued_member_per_point_and_skips_the_wasted_one(probed):
    swept = actions.sweep(_text(), Access(), GRID)
    assert [m.point for m in swept.members] == [
        {"beta": 0.0, "learning_rate": 1e-5},
        {"beta": 0.0, "learning_rate": 5e-5},
        {"beta": 0.04, "learning_rate": 1e-5},
        {"beta": 0.04, "learning_rate": 5e-5},
    ]
    assert [m.name for m in swept.members] == ["grid-1", "grid-2", "grid-3", "grid-4"]
    assert [c.name for c in probed] == ["grid-1", "grid-2", "grid-3", "grid-4"]  # each member's own point probed
    assert swept.members[3].skipped == f"skipped before training: the probe says the run would learn nothing ({WASTED})"
    with get_sessionmaker().begin() as s:
        runs = sweep_rows.member_runs(s, swept.sweep_id)
        assert [r.status for r in runs] == [RunStatus.QUEUED] * 3 + [RunStatus.STOPPED]
        assert [(r.config["beta"], r.config["learning_rate"]) for r in runs] == [
            (0.0, 1e-5),
            (0.0, 5e-5),
            (0.04, 1e-5),
            (0.04, 5e-5),
        ]
        assert runs[0].config["eval_steps"] == 2 and runs[0].sweep_point == {"beta": 0.0, "learning_rate": 1e-5}
        assert queries.log_tail(s, runs[3].id)[0].message.startswith("sweep: skipped before training: the probe")
        sweep = sweep_rows.get_sweep(s, swept.sweep_id)
        assert (sweep.objective, sweep.direction, sweep.state) == ("heldout/correct", "max", "active")
        assert sweep.base_config["name"] == "grid" and sweep.definition["settings"]["beta"] == [0.0, 0.04]


def test_a_sweep_block_in_the_config_is_a_sweep_without_a_grid(probed):
    block = {"method": "random", "members": 3, "seed": 5, "settings": {"temperature": {"low": 0.7, "high": 1.3}}}
    swept = actions.sweep(json.dumps({**json.loads(_text()), "sweep": block}), Access())
    again = [m.point for m in actions.sweep(json.dumps({**json.loads(_text()), "sweep": block}), Access()).members]
    assert swept.method == "random" and len(swept.members) == 3
    assert [m.point for m in swept.members] == again  # the seed gives the same points
    assert all(0.7 <= m.point["temperature"] <= 1.3 for m in swept.members)


def test_an_invalid_member_is_named_with_its_point_and_nothing_is_created(probed):
    with pytest.raises(actions.ActionError) as refused:
        actions.sweep(_text(), Access(), "num_generations=4,3")
    assert refused.value.problems == [
        "member 2 (num_generations=3): 8 completions per device × 1 accumulation steps = 8 completions per step is "
        "not divisible by the group size 3: use a multiple of 3 (e.g. per_device_train_batch_size 3)"
    ]
    assert _counts() == (0, 0) and probed == []  # nothing probed, nothing written


def test_a_problem_every_member_shares_is_said_once():
    with pytest.raises(actions.ActionError) as refused:
        actions.sweep(_text(eval_steps=0), Access(), GRID)
    assert refused.value.problems == [
        "the objective heldout/correct is scored by the periodic held-out evaluation, which is off: set eval_steps "
        "(e.g. 10), or name a training metric as sweep.objective"
    ]
    assert _counts() == (0, 0)


def test_a_config_with_no_sweep_and_no_grid_is_refused():
    with pytest.raises(actions.ActionError, match="no sweep: block and no grid"):
        actions.sweep(_text(), Access())


def test_a_probe_that_cannot_run_creates_nothing(monkeypatch):
    from trainer.probe import job

    def failing(configs, prompts, timeout, on_report=None):  # the child failed on the first member's probe
        raise job.ProbeError("the probe failed (exit 1); the details are in the server's log", 0)

    monkeypatch.setattr(job, "probe_each_in_child", failing)
    with pytest.raises(actions.ActionError, match="member 1: the probe could not run"):
        actions.sweep(_text(), Access(), GRID)
    assert _counts() == (0, 0)


def test_the_table_marks_the_member_with_the_best_objective_at_its_last_evaluation(probed):
    swept = actions.sweep(_text(), Access(), GRID)
    ids = [m.run_id for m in swept.members]
    heldout = {ids[0]: [0.2, 0.5], ids[1]: [0.2, 0.7, 0.4], ids[2]: [0.2, 0.6]}  # ids[1]'s best is not its last
    with get_sessionmaker().begin() as s:
        for run_id, values in heldout.items():
            rows = [
                r for i, v in enumerate(values) for r in queries.metric_rows(run_id, 2 * i, {"heldout/correct": v}, 1)
            ]
            queries.add_metric_rows(s, rows + queries.metric_rows(run_id, 4, {"reward": 1.5, "kl": 0.01}, 1))
    table = actions.sweep_detail(swept.sweep_id)
    assert [r.best for r in table.rows] == [False, False, True, False]
    assert [(r.objective_now, r.objective_best) for r in table.rows] == [
        (0.5, 0.5),
        (0.4, 0.7),
        (0.6, 0.6),
        (None, None),
    ]
    assert (table.rows[0].reward, table.rows[0].kl) == (1.5, 0.01)
    assert table.rows[3].stop_reason.startswith("skipped before training")
    (summary,) = actions.sweeps()
    assert (summary.members, summary.ended, summary.best_run_id, summary.best_value) == (4, 1, ids[2], 0.6)
    with pytest.raises(actions.ActionError, match="no sweep with id 99"):
        actions.sweep_detail(99)


def test_the_cli_prints_the_members_it_created(probed, tmp_path, capsys):
    config = tmp_path / "grid.yaml"
    config.write_text(_text())
    assert main(["sweep", str(config), "--grid", GRID, "--detach"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "sweep 1: grid (grid, 4 members, objective max heldout/correct)"
    assert out[1].split() == ["run", "1", "beta=0", "learning_rate=1e-05", "queued"]
    assert out[4].startswith("  run 4  beta=0.04 learning_rate=5e-05") and "skipped: skipped before training" in out[4]
    assert main(["sweeps"]) == 0
    assert "grid" in capsys.readouterr().out
    assert main(["sweeps", "--id", "1"]) == 0
    table = capsys.readouterr().out
    assert "the probe says the run would learn nothing" in table and table.count("queued") == 3


def test_the_cli_refuses_a_broken_grid_with_exit_2(tmp_path, capsys):
    config = tmp_path / "grid.yaml"
    config.write_text(_text())
    assert main(["sweep", str(config), "--grid", "beta"]) == 2
    assert "--grid 'beta': expected setting=value1,value2" in capsys.readouterr().err
    assert _counts() == (0, 0)


def test_the_api_creates_a_sweep_and_lists_it_and_its_members_are_runs(probed):
    api = endpoints(Access())
    answer = api["sweep"](_text(), GRID)
    assert answer["problems"] == [] and len(answer["members"]) == 4
    assert api["sweeps"](None)["sweeps"][0]["id"] == answer["sweep_id"]
    table = api["sweeps"](answer["sweep_id"])
    assert [r["run_id"] for r in table["rows"]] == [m["run_id"] for m in answer["members"]]
    assert {(r["id"], r["sweep_id"]) for r in api["runs"]("")} == {(m["run_id"], 1) for m in answer["members"]}
    refused = api["sweep"](_text(), "beta=-1,0")
    assert refused["sweep_id"] is None and refused["problems"][0].startswith("member 1 (beta=-1): beta -1")


def test_a_tpe_sweep_starts_with_its_startup_points_and_asks_each_next_one_after_the_results(probed):
    from trainer.config import sweep as sw
    from trainer.sweeps.tending import tend

    block = {"method": "tpe", "members": 3, "seed": 3, "settings": {"beta": {"low": 0.0, "high": 0.1}}}
    swept = actions.sweep(json.dumps({**json.loads(_text()), "sweep": block}), Access())
    assert len(swept.members) == 2  # TPE's random startup points; the third waits for their results
    with get_sessionmaker().begin() as s:
        assert tend(s) == [] and len(sweep_rows.member_runs(s, swept.sweep_id)) == 2  # none ended yet: none asked
        for member, value in zip(swept.members, (0.3, 0.6), strict=True):
            queries.add_metric_rows(s, queries.metric_rows(member.run_id, 2, {"heldout/correct": value}, 1))
            queries.finish_run(s, queries.get_run(s, member.run_id), RunStatus.COMPLETED)
    with get_sessionmaker().begin() as s:
        tend(s)
        runs = sweep_rows.member_runs(s, swept.sweep_id)
        third = runs[2]
        told = [(m.point, v) for m, v in zip(swept.members, (0.3, 0.6), strict=True)]
        assert third.sweep_point == sw.points(sw.parse(block), told, count=1)[0]  # reproducible from the results
        assert third.status == RunStatus.QUEUED and third.config["beta"] == third.sweep_point["beta"]
        assert (
            third.name == "grid-3"
            and queries.log_tail(s, third.id)[0].message == "sweep: asked after 2 results (TPE, leaning on them)"
        )
        queries.finish_run(s, third, RunStatus.FAILED, "boom")
    with get_sessionmaker().begin() as s:
        tend(s)  # all three members asked and ended: no fourth, and the sweep is finished
        assert len(sweep_rows.member_runs(s, swept.sweep_id)) == 3
        assert sweep_rows.get_sweep(s, swept.sweep_id).state == "finished"
