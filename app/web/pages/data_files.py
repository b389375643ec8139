"""The New run page's file handling that needs nothing of the form: keeping an uploaded data set under the data dir,
and removing the uploads no run names."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from app import actions
from app.markup import md
from app.web.widgets.errors import user_error

MAX_UPLOAD_BYTES = 1_000_000_000  # serve --max-upload-size's default
# An upload that no run names after this long was tried and left (a preview, a wrong file): removed at start-up.
UNUSED_UPLOAD_DAYS = 7


def upload_dataset(file: str | None) -> tuple[str, str]:
    """Keep an uploaded data file under the data dir and point dataset_name at it."""
    if not file:
        raise user_error("choose a .jsonl, .csv or .parquet file")
    source = Path(file)
    if source.suffix.lower() not in (".jsonl", ".json", ".csv", ".parquet"):
        raise user_error(f"{source.name}: expected a .jsonl, .csv or .parquet file")
    # its size was checked while it arrived (serve --max-upload-size, Gradio's max_file_size)
    target_dir = actions.data_dir() / "uploads"
    target_dir.mkdir(parents=True, exist_ok=True)
    # a new name for every upload, so that one never replaces a file an earlier run still trains on
    handle, name = tempfile.mkstemp(
        dir=target_dir, prefix=actions.slug(source.stem, "data") + "-", suffix=source.suffix.lower()
    )
    os.close(handle)
    target = Path(name)
    shutil.copyfile(source, target)
    _forget_cached(source)
    return str(target), f"Uploaded to {md(target)}. Set the question/answer columns, then preview."


def _forget_cached(source: Path) -> None:
    """Remove Gradio's cached copy of an upload once it is kept under the data dir (it would otherwise stay in the
    server's temp folder until the cache is next cleaned)."""
    cache = Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio").resolve()
    if source.resolve().is_relative_to(cache):
        source.unlink(missing_ok=True)


def prune_uploads(max_age_days: float = UNUSED_UPLOAD_DAYS) -> list[Path]:
    """Delete uploads older than ``max_age_days`` that no run's config names (a run's data set is never removed
    while the run exists); returns what was deleted. Called when the dashboard starts."""
    folder = actions.data_dir() / "uploads"
    if not folder.is_dir():
        return []
    named = actions.dataset_names()
    cutoff = time.time() - max_age_days * 86400
    removed = []
    for path in folder.iterdir():
        if path.is_file() and str(path) not in named and path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
