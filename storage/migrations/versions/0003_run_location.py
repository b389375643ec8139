"""Where a run's worker runs: ``host`` (the machine, or a Slurm job's node list) and ``slurm_job_id`` (the job the
Slurm executor submitted, trainer.supervise.slurm), both empty for runs from before.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:  # SQLite can add columns in place; batch mode keeps both dialects alike
        batch.add_column(sa.Column("host", sa.Text()))
        batch.add_column(sa.Column("slurm_job_id", sa.String(32)))


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
