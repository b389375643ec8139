"""The rules of the data settings: what ``dataset_name`` names (trainer.config.names decides a built-in set, GSM8K,
a hub id or a local file) and, for a local file, that its head reads with the configured columns. That a local file,
which has no splits, is asked for none needs no reader, so it sits in trainer.config.names, where the loader
(trainer.loading.data.load_problems) takes it too."""

from __future__ import annotations

from pathlib import Path

from trainer.config.names import BUILTIN_DATASETS, GSM8K_NAMES, hub_id_problem, looks_like_path, protected_file_problem
from trainer.loading.datafiles import SUFFIXES, DataFileError, summarize


def check_dataset(name: str, question_column: str = "question", answer_column: str = "answer") -> list[str]:
    """What is wrong with ``dataset_name`` before anything loads it: an unknown built-in set, a missing or unreadable
    local file (only its head is read: the columns, the first rows, the encoding), the database's own files, or a
    name that is none of a built-in set, a hub id ``owner/name`` and a data file (trainer.config.names says why)."""
    if name in BUILTIN_DATASETS or name in GSM8K_NAMES:
        return []
    if name.startswith("builtin:"):
        return [f"dataset {name!r}: built-in data sets are {', '.join(BUILTIN_DATASETS)}"]
    if looks_like_path(name):
        path = Path(name).expanduser()
        if problem := protected_file_problem(name, "dataset"):
            return [problem]
        if not path.is_file():
            return [f"dataset {name!r}: no such file"]
        if path.suffix.lower() not in SUFFIXES:
            return [f"dataset {name!r}: expected a {', '.join(SUFFIXES)} file"]
        try:
            summarize(path, question_column, answer_column)
        except DataFileError as exc:
            return [str(exc)]
        return []
    if problem := hub_id_problem(name, "dataset", owner_required=True):
        return [
            f"{problem}; expected {', '.join(BUILTIN_DATASETS)}, a hub data set owner/name or the path of a "
            f"{', '.join(SUFFIXES)} file"
        ]
    return []
