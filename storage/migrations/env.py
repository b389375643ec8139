"""Alembic's environment for grpo-studio: migrations run on the connection that ``storage.migrate`` hands over
(``config.attributes["connection"]``), inside its transaction and lock; there is no alembic.ini to configure."""

from alembic import context

from storage.models import Base

connection = context.config.attributes["connection"]
# render_as_batch: SQLite can't ALTER most things in place; batch mode copies the table, as Alembic documents.
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
