"""The rules of the data settings: what ``dataset_name`` names (trainer.loading.names decides a built-in set, GSM8K,
a hub id or a local file) and, for a local file, that its head reads with the configured columns; and that a local
file, which has no splits, is asked for none. The loader (trainer.loading.data.load_problems) refuses the same split."""

from __future__ import annotations

from pathlib import Path

from trainer.loading.datafiles import SUFFIXES, DataFileError, summarize
from trainer.loading.names import BUILTIN_DATASETS, GSM8K_NAMES, hub_id_problem, looks_like_path, protected_file_problem


def check_dataset(name: str, question_column: str = "question", answer_column: str = "answer") -> list[str]:
    """What is wrong with ``dataset_name`` before anything loads it: an unknown built-in set, a missing or unreadable
    local file (only its head is read: the columns, the first rows, the encoding), the database's own files, or a
    name that is none of a built-in set, a hub id ``owner/name`` and a data file (trainer.loading.names says why)."""
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


def file_split_problem(name: str, split: str | None) -> str | None:
    """A local file has no splits: every row of it is read, whatever a ``split`` column of it says. A run asking for
    another split than "train" of a file would train on every row, the ones it meant to keep out among them (issue
    34: ``dataset_split: test`` was silently ignored), so it is refused; None when fine."""
    if split in (None, "", "train") or not looks_like_path(name):
        return None
    return (
        f"dataset_split {split!r}: {name} is a local file, which has no splits (every row of it is trained on, "
        "whatever a 'split' column says); expected 'train', with heldout_fraction to hold rows out, or one file per "
        "split"
    )
