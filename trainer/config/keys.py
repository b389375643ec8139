"""Keys of a config mapping that are not settings: a typo is refused with the setting it was meant to be, a key of
another tool's recipe is a note.

A mistyped key used to be a note ("ignored unknown setting 'learning_rte'") and the run trained at the default
rate: the user's value was lost without a word that mattered. So a key that is within a small edit distance of a
setting's name, spelled like one apart from case and dashes, or a known alias of one (``lr``, ``kl_coef``) is a
problem naming the setting ("did you mean learning_rate?"). Keys that TRL, transformers' TrainingArguments or
open-r1 recipes use and grpo-studio knowingly ignores (``bf16``, ``output_dir``, ``top_k``...) are checked first
and stay notes, even where one is close to a setting (``top_k`` is one letter from ``top_p``): a recipe copied
from those tools still loads. docs/configs.md lists them; tests/config/test_config_keys.py keeps the two in step.

Every entry that reads a config (the command line, the dashboard's form and Import, the API, a fork's ``--set``)
goes through :func:`trainer.config.values.read_values`, which calls :func:`sort_unknown` here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Keys of other tools' recipes that grpo-studio reads past on purpose (its own settings cover what they do, or they
# are about machinery grpo-studio runs itself). Sorted; docs/configs.md lists the same names.
RECIPE_KEYS = frozenset(
    {
        "adam_beta1",
        "adam_beta2",
        "attn_implementation",
        "benchmarks",
        "bf16",
        "callbacks",
        "chat_template",
        "dataset_config",
        "dataset_test_split",
        "dataset_train_split",
        "ddp_find_unused_parameters",
        "delta",
        "do_eval",
        "ds3_gather_for_generation",
        "eval_strategy",
        "fp16",
        "generation_batch_size",
        "gradient_checkpointing_kwargs",
        "hub_model_id",
        "hub_private_repo",
        "hub_strategy",
        "importance_sampling_level",
        "load_in_8bit",
        "log_completions",
        "log_level",
        "logging_first_step",
        "logging_strategy",
        "lora_modules_to_save",
        "lora_task_type",
        "lr_scheduler_kwargs",
        "max_length",
        "min_p",
        "model_init_kwargs",
        "model_revision",
        "num_completions_to_print",
        "num_train_epochs",
        "optim",
        "output_dir",
        "overwrite_output_dir",
        "per_device_eval_batch_size",
        "push_to_hub",
        "ref_model_mixup_alpha",
        "ref_model_sync_steps",
        "remove_unused_columns",
        "repetition_penalty",
        "run_name",
        "save_only_model",
        "save_strategy",
        "save_total_limit",
        "sync_ref_model",
        "tf32",
        "top_k",
        "torch_dtype",
        "trust_remote_code",
        "use_liger_kernel",
        "use_liger_loss",
        "use_peft",
        "vllm_enable_prefix_caching",
        "vllm_server_host",
        "vllm_server_port",
        "vllm_tensor_parallel_size",
        "wandb_entity",
        "wandb_project",
        "warmup_steps",
        "weight_decay",
    }
)

# Names other tools (or habit) give a grpo-studio setting: refused with the setting's name, never silently dropped.
ALIASES = {
    "batch_size": "per_device_train_batch_size",
    "cliprange": "epsilon",
    "dataset": "dataset_name",
    "group_size": "num_generations",
    "kl_beta": "beta",
    "kl_coef": "beta",
    "lora_rank": "lora_r",
    "lr": "learning_rate",
    "max_new_tokens": "max_completion_length",
    "model": "model_name_or_path",
    "model_name": "model_name_or_path",
    "reward_functions": "reward_funcs",
    "rewards": "reward_funcs",
    "steps": "max_steps",
}

MAX_LISTED = 20  # a file of junk keys must not flood the dashboard
MAX_CHECKED = 200  # unknown keys looked at for a typo; a real config has a handful
_PLAIN_KEY = re.compile(r"^[A-Za-z_][\w.-]{0,59}$")


def meant_setting(key: str, settings: Iterable[str]) -> str | None:
    """The setting ``key`` was probably meant to be: its alias, the same name up to case and ``-``/``_``, or the one
    nearest name within 1 edit (keys of up to 6 characters) or 2 edits (longer ones); None when nothing is that
    close, or two settings are equally close (a guess between them would mislead)."""
    settings = list(settings)
    if key in ALIASES:
        return ALIASES[key]
    plain = key.strip().lower().replace("-", "_").replace(" ", "_")
    if plain in settings:
        return plain
    allowed = 1 if len(plain) <= 6 else 2
    scored = sorted((_distance(plain, name), name) for name in settings)
    best = [name for distance, name in scored if distance == scored[0][0]] if scored else []
    return best[0] if scored and scored[0][0] <= allowed and len(best) == 1 else None


def sort_unknown(keys: Iterable[object], settings: Iterable[str]) -> tuple[list[str], list[str]]:
    """(problems, notes) for the keys of a mapping that are not settings: a problem for each key close to a setting
    (:func:`meant_setting`), a note for a key of another tool's recipe or one that is like no setting. At most
    ``MAX_LISTED`` of each are named."""
    settings = list(settings)
    problems: list[str] = []
    notes: list[str] = []
    for checked, key in enumerate(sorted(str(k) for k in keys)):
        # past MAX_CHECKED keys the file is junk, not a typo: its keys are only noted (a hostile file of 50,000 short
        # keys would otherwise cost seconds of edit distances in the dashboard's process)
        close = key not in RECIPE_KEYS and checked < MAX_CHECKED
        meant = meant_setting(key, settings) if close else None
        if meant:
            problems.append(f"{_shown(key)} is not a setting: did you mean {meant}?")
        else:
            notes.append(f"ignored unknown setting {repr_short(key)}")
    return _capped(problems, "keys that are not settings"), _capped(notes, "unknown settings")


def unknown_setting(key: str, settings: Iterable[str]) -> str:
    """A key given as a setting that is none (a fork's ``--set``): the setting it was probably meant to be, if any."""
    meant = meant_setting(key, settings)
    return f"{_shown(key)}: no such setting" + (f"; did you mean {meant}?" if meant else "")


def repr_short(key: str, limit: int = 60) -> str:
    """A key as ``repr`` shows it, cut so that a huge key is never echoed back whole."""
    text = repr(key)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(key: str) -> str:
    """A key as a message names it: as typed when it looks like a name, else quoted and shortened."""
    return key if _PLAIN_KEY.match(key) else repr_short(key)


def _capped(lines: list[str], what: str) -> list[str]:
    if len(lines) <= MAX_LISTED:
        return lines
    return lines[:MAX_LISTED] + [f"... and {len(lines) - MAX_LISTED} more {what}"]


def _distance(a: str, b: str) -> int:
    """Edit distance with adjacent transpositions counted as one edit ("learnign" is one from "learning")."""
    if abs(len(a) - len(b)) > 2:
        return 3  # farther than any distance that counts; skips the table for unlike names
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]
