"""What the model is learning (issue 31): each held-out problem's result at each periodic evaluation, and per-token
values (log-probability, entropy, the reference's log-probability) of a bounded number of sampled completions per
step, and what the optional curriculum decided at each step. Runs from before this revision have neither: their learning map shows training prompts only, and their
completions no token view.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _run_id() -> sa.Column:
    return sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "heldout_results",
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("problem", sa.Integer(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("correct", sa.Float(), nullable=False),
    )
    op.create_index("ix_heldout_results_run_step", "heldout_results", ["run_id", "step"])
    op.create_table(
        "sample_tokens",
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.JSON(), nullable=False),
        sa.Column("logprobs", sa.LargeBinary(), nullable=False),
        sa.Column("entropies", sa.LargeBinary(), nullable=True),
        sa.Column("ref_logprobs", sa.LargeBinary(), nullable=True),
    )
    op.create_index("ix_sample_tokens_run_step", "sample_tokens", ["run_id", "step"])
    op.create_table(
        "curriculum_steps",
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("drawn", sa.JSON(), nullable=False),
        sa.Column("skipped", sa.JSON(), nullable=False),
    )
    op.create_index("ix_curriculum_steps_run_step", "curriculum_steps", ["run_id", "step"])


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
