"""The New run page's file handling that needs nothing of the form: keeping an uploaded data set under the data dir,
and reading a local model's chat template source for the prompt preview (rendered sandboxed elsewhere)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from app.errors import user_error
from storage.db import data_dir, slug
from trainer.loading.backend import BUILTIN_MODEL
from trainer.loading.chat_template import MAX_TEMPLATE_CHARS

MAX_UPLOAD_BYTES = 2_000_000_000


def upload_dataset(file: str | None) -> tuple[str, str]:
    """Keep an uploaded data file under the data dir and point dataset_name at it."""
    if not file:
        raise user_error("choose a .jsonl, .csv or .parquet file")
    source = Path(file)
    if source.suffix.lower() not in (".jsonl", ".json", ".csv", ".parquet"):
        raise user_error(f"{source.name}: expected a .jsonl, .csv or .parquet file")
    if source.stat().st_size > MAX_UPLOAD_BYTES:
        raise user_error(f"{source.name}: {source.stat().st_size / 1e9:.1f} GB; uploads are limited to 2 GB")
    target_dir = data_dir() / "uploads"
    target_dir.mkdir(parents=True, exist_ok=True)
    # a new name for every upload, so that one never replaces a file an earlier run still trains on
    handle, name = tempfile.mkstemp(
        dir=target_dir, prefix=slug(source.stem, "data") + "-", suffix=source.suffix.lower()
    )
    os.close(handle)
    target = Path(name)
    shutil.copyfile(source, target)
    return str(target), f"Uploaded to {target}. Set the question/answer columns, then preview."


def local_chat_template(model: str) -> str | None:
    """The model's chat template source, read from its files without loading transformers (it is rendered only by
    trainer.loading.chat_template, sandboxed)."""
    if model == BUILTIN_MODEL:
        from trainer.loading.tiny import CHAT_TEMPLATE

        return CHAT_TEMPLATE
    path = Path(model).expanduser()
    try:
        if (path / "chat_template.jinja").is_file():
            return (path / "chat_template.jinja").read_text()[: MAX_TEMPLATE_CHARS + 1]
        config_file = path / "tokenizer_config.json"
        if config_file.is_file() and config_file.stat().st_size < 20_000_000:
            source = json.loads(config_file.read_text()).get("chat_template")
            return source if isinstance(source, str) else None
    except (OSError, ValueError, AttributeError):
        return None
    return None
