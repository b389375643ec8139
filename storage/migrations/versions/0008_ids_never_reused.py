"""Ids are never reused (issue 35): SQLite hands the highest rowid out again after a delete unless the table is
declared AUTOINCREMENT, so ``?run=6``, an export, a tracker's run or a script holding 6 silently pointed at the next
run. The tables whose ids reach users (runs, evaluations, and log lines, whose id is /log's cursor) are rebuilt with
AUTOINCREMENT, rows and ids kept; SQLite then never goes below the highest id it has stored. Ids deleted before this
revision, above the highest one left, can't be known and may still be given once more. PostgreSQL's sequences never
reuse an id: nothing to do there.

The rebuild copies each table and drops the old one, which on SQLite needs foreign keys off (a dropped ``runs``
would cascade to every row that belongs to a run): storage.migrate runs the migrations on such a connection and
checks the foreign keys before it commits.

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TABLES = ("runs", "evaluations", "run_logs")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": True}):
            pass


def downgrade() -> None:
    raise NotImplementedError("grpo-studio migrates forward only")
