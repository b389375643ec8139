"""The checks composed above RunConfig: every problem with a config at once (:func:`problems`), the valid-but-doubtful
(:func:`warnings`), and a config file loaded and checked (:func:`load_and_validate`).

RunConfig checks what it can on its own (:meth:`~trainer.config.RunConfig.field_problems`); what needs the reward
registry, a model, a data set, the GPU path or a cluster is checked here, with the code that knows that thing
(trainer.scoring.rewards, trainer.loading.backend, trainer.loading.data, trainer.job.cluster_checks). trainer.config
imports none of them; the action layer (app/actions) and the worker call this module.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from trainer.config import ConfigError, RunConfig
from trainer.job.cluster_checks import cluster_problems, cluster_warnings
from trainer.loading.backend import check_model, gpu_path_problems
from trainer.loading.data import check_dataset, file_split_problem, load_problems
from trainer.loading.heldout import check_heldout, heldout_warnings
from trainer.safe_text import text_problem
from trainer.scoring.rewards import REWARDS, load_custom_reward, reward_mix_warnings
from trainer.scoring.sandbox import code_tests_refusal

# A custom reward: "path/to/file.py:function" or "package.module:function".
CUSTOM_REWARD = re.compile(r"^[^:]+(\.py)?:[A-Za-z_]\w*$")


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
    found.extend(gpu_path_problems(config))
    found.extend(cluster_problems(config))
    return found


def warnings(config: RunConfig) -> list[str]:
    """Things that are valid but probably not what the user wants (see rewards.reward_mix_warnings). Reads a few rows
    of the data set; a data set that can't be read yet gives no warning here (the worker reports it)."""
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
    )


def reward_problems(reward_funcs: list[str], reward_weights: list[float], import_custom: bool) -> list[str]:
    """Known reward names or custom ``file.py:function`` references (imported and dry-run with ``import_custom``;
    offered in the message only then), one weight per function, and a sandbox for ``code_tests``. Each problem names
    its setting first, so the form marks that field."""
    problems = []
    if not reward_funcs:
        problems.append("reward_funcs is empty: choose at least one reward function")
    for name in reward_funcs:
        if name in REWARDS:
            continue
        if CUSTOM_REWARD.match(name):
            if import_custom:
                try:
                    load_custom_reward(name)
                except ValueError as exc:
                    problems.append(f"reward_funcs: {exc}")
            continue
        custom = " or give path/to/file.py:function" if import_custom else ""
        problems.append(
            f"reward_funcs: unknown reward function {name!r}: choose from {', '.join(sorted(REWARDS))}{custom}"
        )
    if reward_weights and len(reward_weights) != len(reward_funcs):
        problems.append(
            f"reward_weights: {len(reward_weights)} reward weights for {len(reward_funcs)} reward functions: "
            "give one weight per function, or none for all 1.0"
        )
    # code_tests without isolation here, unless the operator accepted the risk
    if "code_tests" in reward_funcs and (refusal := code_tests_refusal()):
        problems.append(f"reward_funcs: {refusal}")
    return problems


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
