"""Sweeps (issue 41): a table of sweeps (definition, base config, objective, state), and on each run the sweep it
belongs to, its point and why the sweep stopped it. Runs from before this revision belong to no sweep: the three
columns stay NULL.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("base_config", sa.JSON(), nullable=False),
        sa.Column("objective", sa.String(200), nullable=False),
        sa.Column("direction", sa.String(3), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sqlite_autoincrement=True,
    )
    if op.get_bind().dialect.name == "sqlite":
        # SQLite adds a column with a REFERENCES clause in place (Alembic would copy the whole table to add the
        # constraint): runs' rows and its AUTOINCREMENT (0008) stay as they are
        op.execute("ALTER TABLE runs ADD COLUMN sweep_id INTEGER REFERENCES sweeps (id)")
    else:
        op.add_column("runs", sa.Column("sweep_id", sa.Integer(), sa.ForeignKey("sweeps.id")))
    op.add_column("runs", sa.Column("sweep_point", sa.JSON()))
    op.add_column("runs", sa.Column("sweep_stop", sa.Text()))
    op.create_index("ix_runs_sweep_id", "runs", ["sweep_id"])


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
