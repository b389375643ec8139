"""Every rule a config must pass, composed: the one answer to "why was my config refused?".

:func:`check` is what every entry calls with what it holds (a mapping from a form, a file, the API or a run's row; or
a RunConfig) and the operator's :class:`~trainer.config.access.Access`: it refuses a path the dashboard may not read
before anything reads it, reads each value as its field's type, and runs every rule. :func:`problems` is the rules
over a RunConfig, :func:`warnings` the valid-but-doubtful, :func:`load_and_validate` a config file checked.

The rules themselves sit in the module of the concept they check. Those that need nothing but the config and the
setting's text are the config's ground, trainer/config/ beside this package: the config's own
(RunConfig.field_problems, with trainer.config.rules), what a name names and a local file's splits
(trainer.config.names), the cluster (trainer.config.cluster), the operator's access (trainer.config.access) and a
fork's changes (trainer.config.fork). Those that look at what a setting names sit here beside this composition,
because they import the loaders or the reward registry: the model and GPU path (:mod:`.model`), the data
(:mod:`.data`), held-out evaluation (:mod:`.heldout`), the rewards (:mod:`.rewards`) and the tools (:mod:`.tools`).
The loaders import the ground and never this package, so no two folders import each other; and this package stands
beside trainer/config/ (which it imports) rather than inside it, so no folder imports one above it.
``import trainer.config`` does not load this package: the entries (app/actions, app/web/widgets/form.py, the worker, a fork, the
probe) import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.config.access import OPERATOR, Access, custom_reward_problems, custom_tool_problems
from trainer.config.cluster import cluster_problems, cluster_warnings
from trainer.config.names import file_split_problem
from trainer.config.run_config import ConfigError, RunConfig
from trainer.loading.data import load_problems
from trainer.review.data import check_dataset
from trainer.review.heldout import check_heldout, heldout_warnings
from trainer.review.model import check_model, gpu_path_problems, machine_warnings, sampling_warnings
from trainer.review.rewards import reward_mix_warnings, reward_problems
from trainer.review.tools import tool_problems
from trainer.safe_text import text_problem


@dataclass(frozen=True)
class Review:
    """What :func:`check` found: the config (None when a value could not even be read as its type), every problem
    with it, and notes on the keys it ignored."""

    config: RunConfig | None
    problems: list[str]
    notes: list[str] = field(default_factory=list)


def check(source: Mapping[str, Any] | RunConfig, access: Access = OPERATOR) -> Review:
    """Every problem with a config under the operator's ``access``: a model or data path the dashboard may not read
    is refused before anything reads it (and no file is then looked at), custom reward code is neither imported nor
    accepted unless allowed, and values of the wrong type are reported with the problems of the values that did
    read (so a second try isn't needed)."""
    mapping = source.to_dict() if isinstance(source, RunConfig) else dict(source)
    refused = access.path_problems(mapping)

    def checked(config: RunConfig) -> list[str]:
        found = problems(config, check_rewards=access.allow_custom_rewards, check_files=not refused)
        return (
            found
            + custom_reward_problems(access, config.reward_funcs)
            + custom_tool_problems(access, config.tools, config.environment)
        )

    try:
        config, notes = RunConfig.from_dict(mapping)
    except ConfigError as exc:
        # every problem at once: the values of the right type are checked as well (an unknown reward was dropped
        # from the list when the weights beside it were null, issue 36)
        more = checked(exc.partial) if exc.partial is not None else []
        return Review(None, refused + exc.problems + [p for p in more if p not in exc.problems])
    return Review(config, refused + checked(config), notes)


def problems(config: RunConfig, check_rewards: bool = True, check_files: bool = True) -> list[str]:
    """Every problem with ``config``, in plain words (an empty list means valid).

    With ``check_rewards`` custom reward functions are imported and dry-run (the dashboard does that only when its
    operator allowed custom rewards). With ``check_files`` local model directories and data files are looked at (a
    data file's head is read); the dashboard turns that off for a path its user may not read.
    """
    found = config.field_problems()
    if check_files:  # a name with a NUL or control character is reported above and never reaches the file system
        if not text_problem("model", config.model_name_or_path):
            found.extend(check_model(config.model_name_or_path))
        if not text_problem("dataset", config.dataset_name):
            found.extend(check_dataset(config.dataset_name, config.question_column, config.answer_column))
    if problem := file_split_problem(config.dataset_name, config.dataset_split):
        found.append(problem)
    found.extend(check_heldout(config))  # eval_steps on data with no problems the run doesn't train on
    found.extend(reward_problems(config.reward_funcs, config.reward_weights, import_custom=check_rewards))
    # tools and an environment: the user's own imported under the custom-reward rule; the model's template looked at
    found.extend(tool_problems(config, import_custom=check_rewards, check_template=check_files))
    found.extend(gpu_path_problems(config))
    found.extend(cluster_problems(config))
    return found


def warnings(config: RunConfig) -> list[str]:
    """Things that are valid but probably not what the user wants (see :func:`.rewards.reward_mix_warnings`).
    Reads a few rows of the data set; a data set that can't be read yet gives no warning here (the worker reports
    it)."""
    local = config.dataset_name.startswith("builtin:") or Path(config.dataset_name).is_file()
    try:
        rows = load_problems(config, limit=64)[:64] if local else []
    except Exception:
        rows = []
    return (
        reward_mix_warnings(
            list(config.reward_funcs), config.weights(), [p.answer for p in rows], any(p.tests for p in rows)
        )
        + heldout_warnings(config)
        + cluster_warnings(config)
        + machine_warnings(config)
        + sampling_warnings(config)
    )


def load_and_validate(path: str | Path, name: str | None = None) -> tuple[RunConfig, list[str]]:
    """Load a config file (its run named ``name`` when given: the CLI's ``--name``, validated like the file's own)
    and validate it; raises :class:`ConfigError` with every problem, returns notes."""
    config, notes = RunConfig.load(path)
    if name:
        config = dataclasses.replace(config, name=name)
    found = problems(config)
    if found:
        raise ConfigError(found)
    return config, notes
