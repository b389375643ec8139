"""The rules of access: what a dashboard user may point a run at, decided by the operator who started
``grpo-studio serve`` (the dashboard and its API pass an :class:`Access`; the command line passes :data:`OPERATOR`).

The dashboard's users are not the machine's owner (see SECURITY.md): a form field holding a path must not become a
way to read the server's files (a data set's Preview shows its rows; a model directory's chat template is rendered).
So in the dashboard a model or data set is exactly one of: a built-in name, a hub id (trainer.config.names says why
a single word is no data set: ``text`` or ``csv`` would read the working directory), or the full path of something
under the data dir (where uploads go) or a directory the operator allowed with ``--allow-path``. Paths are resolved
(``..``, ``~``, symbolic links) before the check; relative paths are refused, so nothing is resolved against the
server's working directory; the database's files and the run directories are never accepted (another reader of the
SQLite files drops the dashboard's locks on them). The command line is not restricted: its user owns the machine.

A refused path gets the same message whether or not it exists, so the form is no oracle for the server's files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from storage.db import data_dir
from trainer.config.names import BUILTIN_MODEL, GSM8K_NAMES, hub_id_problem, looks_like_path, protected_files
from trainer.config.values import coerce
from trainer.safe_text import text_problem

PATH_FIELDS = ("model_name_or_path", "dataset_name")
ACCEPTED = {
    "dataset_name": "builtin:arithmetic, builtin:word-problems or builtin:code, a hub data set as owner/name (e.g. openai/gsm8k), or the full "
    "path of a .jsonl, .json, .csv or .parquet file",
    "model_name_or_path": f"{BUILTIN_MODEL}, a hub model id (name or owner/name), or the full path of a model directory "
    "or .gguf file",
}


@dataclass(frozen=True)
class Access:
    """The operator's choices for this dashboard: custom reward code allowed or not, and extra readable dirs.
    ``any_path``: no path rule at all (the command line's, :data:`OPERATOR`: its user owns the machine)."""

    allow_custom_rewards: bool = False
    allowed_dirs: tuple[str, ...] = ()
    any_path: bool = False

    def roots(self) -> list[Path]:
        """Directories under which local paths are accepted (the data dir first)."""
        return [Path(os.path.realpath(data_dir())), *(Path(os.path.realpath(d)) for d in self.allowed_dirs)]

    def path_problems(self, settings: dict) -> list[str]:
        """One problem per model or data-set field of a config mapping that the dashboard won't read."""
        if self.any_path:
            return []
        return [p for name in PATH_FIELDS if (p := self.value_problem(name, str(settings.get(name) or "")))]

    def change_problems(self, changes: dict) -> list[str]:
        """The changed settings of a fork (setting name → value, text or typed) that the dashboard won't accept: a
        model or data-set path it won't read, custom reward code it doesn't allow."""
        refused = self.path_problems(changes)
        if "reward_funcs" in changes:
            try:
                rewards = coerce(changes["reward_funcs"], list[str])
            except (TypeError, ValueError):
                rewards = []  # the fork's own validation names the wrong type
            refused += custom_reward_problems(self, rewards)
        if "tools" in changes or "environment" in changes:
            try:
                tools = coerce(changes.get("tools", []), list[str])
            except (TypeError, ValueError):
                tools = []
            refused += custom_tool_problems(self, tools, str(changes.get("environment") or ""))
        return refused

    def value_problem(self, field: str, value: str) -> str | None:
        """Why the dashboard won't read ``value`` for ``field``, or None. A value is exactly one of: a built-in name,
        a hub id, or the full path of something under the data dir or an ``--allow-path`` directory that is neither
        the database nor a run's directory. Anything else is refused naming the accepted forms, before anything
        opens it; nothing is resolved against the server's working directory."""
        if unsafe := text_problem(field, value):
            return unsafe  # a NUL or control character never reaches the file system
        if not value or value.startswith("builtin:") or (field == "dataset_name" and value in GSM8K_NAMES):
            return None  # an unknown built-in name is the config check's to report
        if not looks_like_path(value):
            refusal = hub_id_problem(value, field, owner_required=field == "dataset_name")
            return None if refusal is None else f"{refusal}; expected {ACCEPTED[field]}"
        if not value.startswith(("/", "~")):
            return f"{field} {value!r}: the dashboard reads local files only by their full path; expected {ACCEPTED[field]}"
        if not self.allows(value):
            where = ", ".join(str(r) for r in self.roots())
            return (
                f"{field}: local paths are limited to {where} in the dashboard, outside the database and the run "
                "directories; upload the file, or ask the operator to start the server with --allow-path DIR"
            )
        return None

    def allows(self, value: str) -> bool:
        """Whether a local path resolves to somewhere under one of the roots, and is not one of the database's files
        or inside a run's directory (checkpoints, logs, job scripts: the dashboard's, not its users')."""
        target = Path(os.path.realpath(Path(value).expanduser()))
        runs = Path(os.path.realpath(data_dir() / "runs"))
        if target in protected_files() or target == runs or target.is_relative_to(runs):
            return False
        return any(target == root or target.is_relative_to(root) for root in self.roots())


def custom_reward_problems(access: Access, reward_funcs: list[str]) -> list[str]:
    """Custom reward code (``file.py:function``) is refused unless the operator allowed it."""
    custom = [r for r in reward_funcs if ":" in r]
    if not custom or access.allow_custom_rewards:
        return []
    return [
        f"reward_funcs: custom reward {', '.join(custom)}: custom reward code runs arbitrary Python, so the dashboard "
        "only accepts it when started with --allow-custom-rewards"
    ]


def custom_tool_problems(access: Access, tools: list[str], environment: str) -> list[str]:
    """A user's own tool or environment (``file.py:name``) is code of the same kind as a custom reward, so it is
    refused under the same rule: unless the operator allowed custom code with ``--allow-custom-rewards``."""
    if access.allow_custom_rewards:
        return []
    found = []
    if custom := [t for t in tools if ":" in t and not t.startswith("builtin:")]:
        found.append(
            f"tools: custom tool {', '.join(custom)}: custom tool code runs arbitrary Python, so the dashboard "
            "only accepts it when started with --allow-custom-rewards"
        )
    if ":" in environment and not environment.startswith("builtin:"):
        found.append(
            f"environment: custom environment {environment}: custom environment code runs arbitrary Python, so the "
            "dashboard only accepts it when started with --allow-custom-rewards"
        )
    return found


# The command line's user owns the machine: any path, custom reward code imported and dry-run (SECURITY.md). The
# dashboard and its API pass the rules its operator chose.
OPERATOR = Access(allow_custom_rewards=True, any_path=True)
