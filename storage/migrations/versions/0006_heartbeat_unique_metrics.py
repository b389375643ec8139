"""A worker's heartbeat and step pace on the run row (issue 23, item 2), and one metric row per (run, key, step)
(item 4).

``heartbeat_at`` is written by the worker's writer thread every few seconds whatever the training loop does;
``stepped_at`` and ``step_seconds`` when a step ends. Together they tell a frozen worker (neither moves) from a slow
step (the heartbeat goes on). Runs from before this revision have none of them and read as they did.

Every completed run had two ``epoch`` rows at its last step (TRL's end-of-training log repeats it): duplicates are
removed, the newest row of each (run, key, step) kept, before the index becomes unique.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("stepped_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("step_seconds", sa.Float(), nullable=True))
    op.execute("DELETE FROM metrics WHERE id NOT IN (SELECT MAX(id) FROM metrics GROUP BY run_id, key, step)")
    op.drop_index("ix_metrics_run_key_step", table_name="metrics")
    op.create_index("ix_metrics_run_key_step", "metrics", ["run_id", "key", "step"], unique=True)


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
