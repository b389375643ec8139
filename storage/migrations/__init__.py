"""Alembic migrations of the grpo-studio schema (see storage/migrate.py)."""
