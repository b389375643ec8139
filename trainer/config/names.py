"""What a model or data-set setting names: a built-in, a hub repository or a local path, decided here once for the
loaders (trainer/loading/), validation (trainer/review/) and the dashboard's access rules
(trainer/config/access.py). It needs nothing but the setting's text (and where the database is, to protect its files),
so it sits in the config's ground, below the loaders that ask it.

Why it matters: the loaders resolve names in their own order, and some orders read the machine. ``datasets`` takes a
name without a slash that matches one of its packaged builders (``text``, ``csv``, ``json``, ``parquet``,
``imagefolder``, ...) as that builder, which then reads every file under the *working directory* (datasets 5.2
load.py:1047-1054); and it loads ``owner/name`` from a local folder of that name when one exists there
(load.py:1059-1062), as transformers does for models. So:

- a data set is ``builtin:...``, the ``gsm8k`` alias, a hub id with its owner (``owner/name``, checked by
  huggingface_hub's own rules), or a path to a data file; a single word is refused, never handed to ``datasets``;
- a model is ``builtin:tiny`` (or ``builtin:tiny-tools``), a hub id (``name`` or ``owner/name``), a local directory or
  a local ``.gguf`` file (trainer.loading.gguf);
- a hub id that also names something in the working directory is refused: which one would load depends on where the
  process runs, and the dashboard must never read its working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

BUILTIN_MODEL = "builtin:tiny"
# the built-in model's tool-calling variant (trainer.loading.tiny_tools): its template renders tool calls, compactly
BUILTIN_TOOL_MODEL = "builtin:tiny-tools"
BUILTIN_MODELS = (BUILTIN_MODEL, BUILTIN_TOOL_MODEL)
DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
GSM8K_NAMES = ("gsm8k", "openai/gsm8k")
BUILTIN_DATASETS = ("builtin:arithmetic", "builtin:arithmetic3", "builtin:word-problems", "builtin:code")
MODEL_FILE_SUFFIX = ".gguf"  # a model in one file, as llama.cpp, Ollama and LM Studio keep them


def looks_like_path(text: str) -> bool:
    """Whether a model or data set name is meant as a local path rather than a hub id or a built-in name."""
    if text.startswith("builtin:"):
        return False
    return (
        text.startswith((".", "/", "~"))
        or text.count("/") > 1
        or "\\" in text
        or Path(text).suffix.lower() in (*DATA_SUFFIXES, MODEL_FILE_SUFFIX)
    )


def hub_id_problem(name: str, what: str, owner_required: bool) -> str | None:
    """Why ``name`` is not a hub repository id, or None. huggingface_hub's own check (validate_repo_id: letters,
    digits, ``-_.``, at most 96 characters, no ``--`` or ``..``), and for a data set an owner (``owner/name``)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    expected = "owner/name" if owner_required else "name or owner/name"
    if owner_required and name.count("/") != 1:
        return f"{what} {name!r}: a hub data set is named owner/name (e.g. openai/gsm8k)"
    try:
        validate_repo_id(name)
    except HFValidationError:
        return (
            f"{what} {name!r}: not a hub id ({expected} of letters, digits, - _ and ., at most 96 characters, "
            "without -- or ..)"
        )
    if os.path.lexists(name):
        return (
            f"{what} {name!r} is a hub id but also names something in the working directory "
            f"({os.getcwd()}), which grpo-studio does not read by accident: give its full path, or ./{name}"
        )
    return None


def protected_files() -> list[Path]:
    """The database's own files when it is SQLite (the file, its WAL, shared memory and journal): only the engine may
    open them. Another reader opening and closing one drops the process's POSIX locks on it, after which SQLite can
    delete the WAL under a live connection and corrupt the database."""
    from storage.db import database_url

    url = database_url()
    if not url.startswith("sqlite:///"):
        return []
    database = Path(os.path.realpath(url.removeprefix("sqlite:///").split("?")[0]))
    return [database, *(database.with_name(database.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]


def protected_file_problem(value: str, what: str) -> str | None:
    """A problem when the local path ``value`` is (or links to) one of the database's files."""
    try:
        target = Path(os.path.realpath(Path(value).expanduser()))
    except (OSError, ValueError):
        return None
    if target in protected_files():
        return f"{what} {value!r} is grpo-studio's own database, which is never read as training data or a model"
    return None


def file_split_problem(name: str, split: str | None) -> str | None:
    """A local file has no splits: every row of it is read, whatever a ``split`` column of it says. A run asking for
    another split than "train" of a file would train on every row, the ones it meant to keep out among them (issue
    34: ``dataset_split: test`` was silently ignored), so it is refused; None when fine. The loader
    (trainer.loading.data.load_problems) refuses the same split, so the rule sits here, below both."""
    if split in (None, "", "train") or not looks_like_path(name):
        return None
    return (
        f"dataset_split {split!r}: {name} is a local file, which has no splits (every row of it is trained on, "
        "whatever a 'split' column says); expected 'train', with heldout_fraction to hold rows out, or one file per "
        "split"
    )
