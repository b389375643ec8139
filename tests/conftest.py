"""Shared fixtures. Everything is offline: models are built here, data is generated.

The data directory of the whole session is a temp dir (``GRPO_STUDIO_HOME``), so the built-in model is built once
per test session into it, and no test touches ``~/.grpo-studio``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.db import reset_engine

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def studio_home(tmp_path_factory) -> Path:
    """A fresh data dir for the session; the database is the SQLite file in it."""
    home = tmp_path_factory.mktemp("grpo-studio-home")
    os.environ["GRPO_STUDIO_HOME"] = str(home)
    os.environ.pop("DATABASE_URL", None)
    os.environ["HF_HUB_OFFLINE"] = "1"  # a test that reaches for the hub fails fast instead of hanging
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    reset_engine()
    yield home
    reset_engine()


@pytest.fixture(scope="session")
def tiny_model_path(studio_home) -> Path:
    """The real built-in model (``builtin:tiny``), built once into the session's data dir."""
    from trainer.tiny import tiny_model_dir

    return tiny_model_dir()


@pytest.fixture(scope="session")
def format_learner_path(tmp_path_factory) -> Path:
    """A smaller sibling of the built-in model, warmed up for only 60 steps (vs 1500): it writes the reasoning/answer
    format about half the time and its completions still vary a lot, so a reward moves within a few GRPO steps."""
    from trainer.tiny import TinySpec, build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("format-learner"), TinySpec(sft_steps=60))
