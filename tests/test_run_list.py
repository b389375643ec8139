"""The run list (storage/summaries.py): one statement gives what the per-run reads gave, and search finds any run."""

from __future__ import annotations

import math

from app.pages.runs import COLUMNS, run_choices, run_rows
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
