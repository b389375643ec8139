"""Issue 57.5: a sweep ranks its members by trained steps only. The held-out score at step 0 is the base model's,
alike for every member, so a member that has not trained yet has no objective, is never the best, and in a ``min``
sweep the base's value is no member's best; and a TPE sweep says when its asked points start to lean on results
(Optuna's ``n_startup_trials``: optuna 5.1 samplers/_tpe/sampler.py)."""

from __future__ import annotations

from app import actions
from app.actions.sweeps import tpe_note
from storage import queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from storage.models import RunStatus
from trainer.config import sweep as sw
from trainer.sweeps.prune import judge
from trainer.sweeps.tending import ask_next

GRID = {"method": "grid", "objective": "heldout/correct", "settings": {"beta": [0.0, 0.04]}}


def _member(s, sweep, name: str, points: list[tuple[int, float]], step: int, beta: float = 0.0):
    run = queries.create_run(s, name, {}, 12, sweep_id=sweep.id, sweep_point={"beta": beta})
    rows = [r for st, v in points for r in queries.metric_rows(run.id, st, {sweep.objective: v}, 1.0)]
    queries.add_metric_rows(s, rows)
    run.current_step = step
    return run


def test_an_untrained_member_with_only_the_bases_score_is_not_the_best_of_a_grid_sweep():
    """The audit's grid sweep: the member at step 1 of 12 held only the base's step-0 0.79 and was marked best."""
    spec = sw.parse(GRID)
    with get_sessionmaker().begin() as s:
        sweep = sweep_rows.create_sweep(s, "grid", spec.to_dict(), {}, spec.objective, spec.direction)
        trained = _member(s, sweep, "grid-1", [(0, 0.79), (5, 0.5), (10, 0.6)], 10)
        untrained = _member(s, sweep, "grid-2", [(0, 0.79)], 1, beta=0.04)
        sweep_id, trained_id, untrained_id = sweep.id, trained.id, untrained.id
    table = actions.sweep_detail(sweep_id)
    rows = {r.run_id: r for r in table.rows}
    assert (rows[untrained_id].objective_now, rows[untrained_id].objective_best, rows[untrained_id].best) == (
        None,
        None,
        False,
    )
    assert (rows[trained_id].objective_now, rows[trained_id].objective_best, rows[trained_id].best) == (0.6, 0.6, True)
    assert (table.summary.best_run_id, table.summary.best_value) == (trained_id, 0.6)
    assert table.curves[untrained_id] == [] and table.curves[trained_id] == [(5, 0.5), (10, 0.6)]


def test_in_a_min_sweep_the_bases_value_is_no_members_best_so_the_median_rule_can_stop_one():
    """Every member's best was the base's 0.79 when step 0 counted, so no member was ever below the median."""
    spec = sw.parse({**GRID, "direction": "min", "objective": "loss", "prune": {"median_peers": 2}})
    mine = {"loss": [(0, 0.1), (5, 0.9), (10, 0.95)]}  # at step 0 the base's 0.1 beat every trained value
    peers = [[(5, 0.3), (10, 0.2)], [(5, 0.4), (10, 0.3)]]  # the peers as the pass reads them: trained steps only
    stop = judge(spec, mine, peers)
    assert stop is not None and stop.rule == "median" and stop.step == 10
    assert "its best loss so far, 0.9, is above the median of the 2 other members at that step (0.25)" in stop.reason


def test_tpe_is_told_only_trained_results(monkeypatch):
    """A member that ended with the base's score alone tells TPE nothing (it is a used point, not a result)."""
    spec = sw.parse({**GRID, "method": "tpe", "members": 8, "settings": {"beta": {"low": 0.0, "high": 0.1}}})
    told_to_tpe = {}

    def points(spec_, told, count, used):
        told_to_tpe.update(told=list(told), used=list(used))
        return [{"beta": 0.05}]

    monkeypatch.setattr("trainer.sweeps.tending.points", points)
    with get_sessionmaker().begin() as s:
        sweep = sweep_rows.create_sweep(s, "tpe", spec.to_dict(), {}, spec.objective, spec.direction)
        done = _member(s, sweep, "tpe-1", [(0, 0.79), (12, 0.4)], 12, beta=0.01)
        base_only = _member(s, sweep, "tpe-2", [(0, 0.79)], 0, beta=0.02)
        for run in (done, base_only):
            queries.finish_run(s, run, RunStatus.COMPLETED if run is done else RunStatus.FAILED)
        runs = list(sweep_rows.member_runs(s, sweep.id))
        objectives = {r.id: sweep_rows.objective_points(s, r.id, spec.objective) for r in runs}
        asked = ask_next(s, sweep, spec, runs, objectives)
        log = [line.message for line in queries.log_tail(s, asked.id)]
    assert told_to_tpe["told"] == [({"beta": 0.01}, 0.4)] and told_to_tpe["used"] == [{"beta": 0.02}]
    assert log == ["sweep: asked after 1 results (TPE, at random: TPE leans from 2 results)"]


def test_a_tpe_sweep_says_when_its_asked_points_start_to_lean():
    tpe = {**GRID, "method": "tpe", "members": 12, "settings": {"beta": {"low": 0.0, "high": 0.1}}}
    assert sw.leans_after(sw.parse(tpe)) == 3  # a quarter of 12 startup members: TPESampler's n_startup_trials
    assert tpe_note(tpe, 1) == (
        "TPE draws at random until it is told 3 results (members that ended with a trained objective): 1 so far, so a "
        "point asked now is as random as the startup members'."
    )
    assert tpe_note(tpe, 3) == "TPE leans toward the good points: it is told 3 results (it draws at random until 3)."
    assert tpe_note(GRID, 5) == ""


def test_optunas_tpe_draws_at_random_before_n_startup_results_and_leans_after():
    """What the note says, checked on Optuna itself: with fewer told results than leans_after, the asked point is
    the one a random sampler under the same seed draws; with as many, it is not."""
    import optuna

    spec = sw.parse({**GRID, "method": "tpe", "members": 8, "seed": 3, "settings": {"beta": {"low": 0.0, "high": 1.0}}})
    n = sw.leans_after(spec)
    told = [({"beta": 0.1 * i}, 0.1 * i) for i in range(1, n + 1)]
    before = sw.points(spec, told[: n - 1], count=1)[0]["beta"]
    after = sw.points(spec, told, count=1)[0]["beta"]

    def random_draw():
        """The first point of Optuna's random sampler under the sweep's seed (TPESampler's own startup sampler)."""
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=spec.seed))
        beta = study.ask({"beta": optuna.distributions.FloatDistribution(0.0, 1.0)}).params["beta"]
        return float(f"{beta:.4g}")  # as trainer.config.sweep keeps a drawn value

    assert before == random_draw()
    assert after != random_draw()
