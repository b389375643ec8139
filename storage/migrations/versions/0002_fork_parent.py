"""A run forked from a checkpoint of another run records that run and the checkpoint's step (issue 15).

Two nullable columns on ``runs``; existing runs are no forks, so they stay NULL.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("parent_run_id", sa.Integer()))
    op.add_column("runs", sa.Column("parent_step", sa.Integer()))


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
