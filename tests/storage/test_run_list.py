"""The run list (storage/summaries.py): it gives what the per-run reads gave, follows every change while keeping
the latest values between ticks, and search finds any run."""

from __future__ import annotations

import math

from app.web.pages.runs import COLUMNS, run_choices, run_rows
from storage import queries
from storage.db import get_sessionmaker
from storage.summaries import run_summaries


def _make_runs(n: int) -> list[int]:
    ids = []
    with get_sessionmaker().begin() as s:
        for i in range(n):
            config = {"model_name_or_path": "builtin:tiny", "dataset_name": f"data-{i}"}
            letter = "abcdef"[i]  # names without digits, so that searching for an id finds the id alone
            run = queries.create_run(s, f"sweep-{letter}" if i % 2 else f"baseline-{letter}", config, 10)
            for step in (1, 2):
                logs = {"reward": i + step / 10, "kl": math.nan if i == 3 else step / 100}
                queries.add_metric_rows(s, queries.metric_rows(run.id, step, logs, float(step)))
            if i == 2:
                queries.add_evaluation(s, run.id, "final", 10, 0, {"base": {"correct": 0.5}, "tuned": {"correct": 0.7}})
            ids.append(run.id)
    return ids


def test_the_aggregate_query_agrees_with_the_per_run_reads():
    ids = _make_runs(6)
    with get_sessionmaker().begin() as s:
        summaries = {r.id: r for r in run_summaries(s)}
        assert list(summaries) == sorted(ids, reverse=True)  # newest first
        for run_id in ids:
            summary = summaries[run_id]
            assert summary.last_reward == queries.last_metric(s, run_id, "reward")
            kl = queries.last_metric(s, run_id, "kl")
            assert summary.last_kl == kl or (summary.last_kl is None and math.isnan(kl))  # NaN is stored as NULL
            evaluation = queries.latest_evaluation(s, run_id, finished=True)
            assert summary.evaluation == (evaluation.results if evaluation else None)
            assert summary.dataset == queries.get_run(s, run_id).config["dataset_name"]


def test_search_finds_runs_by_name_or_id_and_the_table_shows_them():
    ids = _make_runs(6)
    rows = run_rows("SWEEP")
    assert [r[1] for r in rows] == ["sweep-f", "sweep-d", "sweep-b"] and len(rows[0]) == len(COLUMNS)
    assert [r[0] for r in run_rows(str(ids[2]))] == [ids[2]]
    assert next(r for r in run_rows() if r[0] == ids[2])[COLUMNS.index("held-out correct")] == "50.0% → 70.0%"
    assert [c[1] for c in run_choices()] == sorted(ids, reverse=True)


def test_the_kept_latest_values_follow_every_change_another_process_writes(database):
    """run_summaries keeps each run's latest reward, KL and evaluation between ticks and re-reads them only for runs
    whose row changed: every kind of change a worker, an evaluation job or the Runs page makes (from another
    connection, as from another process) shows at the next tick."""
    from sqlalchemy.orm import sessionmaker

    from storage.db import make_engine
    from storage.models import RunStatus

    ids = _make_runs(3)
    other = make_engine(database)  # another process's connection to the same database
    writer = sessionmaker(other, expire_on_commit=False)

    def tick() -> dict:
        with get_sessionmaker().begin() as s:
            return {r.id: r for r in run_summaries(s)}

    assert tick()[ids[0]].last_reward == 0.2
    with writer.begin() as s:  # a worker logs step 3: metrics and step counter in one transaction
        queries.add_metric_rows(s, queries.metric_rows(ids[0], 3, {"reward": 7.5, "kl": 0.25}, 3.0))
        queries.set_progress(s, ids[0], 3)
    summaries = tick()
    assert (summaries[ids[0]].last_reward, summaries[ids[0]].last_kl, summaries[ids[0]].current_step) == (7.5, 0.25, 3)
    assert summaries[ids[1]].last_reward == 1.2  # an unchanged run keeps its values

    with writer.begin() as s:  # a running worker: TRL's step end (the counter) comes before its log (the metrics)
        queries.mark_running(s, queries.get_run(s, ids[0]), 1, "/tmp/run")
        queries.set_progress(s, ids[0], 4)
    assert tick()[ids[0]].last_reward == 7.5
    with writer.begin() as s:
        queries.add_metric_rows(s, queries.metric_rows(ids[0], 4, {"reward": 8.5}, 4.0))
    assert tick()[ids[0]].last_reward == 8.5  # the row did not change, the run is running

    with writer.begin() as s:  # a resumed run drops the steps after its checkpoint
        queries.drop_steps_after(s, ids[0], 1)
    assert tick()[ids[0]].last_reward == 0.1

    with writer.begin() as s:  # an evaluation job finishes for a run whose row did not change
        evaluation = queries.add_evaluation(s, ids[1], "final", 10, 0, status=RunStatus.RUNNING)
    assert tick()[ids[1]].evaluation is None  # a running job's results are not shown
    with writer.begin() as s:
        results = {"base": {"correct": 0.25}, "tuned": {"correct": 0.75}}
        queries.finish_evaluation(s, s.merge(evaluation), RunStatus.COMPLETED, results)
    assert tick()[ids[1]].evaluation == results

    with writer.begin() as s:  # the launcher rewrites the config; a run is deleted; a new one queued
        run = queries.get_run(s, ids[2])
        queries.set_config(s, run, {**run.config, "model_name_or_path": "/abs/model"})
        queries.delete_run(s, ids[1])
        new = queries.create_run(s, "later", {"model_name_or_path": "builtin:tiny"}, 5).id
    summaries = tick()
    assert list(summaries) == [new, ids[2], ids[0]]
    assert summaries[ids[2]].model == "/abs/model" and summaries[new].last_reward is None
    other.dispose()


def test_search_matches_names_in_any_case_and_ids_exactly():
    ids = _make_runs(4)
    with get_sessionmaker().begin() as s:
        assert [r.name for r in run_summaries(s, search=" Sweep ")] == ["sweep-d", "sweep-b"]
        assert [r.id for r in run_summaries(s, search=str(ids[0]))] == [ids[0]]
        assert [r.name for r in run_summaries(s, search="%")] == []  # no SQL wildcards
        assert len(run_summaries(s, search="")) == 4 and len(run_summaries(s, limit=2)) == 2


def test_an_unchanged_run_list_costs_two_small_statements():
    """With nothing changed since the last tick, a tick reads the runs table and the finished evaluations' count, not
    each run's latest metrics (what made a tick cost 60 ms at 1,000 runs: bench/runs_list.py)."""
    from sqlalchemy import event

    _make_runs(5)
    statements = []
    engine = get_sessionmaker().kw["bind"]
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    with get_sessionmaker().begin() as s:
        first = run_summaries(s)
        assert any("metrics" in sql for sql in statements)
        statements.clear()
        assert run_summaries(s) == first
    assert len(statements) == 2 and not any("metrics" in sql for sql in statements)


def test_a_dashboard_tick_sends_only_what_changed():
    """The Runs tab's tick (app.web.server.refresh_lists) re-sends the table and the pickers only when they changed: a
    replaced picker resets while someone types in it, and a thousand-run table is ~100 KB of JSON a browser every 3 s."""
    import gradio as gr

    from app.web.server import refresh_lists

    ids = _make_runs(3)
    unchanged = gr.update()
    table, runs_picker, overlay, compare_picker, state = refresh_lists("", None)  # a browser's first tick
    assert [row[0] for row in table] == sorted(ids, reverse=True)
    assert [c[1] for c in runs_picker["choices"]] == [c[1] for c in overlay["choices"]] == sorted(ids, reverse=True)
    assert compare_picker["choices"] == []  # nothing has ended with an adapter

    again = refresh_lists("", state)
    assert again[:4] == (unchanged,) * 4 and again[4] == state

    with get_sessionmaker().begin() as s:  # a worker logs a step: the table changes, the pickers' labels don't
        queries.add_metric_rows(s, queries.metric_rows(ids[0], 3, {"reward": 9.25}, 3.0))
        queries.set_progress(s, ids[0], 3)
    table, runs_picker, overlay, compare_picker, state = refresh_lists("", state)
    assert table[-1][COLUMNS.index("step")] == "3/10" and (runs_picker, overlay, compare_picker) == (unchanged,) * 3

    table, *pickers, state = refresh_lists("sweep", state)  # the search box filters the same read
    assert [row[1] for row in table] == ["sweep-b"] and pickers == [unchanged] * 3
    with get_sessionmaker().begin() as s:  # a run deleted: both change
        queries.delete_run(s, ids[1])
    table, runs_picker, *_ = refresh_lists("sweep", state)
    assert table == [] and [c[1] for c in runs_picker["choices"]] == [ids[2], ids[0]]


def test_the_kept_list_ends_equal_to_a_fresh_read_after_random_concurrent_changes(database):
    """Another process changes runs at random (steps, metrics after their counter, resumes, evaluations, deletes, new
    runs, configs) while a dashboard ticks as fast as it can: once the changes stop, the next tick equals a read
    that keeps nothing; and a tick after each change equals it at once."""
    import random
    import threading

    from sqlalchemy.orm import sessionmaker

    from storage import summaries
    from storage.db import make_engine
    from storage.models import RunStatus

    ids = _make_runs(6)
    other = make_engine(database)
    writer = sessionmaker(other, expire_on_commit=False)
    done = threading.Event()

    def change(rng: random.Random) -> None:
        with writer.begin() as s:
            live = [r.id for r in queries.list_runs(s)]
            if not live:
                ids.append(queries.create_run(s, "new", {"model_name_or_path": "m"}, 10).id)
                return
            run = queries.get_run(s, rng.choice(live))
            kind = rng.randrange(7)
            step = run.current_step + 1
            if kind == 0:  # a step: counter and metrics together
                queries.add_metric_rows(s, queries.metric_rows(run.id, step, {"reward": rng.random()}, 1.0))
                queries.set_progress(s, run.id, step)
            elif kind == 1:  # metrics after the counter (a running worker)
                if run.status != RunStatus.RUNNING:
                    queries.mark_running(s, run, 1, "/tmp/run")
                queries.add_metric_rows(s, queries.metric_rows(run.id, run.current_step, {"kl": rng.random()}, 1.0))
            elif kind == 2:
                queries.drop_steps_after(s, run.id, max(0, run.current_step - 2))
            elif kind == 3:
                results = {"base": {"correct": rng.random()}, "tuned": {"correct": rng.random()}}
                queries.add_evaluation(s, run.id, "final", 10, 0, results)
            elif kind == 4 and run.status == RunStatus.RUNNING:
                queries.finish_run(s, run, RunStatus.COMPLETED)
            elif kind == 5:
                queries.set_config(s, run, {**run.config, "dataset_name": f"d{rng.randrange(100)}"})
            elif rng.random() < 0.3:
                queries.delete_run(s, run.id)
            else:
                ids.append(queries.create_run(s, "new", {"model_name_or_path": "m"}, 10).id)

    def dashboard() -> None:
        while not done.is_set():
            with get_sessionmaker().begin() as s:
                run_summaries(s)

    reader = threading.Thread(target=dashboard)
    reader.start()
    rng = random.Random(7)
    try:
        for _ in range(400):
            change(rng)
    finally:
        done.set()
        reader.join()

    def fresh() -> list:  # through the other engine, forgetting what it kept
        summaries._kept.pop(other, None)
        with writer.begin() as s:
            return run_summaries(s)

    def tick() -> list:
        with get_sessionmaker().begin() as s:
            return run_summaries(s)

    assert tick() == fresh() and len(fresh()) > 3
    for _ in range(150):
        change(rng)
        assert tick() == fresh()
    other.dispose()


def test_the_kl_column_of_a_beta_zero_run_is_the_kl_it_measured():
    """Issue 36 item 15: at beta 0 TRL logs no "kl"; the Runs table shows the newest KL the worker measured, and a run
    that logs TRL's own KL shows that one."""
    with get_sessionmaker().begin() as s:
        measured = queries.create_run(s, "beta-zero", {"beta": 0.0}, 10).id
        for step, value in ((5, 0.002), (10, 0.004)):
            queries.add_metric_rows(s, queries.metric_rows(measured, step, {"kl_measured": value}, float(step)))
        penalised = queries.create_run(s, "beta-positive", {"beta": 0.04}, 10).id
        queries.add_metric_rows(s, queries.metric_rows(penalised, 3, {"kl": 0.03, "kl_measured": 0.5}, 3.0))
    rows = {row[0]: row for row in run_rows()}
    assert rows[measured][COLUMNS.index("KL")] == 0.004
    assert rows[penalised][COLUMNS.index("KL")] == 0.03


def test_the_overlay_picker_never_offers_the_run_shown():
    """Issue 36 item 15: the Monitor's overlay offers every run but the one it shows, and lets go of it when that run
    becomes the one shown."""
    from app.web.server import overlay_choices, overlay_offered, refresh_lists

    ids = _make_runs(3)
    _, _, overlay, _, _ = refresh_lists("", None, ids[0])
    assert ids[0] not in [c[1] for c in overlay["choices"]] and ids[1] in [c[1] for c in overlay["choices"]]
    assert overlay_choices([("a", 1), ("b", 2)], 2) == [("a", 1)]
    moved = overlay_offered(ids[1])
    assert ids[1] not in [c[1] for c in moved["choices"]] and ids[2] in [c[1] for c in moved["choices"]]
    # no value: the browser lets go of the shown run itself (app/web/server.py OVERLAY_WITHOUT_SHOWN); a value sent from
    # here was the overlay as it stood when the event fired, and a late answer undid the user's next pick
    assert "value" not in moved, moved
