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
    op.create_table(
        "metrics",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("value", sa.Float()),
        sa.Column("raw", sa.String(16)),
        sa.Column("wall_time", sa.Float(), nullable=False),
    )
    op.create_index("ix_metrics_run_key_step", "metrics", ["run_id", "key", "step"])
    op.create_index("ix_metrics_run_step", "metrics", ["run_id", "step"])
    op.create_table(
        "samples",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("group_index", sa.Integer(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("completion", sa.Text(), nullable=False),
        sa.Column("rewards", sa.JSON(), nullable=False),
        sa.Column("total_reward", sa.Float()),
        sa.Column("advantage", sa.Float()),
        sa.Column("reference_answer", sa.Text()),
    )
    op.create_index("ix_samples_run_step", "samples", ["run_id", "step"])
    op.create_table(
        "run_logs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("level", sa.String(10), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
    )
    op.create_index("ix_run_logs_run_id", "run_logs", ["run_id", "id"])
    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("adapter", sa.String(40), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
    )
    op.create_index("ix_evaluations_run_id", "evaluations", ["run_id", "id"])


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
