"""Storage: schema on first use, SQLite settings, metric round trips and the indexed range read."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import text
from sqlalchemy.orm import sessionmaker

from storage import queries
from storage.db import database_url, make_engine
from storage.models import Metric, RunStatus, Sample


@pytest.fixture
def Session(tmp_path):
    """A session factory on a fresh SQLite file."""
    engine = make_engine(f"sqlite:///{tmp_path / 'test.db'}")
    yield sessionmaker(engine, expire_on_commit=False)
    engine.dispose()


def test_schema_is_created_on_first_use_with_wal_and_busy_timeout(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    with engine.connect() as conn:
        tables = {r[0] for r in conn.execute(text("select name from sqlite_master where type='table'"))}
        assert {"runs", "metrics", "samples", "run_logs"} <= tables
        assert conn.execute(text("pragma journal_mode")).scalar() == "wal"
        assert conn.execute(text("pragma busy_timeout")).scalar() == 30000
        assert conn.execute(text("pragma foreign_keys")).scalar() == 1


def test_database_url_overrides_the_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "sqlite:///" + str(tmp_path / "elsewhere.db"))
    assert database_url().endswith("elsewhere.db")
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setenv("GRPO_STUDIO_HOME", str(tmp_path / "home"))
    assert database_url() == f"sqlite:///{tmp_path / 'home' / 'grpo-studio.db'}"


def test_run_life_cycle(Session):
    with Session.begin() as s:
        run = queries.create_run(s, "r", {"beta": 0.04}, total_steps=10)
        run_id = run.id
        assert run.status == "queued"
        queries.mark_running(s, run, pid=123, output_dir="/tmp/x")
    with Session.begin() as s:
        queries.set_progress(s, run_id, 4)
        run = queries.get_run(s, run_id)
        assert (run.status, run.pid, run.current_step, run.total_steps) == ("running", 123, 4, 10)
        queries.finish_run(s, run, RunStatus.FAILED, "boom")
    with Session.begin() as s:
        run = queries.get_run(s, run_id)
        assert (run.status, run.error) == ("failed", "boom") and run.finished_at is not None
        with pytest.raises(ValueError):
            queries.finish_run(s, run, RunStatus.RUNNING)


def test_any_logged_key_is_stored_and_nonfinite_values_survive(Session):
    with Session.begin() as s:
        run_id = queries.create_run(s, "r", {}).id
        logs = {
            "reward": 1.5,
            "rewards/my_fn/mean": 0.25,
            "loss": float("nan"),
            "grad_norm": float("inf"),
            "flag": True,
            "note": "text",
        }
        queries.add_metric_rows(s, queries.metric_rows(run_id, 3, logs, wall_time=100.0))
    with Session.begin() as s:
        assert queries.metric_keys(s, run_id) == ["grad_norm", "loss", "reward", "rewards/my_fn/mean"]
        assert queries.last_metric(s, run_id, "reward") == 1.5
        assert math.isnan(queries.last_metric(s, run_id, "loss"))
        assert queries.last_metric(s, run_id, "grad_norm") == math.inf
        assert queries.last_metric(s, run_id, "absent") is None


def test_metric_series_after_step_is_one_index_range_scan(Session):
    with Session.begin() as s:
        run_id = queries.create_run(s, "r", {}).id
        rows = []
        for step in range(1, 51):
            rows += queries.metric_rows(run_id, step, {"reward": step / 10, "kl": step / 100}, wall_time=float(step))
        queries.add_metric_rows(s, rows)
    with Session.begin() as s:
        points = queries.metric_series(s, run_id, "reward", after_step=47)
        assert [(p.step, p.value) for p in points] == [(48, 4.8), (49, 4.9), (50, 5.0)]
        assert sorted(queries.metrics_since(s, run_id, after_step=49)) == ["kl", "reward"]
        plan = s.execute(
            text(
                "explain query plan select step, value from metrics where run_id=:r and key=:k and step>:s order by step"
            ),
            {"r": run_id, "k": "reward", "s": 47},
        ).all()
    detail = " ".join(str(row[-1]) for row in plan)
    assert "USING INDEX ix_metrics_run_key_step" in detail and "run_id=? AND key=? AND step>?" in detail
    assert "TEMP B-TREE" not in detail  # no sort step: the index already orders by step


def test_samples_and_log(Session):
    with Session.begin() as s:
        run_id = queries.create_run(s, "r", {}).id
        queries.add_sample_rows(
            s,
            [
                {
                    "run_id": run_id,
                    "step": 2,
                    "group_index": 0,
                    "prompt": "p",
                    "completion": "c",
                    "rewards": {"correctness": 2.0, "int": 0.5},
                    "total_reward": 2.5,
                    "advantage": 0.7,
                    "reference_answer": "4",
                },
            ],
        )
        queries.add_log(s, run_id, "hello")
    with Session.begin() as s:
        (sample,) = queries.samples_at(s, run_id, 2)
        assert sample.rewards == {"correctness": 2.0, "int": 0.5} and sample.advantage == 0.7
        assert queries.sample_steps(s, run_id) == [2]
        assert [line.message for line in queries.log_tail(s, run_id)] == ["hello"]


def test_delete_run_removes_its_rows(Session):
    with Session.begin() as s:
        run_id = queries.create_run(s, "r", {}).id
        queries.add_metric_rows(s, queries.metric_rows(run_id, 1, {"reward": 1.0}, 1.0))
        queries.add_log(s, run_id, "x")
    with Session.begin() as s:
        queries.delete_run(s, run_id)
    with Session.begin() as s:
        assert queries.get_run(s, run_id) is None
        assert s.query(Metric).count() == 0 and s.query(Sample).count() == 0


def test_run_directories_are_unique_even_for_the_same_id(monkeypatch, tmp_path):
    from trainer.supervise.run_files import RunFiles

    monkeypatch.setenv("GRPO_STUDIO_HOME", str(tmp_path))
    first, second = RunFiles.new(1).root, RunFiles.new(1).root
    assert first != second and first.name.startswith("1-") and first.parent == tmp_path / "runs"


def test_sample_retention_keeps_recent_steps_and_every_nth_older_one(tmp_path):
    """A long run's samples thin out behind it: the latest 100 steps keep all, older ones every Nth step."""
    from storage.db import get_sessionmaker
    from trainer.job.db_writer import DbWriter

    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "long", {}, 400).id
    writer = DbWriter(run_id, flush_interval=0.01, keep_samples_every=10)
    for step in range(1, 401):
        row = dict(run_id=run_id, step=step, group_index=0, prompt="p", completion="c", rewards={}, total_reward=0.0)
        writer.samples([row])
        if step % 50 == 0:
            writer.flush()
    writer.close()
    with get_sessionmaker().begin() as s:
        steps = queries.sample_steps(s, run_id)
    recent = [x for x in steps if x > 300]
    older = [x for x in steps if x <= 200]
    assert recent == list(range(301, 401))
    assert older == list(range(10, 201, 10))


def test_packed_blocks_read_back_as_the_rows_they_copy_from_any_step(Session):
    """storage/series.py: the packed blocks plus the rows after them give exactly the metric rows' points, NaN
    included, whatever step a poll starts after; a resume's drop of later steps drops the blocks holding them."""
    import numpy as np

    from storage import series
    from storage.models import CHUNK_STEPS

    with Session.begin() as s:
        run_id = queries.create_run(s, "r", {}).id
        for step in range(1, 2 * CHUNK_STEPS + 31):
            logs = {"reward": step / 10, "loss": math.nan if step == 150 else 0.0}
            if step % 50 == 0:
                logs["eval/reward"] = step / 100  # a key logged at some steps only
            queries.add_metric_rows(s, queries.metric_rows(run_id, step, logs, wall_time=1000.0 + step))
            assert series.write_chunks(s, run_id, step) == (3 if step in (CHUNK_STEPS, 2 * CHUNK_STEPS) else 0)

    def same_as_rows(after: int) -> bool:
        rows = {k: np.asarray(v, dtype=float) for k, v in queries.metrics_since(s, run_id, after).items()}
        packed = series.series_since(s, run_id, after)
        return sorted(packed) == sorted(rows) and all(np.array_equal(packed[k], rows[k], equal_nan=True) for k in rows)

    with Session.begin() as s:
        for after in (-1, 0, 99, 100, 149, 150, 199, 200, 229, 230):
            assert same_as_rows(after), after
        assert math.isnan(series.series_since(s, run_id, 149)["loss"][0, 1])
        queries.drop_steps_after(s, run_id, 150)
    with Session.begin() as s:
        assert same_as_rows(-1)
        assert series.series_since(s, run_id)["reward"][-1, 0] == 150


def test_the_writer_packs_each_block_once_the_run_has_passed_it(tmp_path):
    """DbWriter keeps the packed blocks (storage/series.py) as it writes metric rows: after step 250, the blocks of
    steps 0-99 and 100-199 exist, 200-250 are rows only, and a read gives every step once."""
    from sqlalchemy import select

    from storage import series
    from storage.db import get_sessionmaker
    from storage.models import MetricChunk
    from trainer.job.db_writer import DbWriter

    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "packed", {}, 250).id
    writer = DbWriter(run_id, flush_interval=0.01)
    for step in range(1, 251):
        writer.metrics(queries.metric_rows(run_id, step, {"reward": step / 10, "kl": 0.0}, float(step)))
        if step % 40 == 0:
            writer.flush()
    writer.close()
    with get_sessionmaker().begin() as s:
        blocks = s.execute(
            select(MetricChunk.first_step, MetricChunk.key)
            .where(MetricChunk.run_id == run_id)
            .order_by(MetricChunk.first_step, MetricChunk.key)
        ).all()
        assert blocks == [(0, "kl"), (0, "reward"), (100, "kl"), (100, "reward")]
        assert series.series_since(s, run_id)["reward"][:, 0].tolist() == list(range(1, 251))


def test_a_server_that_refuses_more_connections_is_one_sentence():
    from storage.db import POOL_SIZE, describe_error

    text = describe_error(RuntimeError("FATAL:  sorry, too many clients already"))
    assert "refuses more connections" in text and f"holds up to {POOL_SIZE}" in text and "max_connections" in text


def test_an_io_error_of_sqlite_is_a_full_disk_only_when_the_disk_has_no_room(tmp_path):
    """SQLite says "disk I/O error" when its -wal or -shm file finds no room; with room left it is the disk itself
    (tests/storage/test_migrations.py meets the full case on a real full disk)."""
    from sqlalchemy import create_engine

    from storage.db import describe_error

    engine = create_engine(f"sqlite:///{tmp_path / 'r.db'}")
    text = describe_error(RuntimeError("disk I/O error"), engine)
    assert text == (
        f"the disk holding the database {tmp_path / 'r.db'} failed to read or write (disk I/O error): check the disk "
        "and its free space"
    )


def test_an_io_error_is_described_even_where_the_free_space_cant_be_read():
    """A path the file system refuses (a NUL in it) gives no figure, not a second error in place of the sentence."""
    from sqlalchemy import create_engine

    from storage.db import describe_error

    engine = create_engine("sqlite:////tmp/nul\x00/r.db")
    assert describe_error(RuntimeError("disk I/O error"), engine).endswith("check the disk and its free space")


def test_a_key_logged_twice_at_a_step_keeps_one_row_with_the_last_value(Session):
    """Issue 23, item 4: TRL's end-of-training log repeats ``epoch`` at the last step; the metric table keeps one row
    per (run, key, step), in one batch or across two, and the index refuses a plain second insert."""
    from sqlalchemy.exc import IntegrityError

    with Session.begin() as s:
        run_id = queries.create_run(s, "r", {}, 2).id
        queries.add_metric_rows(s, queries.metric_rows(run_id, 2, {"epoch": 0.5, "loss": 1.0}, 1.0))
        queries.add_metric_rows(
            s,
            queries.metric_rows(run_id, 2, {"epoch": 0.75}, 2.0) + queries.metric_rows(run_id, 2, {"epoch": 1.0}, 3.0),
        )
    with Session.begin() as s:
        counts = s.execute(text("SELECT key, COUNT(*) FROM metrics GROUP BY key ORDER BY key")).all()
        assert [tuple(c) for c in counts] == [("epoch", 1), ("loss", 1)]
        assert [(p.step, p.value, p.wall_time) for p in queries.metric_series(s, run_id, "epoch")] == [(2, 1.0, 3.0)]
    with pytest.raises(IntegrityError):
        with Session.begin() as s:
            s.execute(Metric.__table__.insert(), queries.metric_rows(run_id, 2, {"loss": 2.0}, 4.0))


def test_liveness_columns_start_fresh_and_follow_progress(Session):
    """mark_running gives a (resumed) run a new heartbeat and no step time; set_progress and heartbeat move them."""
    from datetime import UTC, datetime

    with Session.begin() as s:
        run = queries.create_run(s, "r", {}, 10)
        queries.mark_running(s, run, pid=1, output_dir="/tmp/x")
        run_id = run.id
    with Session.begin() as s:
        run = queries.get_run(s, run_id)
        assert run.heartbeat_at is not None and (run.stepped_at, run.step_seconds) == (None, None)
        at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        queries.set_progress(s, run_id, 3, stepped_at=at, step_seconds=1.5)
        queries.heartbeat(s, run_id, at)
    with Session.begin() as s:
        run = queries.get_run(s, run_id)
        stepped, beat = (t.replace(tzinfo=UTC) if t.tzinfo is None else t for t in (run.stepped_at, run.heartbeat_at))
        assert (run.current_step, stepped, beat, run.step_seconds) == (3, at, at, 1.5)
