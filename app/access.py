"""What a dashboard user may point a run at, decided by the operator who started ``grpo-studio serve``.

The dashboard's users are not the machine's owner (see SECURITY.md): a form field holding a path must not become a
way to read the server's files (a data set's Preview shows its rows; a model directory's chat template is rendered).
So in the dashboard, a local model directory or data file is accepted only under the data dir (where uploads go) or
a directory the operator allowed with ``--allow-path``; paths are resolved (``..``, ``~``, symbolic links) before the
check. Hub ids and built-in names are not paths. The command line is not restricted: its user owns the machine.

A refused path gets the same message whether or not it exists, so the form is no oracle for the server's files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from storage.db import data_dir

PATH_FIELDS = ("model_name_or_path", "dataset_name")


@dataclass(frozen=True)
class Access:
    """The operator's choices for this dashboard: custom reward code allowed or not, and extra readable dirs."""

    allow_custom_rewards: bool = False
    allowed_dirs: tuple[str, ...] = ()

    def roots(self) -> list[Path]:
        """Directories under which local paths are accepted (the data dir first)."""
        return [Path(os.path.realpath(data_dir())), *(Path(os.path.realpath(d)) for d in self.allowed_dirs)]

    def path_problems(self, settings: dict) -> list[str]:
        """One problem per path field of a config mapping that points outside the allowed directories."""
        problems = []
        for name in PATH_FIELDS:
            value = str(settings.get(name) or "")
            if is_local_path(value) and not self.allows(value):
                where = ", ".join(str(r) for r in self.roots())
                problems.append(
                    f"{name}: local paths are limited to {where} in the dashboard; upload the file, or ask the "
                    "operator to start the server with --allow-path DIR"
                )
        return problems

    def allows(self, value: str) -> bool:
        """Whether a local path resolves to somewhere under one of the roots."""
        target = Path(os.path.realpath(Path(value).expanduser()))
        return any(target == root or target.is_relative_to(root) for root in self.roots())


def is_local_path(value: str) -> bool:
    """Whether a model/data set value names the server's file system rather than the hub or a built-in."""
    if value.startswith("builtin:") or not value:
        return False
    path = Path(value).expanduser()
    looks_like_path = value.startswith((".", "/", "~")) or value.count("/") > 1 or "\\" in value
    return looks_like_path or path.suffix.lower() in (".jsonl", ".json", ".csv", ".parquet") or path.exists()


def custom_reward_problems(access: Access, reward_funcs: list[str]) -> list[str]:
    """Custom reward code (``file.py:function``) is refused unless the operator allowed it."""
    custom = [r for r in reward_funcs if ":" in r]
    if not custom or access.allow_custom_rewards:
        return []
    return [
        f"custom reward {', '.join(custom)}: custom reward code runs arbitrary Python, so the dashboard "
        "only accepts it when started with --allow-custom-rewards"
    ]
