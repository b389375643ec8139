"""What every action shares: the one user-facing error class, reading a config from whatever a caller holds, and
finding a run.

An action takes plain values (a RunConfig, a mapping, YAML/JSON text or a file; ids; options) and returns a typed
result, or raises :class:`ActionError`: the dashboard shows its message where the user pressed, the command line
prints it and exits with ``exit_code``, the API answers it as JSON. Nothing here imports Gradio or torch.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from storage import queries
from storage.db import data_dir
from storage.models import Run
from trainer.config import ConfigError, RunConfig
from trainer.config.file import ConfigFileError, read_mapping_isolated, text_size_problem

ConfigSource = RunConfig | Mapping[str, Any] | str | Path


class ActionError(Exception):
    """A refusal the user can act on: ``message`` in one sentence, ``problems`` when there are several (a config's
    every problem), ``exit_code`` for the command line (2: the request was wrong; 1: something outside refused)."""

    def __init__(self, message: str, problems: list[str] | None = None, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.problems = list(problems or [message])
        self.exit_code = exit_code


class FetchError(ActionError):
    """A valid config that names a model or data set this machine can't fetch (the hub out of reach, and it is not in
    the local cache): said as it is, since no setting of the config is wrong."""


def read_mapping_of(source: ConfigSource) -> tuple[dict[str, Any], str]:
    """The flat mapping a config source holds and a name for it in messages; an empty one is refused
    (:func:`_nonempty`). Text and files are parsed in a child process with limits (trainer.config.file): a hostile
    document costs that process, not the dashboard."""
    mapping, where = _read_mapping(source)
    return _nonempty(mapping, where), where


def _nonempty(mapping: dict[str, Any], where: str) -> dict[str, Any]:
    """``mapping``, or ActionError when it holds no setting: every setting has a default (the reference recipe, a 3B
    model on GSM8K from the hub), so an empty config would start the biggest run there is on any machine (issue 58:
    ``/launch("")`` queued it on a CPU-only machine without the hub)."""
    if mapping:
        return mapping
    raise ActionError(
        f"{'the config' if where == 'config' else where} is empty: give the run's settings as YAML or JSON (at least "
        "model_name_or_path and dataset_name), or start from a preset (grpo-studio presets lists them)"
    )


def _read_mapping(source: ConfigSource) -> tuple[dict[str, Any], str]:
    if isinstance(source, RunConfig):
        return source.to_dict(), "config"
    if isinstance(source, Mapping):
        return dict(source), "config"
    if isinstance(source, Path):
        try:
            return read_mapping_isolated(source), str(source)
        except ConfigFileError as exc:
            raise ActionError(str(exc)) from None
    if problem := text_size_problem(source):
        raise ActionError(problem)
    folder = data_dir() / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    # JSON is YAML too; the file lives only while it is parsed, under the data dir (never the working directory)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=folder, encoding="utf-8") as handle:
        handle.write(source)
        handle.flush()
        try:
            mapping = read_mapping_isolated(handle.name)
        except ConfigFileError as exc:
            raise ActionError(str(exc).replace(handle.name, "the config text")) from None
    return mapping, "the config text"


def config_of(source: ConfigSource, name: str | None = None) -> tuple[RunConfig, list[str]]:
    """The RunConfig a source describes (renamed ``name`` when given) and notes on ignored keys; values of the
    wrong type raise ActionError with every problem."""
    if isinstance(source, RunConfig) and not name:
        return source, []
    mapping, _ = read_mapping_of(source)
    if name:
        mapping["name"] = name
    try:
        return RunConfig.from_dict(mapping)
    except ConfigError as exc:
        raise ActionError(problems_message(exc.problems), exc.problems) from None


def find_run(session: Session, run_id: int | str | None) -> Run:
    """The run with this id, or ActionError saying there is none."""
    if run_id in (None, ""):
        raise ActionError("pick a run first")
    try:
        wanted = int(run_id)
    except (TypeError, ValueError):
        raise ActionError(f"run id {run_id!r}: expected a whole number, as the runs list shows it") from None
    run = queries.get_run(session, wanted)
    if run is None:
        raise ActionError(f"no run with id {wanted}")
    return run


def problems_message(problems: list[str]) -> str:
    """One sentence for a list of problems (an ActionError's message)."""
    return problems[0] if len(problems) == 1 else f"{len(problems)} problems: " + "; ".join(problems)
