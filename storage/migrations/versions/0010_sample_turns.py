"""A tool run's sampled completion as its turns (issue 42): the assistant's text, each tool call with its arguments,
each tool's answer, in order (trainer.tools.turns says the shape). Runs without tools, and every row from before this
revision, leave it NULL: their ``completion`` text is all there is, read as before.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("samples", sa.Column("turns", sa.JSON(), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
