"""Evaluations become jobs: status, progress (done of total answers), error, the job's process, when it finished;
results stay empty until it has. Rows written before read as completed.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # batch mode: SQLite can't ALTER a column's nullability in place, so Alembic copies the table (PostgreSQL alters)
    with op.batch_alter_table("evaluations") as batch:
        batch.alter_column("results", existing_type=sa.JSON(), nullable=True)
        batch.add_column(sa.Column("status", sa.String(16), nullable=False, server_default="completed"))
        batch.add_column(sa.Column("done", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("total", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("error", sa.Text(), nullable=True))
        batch.add_column(sa.Column("pid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("pid_started", sa.String(32), nullable=True))
        batch.add_column(sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
