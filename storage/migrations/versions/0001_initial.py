"""The schema of grpo-studio 0.1, the first release: runs, metrics, samples, run logs, evaluations.

A database created by 0.1 (``create_all``, before migrations existed) has exactly these tables and is stamped with
this revision on first start instead of running it (see storage/migrate.py).

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _create_run_rows_table(name: str, *columns: sa.Column, indexes: dict[str, list[str]] | None = None) -> None:
    """A table of a run's rows: ``id`` and ``run_id`` (deleted with the run) first, then ``columns``, then its
    indexes; by default one on ``(run_id, id)``, named ``ix_<name>_run_id``, for a run's rows in the order written."""
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        *columns,
    )
    for index, index_columns in (indexes or {f"ix_{name}_run_id": ["run_id", "id"]}).items():
        op.create_index(index, name, index_columns)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("pid", sa.Integer()),
        sa.Column("pid_started", sa.String(32)),
        sa.Column("output_dir", sa.Text()),
        sa.Column("error", sa.Text()),
        sa.Column("current_step", sa.Integer(), nullable=False),
        sa.Column("total_steps", sa.Integer(), nullable=False),
        sa.Column("backend", sa.Text()),
    )
    op.create_index("ix_runs_status", "runs", ["status"])
    _create_run_rows_table(
        "metrics",
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("value", sa.Float()),
        sa.Column("raw", sa.String(16)),
        sa.Column("wall_time", sa.Float(), nullable=False),
        indexes={"ix_metrics_run_key_step": ["run_id", "key", "step"], "ix_metrics_run_step": ["run_id", "step"]},
    )
    _create_run_rows_table(
        "samples",
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("group_index", sa.Integer(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("completion", sa.Text(), nullable=False),
        sa.Column("rewards", sa.JSON(), nullable=False),
        sa.Column("total_reward", sa.Float()),
        sa.Column("advantage", sa.Float()),
        sa.Column("reference_answer", sa.Text()),
        indexes={"ix_samples_run_step": ["run_id", "step"]},
    )
    _create_run_rows_table(
        "run_logs",
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("level", sa.String(10), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
    )
    _create_run_rows_table(
        "evaluations",
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("adapter", sa.String(40), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
