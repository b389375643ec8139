"""Packed copies of metric series, block by block, so the first chart read of a long run is a few thousand rows
(storage/series.py). Runs logged before this revision have no blocks and are read from their metric rows as before.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "metric_chunks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("first_step", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("points", sa.LargeBinary(), nullable=False),
    )
    op.create_index("ix_metric_chunks_run_step", "metric_chunks", ["run_id", "first_step"])


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
