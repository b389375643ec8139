"""Persistence for grpo-studio: SQLAlchemy models, the engine/session factory and query functions.

This package knows nothing of Gradio or torch. The worker writes runs, metrics, samples and logs here; the dashboard
reads them back. Query functions take a ``session``; callers own the transaction (``with Session.begin() as s:``).
"""

from storage.db import data_dir, get_engine, get_sessionmaker, reset_engine
from storage.models import Base, Evaluation, Metric, Run, RunLog, RunStatus, Sample

__all__ = [
    "Base",
    "Evaluation",
    "Metric",
    "Run",
    "RunLog",
    "RunStatus",
    "Sample",
    "data_dir",
    "get_engine",
    "get_sessionmaker",
    "reset_engine",
]
