"""The checks that look at a whole RunConfig: every problem at once (:func:`problems`), the valid-but-doubtful
(:func:`warnings`), and the config made ready for a worker that runs elsewhere (:func:`with_absolute_paths`).

Per-value rules live in trainer.config_checks; checks that need to look at a model or a data set live with the code
that loads it (trainer.loading.backend, trainer.loading.data) and are called from here. This module takes a
RunConfig but never imports trainer.config at run time, so trainer.config can import it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from trainer import config_checks as checks
from trainer.job.cluster_checks import cluster_problems, cluster_warnings
from trainer.loading.backend import check_model, gpu_path_problems
from trainer.loading.data import check_dataset, load_problems
from trainer.loading.heldout import check_heldout, heldout_warnings
from trainer.safe_text import text_problem
from trainer.scoring.rewards import reward_mix_warnings

if TYPE_CHECKING:
    from trainer.config import RunConfig


def problems(config: RunConfig, check_rewards: bool = True, check_files: bool = True) -> list[str]:
    """Every problem with ``config``, in plain words (an empty list means valid).

    With ``check_rewards`` custom reward functions are imported and dry-run (the dashboard does that only when its
    operator allowed custom rewards). With ``check_files`` local model directories and data files are looked at (a
    data file's head is read); the dashboard turns that off for a path its user may not read.
    """
    found: list[str] = []
    for f in dataclasses.fields(config):
        if f.name != "num_generations":  # check_batch words its range in GRPO terms
            found.extend(checks.check_range(f, getattr(config, f.name)))
    if not config.name.strip():
        found.append("name is empty: give the run a name")
    if check_files:  # a name with a NUL or control character is reported above and never reaches the file system
        if not text_problem("model", config.model_name_or_path):
            found.extend(check_model(config.model_name_or_path))
        if not text_problem("dataset", config.dataset_name):
            found.extend(check_dataset(config.dataset_name, config.question_column, config.answer_column))
    found.extend(check_heldout(config))  # eval_steps on data with no problems the run doesn't train on
    found.extend(checks.check_rewards(config.reward_funcs, config.reward_weights, import_custom=check_rewards))
    batch = (config.per_device_train_batch_size, config.gradient_accumulation_steps, config.num_processes)
    found.extend(checks.check_batch(*batch, group=config.num_generations))
    found.extend(
        checks.check_generation_batch(
            config.per_device_train_batch_size,
            config.num_processes,
            config.steps_per_generation,
            config.num_generations,
        )
    )
    found.extend(checks.check_trackers(list(config.report_to)))
    found.extend(checks.check_lengths(config.max_prompt_length, config.max_completion_length, config.max_seq_length))
    if not config.lora_target_modules:
        found.append("lora_target_modules is empty: name at least one module (e.g. q_proj) to adapt")
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


def with_absolute_paths(config: RunConfig, base: Path) -> RunConfig:
    """``config`` with its relative local paths (model directory, data file, custom reward files) made absolute
    against ``base``, the directory they were checked from: a launched worker runs in its run directory."""

    def absolute(text: str) -> str:
        path = Path(text).expanduser()
        return str(base / path) if not path.is_absolute() and (base / path).exists() else text

    rewards = []
    for name in config.reward_funcs:
        target, sep, func = name.rpartition(":")
        rewards.append(absolute(target) + sep + func if target.endswith(".py") else name)
    return dataclasses.replace(
        config,
        model_name_or_path=absolute(config.model_name_or_path),
        dataset_name=absolute(config.dataset_name),
        reward_funcs=rewards,
    )
