"""RunConfig: the single source of truth for every setting of a run.

The dashboard form, the CLI, YAML/JSON files and the worker all use this dataclass. Each field carries in its
metadata a one-line ``help``, the ``group`` it belongs to in the form, and its valid range (``min``/``max``, or
``choices``), so the UI generates its widgets from here and a new field appears without UI code.

Field names follow TRL's ``GRPOConfig`` (and open-r1's script arguments) where TRL has one, so a TRL recipe file
mostly loads as is; keys we don't know are reported and ignored rather than failing the whole file.

Defaults are the reference recipe of SPEC.md, written out explicitly instead of inherited from TRL: TRL 1.16 changed
its own defaults (beta 0.0, loss_type "dapo"), and a run must mean the same thing whatever TRL is installed.

``per_device_train_batch_size`` counts *completions*, as in current TRL: with a group size of 8, a batch of 8 is one
prompt with its 8 completions. (The seed script's batch size 1 dates from older TRL/Unsloth semantics.)
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYSTEM_PROMPT = "Respond in the following format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>"
BUILTIN_MODEL = "builtin:tiny"
BUILTIN_DATASETS = ("builtin:arithmetic", "builtin:code")
DATA_FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
# A hub id is "name" or "owner/name"; anything with more slashes, or that exists on disk, is a local path.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# A custom reward: "path/to/file.py:function" or "package.module:function".
_CUSTOM_REWARD = re.compile(r"^[^:]+(\.py)?:[A-Za-z_]\w*$")

GROUPS = ("model", "data", "rewards", "grpo", "lora", "generation", "advanced")
# Size bounds on what a config may hold: it is stored on the run row and shown in the dashboard.
MAX_TEXT_CHARS = 1_000
MAX_PROMPT_CHARS = 20_000
MAX_LIST_ITEMS = 64


def setting(
    default: Any,
    help: str,
    group: str,
    *,
    min: float | None = None,
    max: float | None = None,
    choices: tuple | None = None,
    advanced: bool = False,
) -> Any:
    """A dataclass field with the metadata the validator and the UI read (help text, group, valid range)."""
    meta = {"help": help, "group": group, "min": min, "max": max, "choices": choices, "advanced": advanced}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class RunConfig:
    """Every setting of a GRPO run (see the module docstring for naming and defaults)."""

    # --- model ---
    name: str = setting("grpo-run", "A name for the run, shown in the dashboard and the run list.", "model")
    model_name_or_path: str = setting(
        # Unsloth's ungated copy of meta-llama/Llama-3.2-3B-Instruct (the same weights): the meta-llama repo needs
        # an HF_TOKEN of an account that accepted Meta's license, which compare, eval and the plain path would ask for.
        "unsloth/Llama-3.2-3B-Instruct",
        "Model to fine-tune: a Hugging Face hub id, a local directory, or builtin:tiny (offline demo model).",
        "model",
    )
    # --- data ---
    dataset_name: str = setting(
        "gsm8k",
        "Data set: gsm8k (openai/gsm8k from the hub), builtin:arithmetic or builtin:code (offline), a hub id, or a local .jsonl/.csv/.parquet file.",
        "data",
    )
    dataset_split: str = setting("train", "Split of the data set to train on.", "data", advanced=True)
    question_column: str = setting("question", "Column of a local file that holds the question.", "data")
    answer_column: str = setting("answer", "Column of a local file that holds the reference answer.", "data")
    max_train_samples: int = setting(
        0, "Use at most this many training examples (0: all).", "data", min=0, max=100_000_000, advanced=True
    )
    system_prompt: str = setting(SYSTEM_PROMPT, "System prompt put before every question.", "data")
    # --- rewards ---
    reward_funcs: list[str] = setting(
        ["xmlcount", "soft_format", "strict_format", "int", "correctness"],
        "Reward functions by name (see the rewards list), or path/to/file.py:function for your own.",
        "rewards",
    )
    reward_weights: list[float] = setting(
        [], "One weight per reward function, in the same order (empty: all 1.0).", "rewards"
    )
    # --- grpo ---
    num_generations: int = setting(
        8,
        "Group size G: completions sampled per prompt; advantages compare answers within a group.",
        "grpo",
        min=2,
        max=256,
    )
    beta: float = setting(
        0.04,
        "KL weight: how strongly the policy is held near the base model (typical 0.01-0.04; 0 disables).",
        "grpo",
        min=0.0,
        max=10.0,
    )
    epsilon: float = setting(
        0.2, "Clip range of the policy ratio (PPO-style speed limit on change).", "grpo", min=0.0, max=1.0
    )
    loss_type: str = setting(
        "grpo",
        "How token losses are aggregated: grpo (per-sequence mean, as in the paper), dapo, dr_grpo or bnpo.",
        "grpo",
        choices=("grpo", "dapo", "dr_grpo", "bnpo"),
    )
    scale_rewards: str = setting(
        "group",
        "Divide advantages by the group's reward std (group), the batch's (batch), or not at all (none).",
        "grpo",
        choices=("group", "batch", "none"),
        advanced=True,
    )
    learning_rate: float = setting(5e-6, "Peak learning rate of the LoRA adapter.", "grpo", min=1e-9, max=1.0)
    max_steps: int = setting(250, "Number of optimizer steps to train.", "grpo", min=1, max=1_000_000)
    per_device_train_batch_size: int = setting(
        8,
        "Completions per device per step (prompts per step = this x accumulation / group size).",
        "grpo",
        min=1,
        max=4096,
    )
    gradient_accumulation_steps: int = setting(
        1, "Micro-batches accumulated before each optimizer step.", "grpo", min=1, max=1024
    )
    warmup_ratio: float = setting(0.1, "Share of steps spent warming the learning rate up.", "grpo", min=0.0, max=1.0)
    lr_scheduler_type: str = setting(
        "cosine",
        "Learning-rate schedule after warm-up.",
        "grpo",
        choices=("cosine", "linear", "constant"),
        advanced=True,
    )
    max_grad_norm: float = setting(0.1, "Gradient norm clip.", "grpo", min=0.0, max=1e6)
    # numpy's seed must fit in 32 bits
    seed: int = setting(
        42, "Random seed for data order, sampling and initialisation.", "advanced", min=0, max=2**32 - 1
    )
    logging_steps: int = setting(1, "Log metrics every N steps.", "advanced", min=1, max=1_000_000)
    save_steps: int = setting(
        50, "Save a checkpoint (adapter + optimizer) every N steps.", "advanced", min=1, max=1_000_000
    )
    # --- generation ---
    max_prompt_length: int = setting(
        256, "Prompts longer than this many tokens are cut from the left.", "generation", min=1, max=131072
    )
    max_completion_length: int = setting(
        200, "Completions are cut after this many tokens.", "generation", min=1, max=131072
    )
    temperature: float = setting(
        1.0, "Sampling temperature of the group completions.", "generation", min=0.01, max=10.0
    )
    top_p: float = setting(
        1.0,
        "Nucleus sampling: keep the smallest token set with this much probability.",
        "generation",
        min=0.01,
        max=1.0,
    )
    # --- lora ---
    lora_r: int = setting(32, "LoRA rank.", "lora", min=1, max=1024)
    lora_alpha: int = setting(64, "LoRA alpha (scale = alpha / rank).", "lora", min=1, max=4096)
    lora_dropout: float = setting(0.0, "Dropout on the LoRA branch.", "lora", min=0.0, max=0.9)
    lora_target_modules: list[str] = setting(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        "Module names that get a LoRA adapter.",
        "lora",
    )
    # --- loading ---
    backend: str = setting(
        "auto",
        "Model path: auto (Unsloth + vLLM when a GPU and the gpu extra are there; TRL + vLLM with vLLM but no Unsloth; "
        "else plain), or force plain, unsloth or trl (TRL's own vLLM colocate mode, no Unsloth).",
        "advanced",
        choices=("auto", "plain", "unsloth", "trl"),
    )
    load_in_4bit: bool = setting(True, "Load the base model in 4 bits (GPU only; saves memory).", "advanced")
    use_vllm: bool = setting(True, "Generate groups with vLLM (GPU fast path only).", "advanced")
    vllm_gpu_memory_utilization: float = setting(
        0.6, "Share of GPU memory vLLM may take.", "advanced", min=0.05, max=0.95
    )
    num_processes: int = setting(
        1,
        "Training processes (one per GPU); more than 1 launches the worker with accelerate.",
        "advanced",
        min=1,
        max=64,
    )
    deepspeed_stage: int = setting(
        0,
        "DeepSpeed ZeRO stage for multi-process runs (0: off; 1-3 shard optimizer, gradients, weights).",
        "advanced",
        min=0,
        max=3,
    )
    max_seq_length: int = setting(
        1024, "Longest prompt + completion the model is loaded for.", "advanced", min=16, max=262_144
    )
    gradient_checkpointing: bool = setting(True, "Trade compute for memory by recomputing activations.", "advanced")

    # ---------------------------------------------------------------------------------------------------------------
    @classmethod
    def field_specs(cls) -> list[dataclasses.Field]:
        """The dataclass fields in declaration order (what the UI form iterates)."""
        return list(dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        """The flat mapping of field names that is stored on the run row and written to YAML/JSON."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], check_files: bool = True) -> tuple[RunConfig, list[str]]:
        """Build a config from a flat mapping.

        Returns the config and a list of notes about keys that were ignored. Values of the wrong type raise
        :class:`ConfigError` listing every problem; range checks are left to :meth:`validate`.
        """
        known = {f.name: f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        kwargs: dict[str, Any] = {}
        problems: list[str] = []
        ignored = sorted(str(k) for k in data if k not in known)
        for key, value in data.items():
            if key not in known:
                continue
            try:
                kwargs[key] = _coerce(value, hints[key])
            except (TypeError, ValueError, OverflowError):
                problems.append(f"{key}: expected {_type_name(hints[key])}, got {_shorten(value)}")
        if problems:
            # Report the range problems of the values that did parse too, so a second try isn't needed.
            problems.extend(cls(**kwargs).validate(check_rewards=False, check_files=check_files))
            raise ConfigError(problems)
        notes = [f"ignored unknown setting {_shorten(k)}" for k in ignored[:20]]
        if len(ignored) > 20:
            notes.append(f"... and {len(ignored) - 20} more unknown settings")
        return cls(**kwargs), notes

    @classmethod
    def load(cls, path: str | Path) -> tuple[RunConfig, list[str]]:
        """Load a YAML or JSON file holding a flat mapping of field names."""
        from trainer.config_file import ConfigFileError, read_mapping

        try:
            data = read_mapping(path)
        except ConfigFileError as exc:
            raise ConfigError([str(exc)]) from None
        return cls.from_dict(data)

    def save(self, path: str | Path) -> None:
        """Write the config as YAML (or JSON when the file name ends in .json)."""
        if str(path).endswith(".json"):
            Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        else:
            Path(path).write_text(self.to_yaml())

    def to_yaml(self) -> str:
        """The config as a YAML document, fields in declaration order."""
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    # ---------------------------------------------------------------------------------------------------------------
    def validate(self, check_rewards: bool = True, check_files: bool = True) -> list[str]:
        """Every problem with this config, in plain words (an empty list means valid).

        With ``check_rewards`` custom reward functions are imported and dry-run (the dashboard does that only when
        its operator allowed custom rewards). With ``check_files`` local model directories and data files are looked
        at (a data file's head is read); the dashboard turns that off for a path its user may not read.
        """
        problems: list[str] = []
        for f in dataclasses.fields(self):
            if f.name != "num_generations":  # _check_batch words its range in GRPO terms
                problems.extend(_check_range(f, getattr(self, f.name)))
        if not self.name.strip():
            problems.append("name is empty: give the run a name")
        if check_files:
            problems.extend(_check_model(self.model_name_or_path))
            problems.extend(_check_dataset(self.dataset_name, self.question_column, self.answer_column))
        problems.extend(self._check_rewards(check_rewards))
        problems.extend(self._check_batch())
        if self.max_prompt_length + self.max_completion_length > self.max_seq_length:
            problems.append(
                f"max_prompt_length {self.max_prompt_length} + max_completion_length {self.max_completion_length} "
                f"exceeds max_seq_length {self.max_seq_length}: raise max_seq_length or shorten one of them"
            )
        if self.deepspeed_stage and self.num_processes < 2:
            problems.append(f"deepspeed_stage {self.deepspeed_stage} needs num_processes of 2 or more")
        if not self.lora_target_modules:
            problems.append("lora_target_modules is empty: name at least one module (e.g. q_proj) to adapt")
        problems.extend(_check_gpu_path(self))
        return problems

    def _check_batch(self) -> list[str]:
        g = self.num_generations
        if g < 2:
            return [f"group size {g}: GRPO needs at least 2 completions per prompt (num_generations >= 2)"]
        if g > 256:
            return [f"group size {g}: at most 256 completions per prompt"]
        batch = self.per_device_train_batch_size * self.gradient_accumulation_steps * self.num_processes
        if batch % g:
            devices = f" × {self.num_processes} processes" if self.num_processes > 1 else ""
            return [
                f"{self.per_device_train_batch_size} completions per device × {self.gradient_accumulation_steps} "
                f"accumulation steps{devices} = {batch} completions per step is not divisible by the group size {g}: "
                f"use a multiple of {g} (e.g. per_device_train_batch_size {g})"
            ]
        return []

    def _check_rewards(self, import_custom: bool) -> list[str]:
        from trainer.rewards import REWARDS, load_custom_reward

        problems = []
        if not self.reward_funcs:
            problems.append("reward_funcs is empty: choose at least one reward function")
        for name in self.reward_funcs:
            if name in REWARDS:
                continue
            if _CUSTOM_REWARD.match(name):
                if import_custom:
                    try:
                        load_custom_reward(name)
                    except ValueError as exc:
                        problems.append(str(exc))
                continue
            problems.append(
                f"unknown reward function {name!r}: choose from {', '.join(sorted(REWARDS))} "
                "or give path/to/file.py:function"
            )
        if self.reward_weights and len(self.reward_weights) != len(self.reward_funcs):
            problems.append(
                f"{len(self.reward_weights)} reward weights for {len(self.reward_funcs)} reward functions: "
                "give one weight per function, or none for all 1.0"
            )
        if "code_tests" in self.reward_funcs:
            from trainer.sandbox import code_tests_refusal

            if refusal := code_tests_refusal():  # no isolation here, and the operator hasn't accepted the risk
                problems.append(refusal)
        return problems

    def warnings(self) -> list[str]:
        """Things that are valid but probably not what the user wants (see rewards.reward_mix_warnings). Reads a few
        rows of the data set; a data set that can't be read yet gives no warning here (the worker reports it)."""
        from trainer.rewards import reward_mix_warnings

        try:
            from trainer.data import load_problems

            problems = (
                load_problems(self)[:64]
                if self.dataset_name.startswith("builtin:") or Path(self.dataset_name).is_file()
                else []
            )
        except Exception:
            problems = []
        return reward_mix_warnings(
            list(self.reward_funcs), self.weights(), [p.answer for p in problems], any(p.tests for p in problems)
        )

    def weights(self) -> list[float]:
        """The reward weights, 1.0 each where none were given."""
        return list(self.reward_weights) if self.reward_weights else [1.0] * len(self.reward_funcs)

    def prompts_per_step(self) -> int:
        """How many distinct prompts one optimizer step sees (over all processes)."""
        batch = self.per_device_train_batch_size * self.gradient_accumulation_steps * self.num_processes
        return batch // self.num_generations

    def with_absolute_paths(self, base: Path) -> RunConfig:
        """This config with its relative local paths (model directory, data file, custom reward files) made absolute
        against ``base``, the directory they were checked from: a launched worker runs in its run directory."""

        def absolute(text: str) -> str:
            path = Path(text).expanduser()
            return str(base / path) if not path.is_absolute() and (base / path).exists() else text

        rewards = []
        for name in self.reward_funcs:
            target, sep, func = name.rpartition(":")
            rewards.append(absolute(target) + sep + func if target.endswith(".py") else name)
        return dataclasses.replace(
            self,
            model_name_or_path=absolute(self.model_name_or_path),
            dataset_name=absolute(self.dataset_name),
            reward_funcs=rewards,
        )


class ConfigError(ValueError):
    """A config with problems; ``problems`` lists each in plain words."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid run config:\n" + "\n".join(f"  - {p}" for p in problems))


def load_and_validate(path: str | Path) -> tuple[RunConfig, list[str]]:
    """Load a config file and validate it; raises :class:`ConfigError` with every problem, returns notes."""
    config, notes = RunConfig.load(path)
    problems = config.validate()
    if problems:
        raise ConfigError(problems)
    return config, notes


# --- helpers --------------------------------------------------------------------------------------------------------
def _coerce(value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        if isinstance(value, str):  # "q_proj, v_proj" from a form or a CLI flag
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise TypeError
        return [_coerce(v, item) for v in value]
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
            return value.lower() in ("true", "yes")
        raise TypeError
    if hint is int:
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                value = float(
                    value
                )  # "1e20" (YAML reads exponents without a dot as text): a range problem, not a type one
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        return int(value)
    if hint is float:
        if isinstance(value, bool):
            raise TypeError
        return float(value)  # PyYAML reads 5e-6 (no dot) as a string; float() accepts it
    if hint is str:
        if not isinstance(value, (str, int, float)):
            raise TypeError
        return str(value)
    return value


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is list:
        return f"a list of {_type_name(typing.get_args(hint)[0])}"
    return {int: "a whole number", float: "a number", bool: "true or false", str: "text"}.get(hint, str(hint))


def _check_range(f: dataclasses.Field, value: Any) -> list[str]:
    """Choices, finiteness, the field's range, and size bounds (what a run row stores must stay small)."""
    meta = f.metadata
    if meta.get("choices") and value not in meta["choices"]:
        return [f"{f.name} {_shorten(value)}: expected one of {', '.join(meta['choices'])}"]
    if isinstance(value, str):
        limit = MAX_PROMPT_CHARS if f.name == "system_prompt" else MAX_TEXT_CHARS
        if len(value) > limit:
            return [f"{f.name} is {len(value):,} characters long: at most {limit:,}"]
        return []
    if isinstance(value, list):
        if len(value) > MAX_LIST_ITEMS:
            return [f"{f.name} has {len(value)} items: at most {MAX_LIST_ITEMS}"]
        return [p for i, item in enumerate(value) for p in _check_number(f"{f.name}[{i}]", item, None, None)] + [
            f"{f.name}[{i}] is {len(item):,} characters long: at most {MAX_TEXT_CHARS:,}"
            for i, item in enumerate(value)
            if isinstance(item, str) and len(item) > MAX_TEXT_CHARS
        ]
    return _check_number(f.name, value, meta.get("min"), meta.get("max"))


def _check_number(name: str, value: Any, lo: float | None, hi: float | None) -> list[str]:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return []
    if value != value:  # NaN
        return [f"{name} is NaN: expected {_range_text(lo, hi) if lo is not None or hi is not None else 'a number'}"]
    if value in (float("inf"), float("-inf")):
        return [
            f"{name} is {value}: expected a finite number"
            + (f", {_range_text(lo, hi)}" if lo is not None or hi is not None else "")
        ]
    if lo is not None and value < lo or hi is not None and value > hi:
        return [f"{name} {value:g}: expected {_range_text(lo, hi)}"]
    return []


def _shorten(value: Any, limit: int = 60) -> str:
    """A value's repr for an error message, cut so that a huge value is never echoed back whole."""
    text = (
        repr(value)
        if not isinstance(value, (list, dict)) or len(value) < 20
        else f"<{type(value).__name__} of {len(value)} items>"
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _range_text(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"a value from {_number(lo)} to {_number(hi)}"
    return f"at least {_number(lo)}" if lo is not None else f"at most {_number(hi)}"


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() and abs(value) >= 1000 else f"{value:g}"


def _check_model(model: str) -> list[str]:
    if model == BUILTIN_MODEL or Path(model).expanduser().is_dir():
        return []
    if model.startswith("builtin:"):
        return [f"model {model!r}: the only built-in model is {BUILTIN_MODEL}"]
    if _looks_like_path(model):
        return [f"model {model!r}: no such directory"]
    if not _HUB_ID.match(model):
        return [f"model {model!r}: expected a hub id like owner/name, a local directory, or {BUILTIN_MODEL}"]
    return []


def _check_dataset(name: str, question_column: str = "question", answer_column: str = "answer") -> list[str]:
    if name in BUILTIN_DATASETS or name in ("gsm8k", "openai/gsm8k"):
        return []
    if name.startswith("builtin:"):
        return [f"dataset {name!r}: built-in data sets are {', '.join(BUILTIN_DATASETS)}"]
    path = Path(name).expanduser()
    if path.suffix.lower() in DATA_FILE_SUFFIXES or _looks_like_path(name):
        if not path.is_file():
            return [f"dataset {name!r}: no such file"]
        if path.suffix.lower() not in DATA_FILE_SUFFIXES:
            return [f"dataset {name!r}: expected a {', '.join(DATA_FILE_SUFFIXES)} file"]
        from trainer.datafiles import DataFileError, summarize

        try:  # reads the head only: the columns, the first rows, the encoding
            summarize(path, question_column, answer_column)
        except DataFileError as exc:
            return [str(exc)]
        return []
    if not _HUB_ID.match(name):
        return [f"dataset {name!r}: expected gsm8k, {', '.join(BUILTIN_DATASETS)}, a hub id or a local data file"]
    return []


def _looks_like_path(text: str) -> bool:
    return text.startswith((".", "/", "~")) or text.count("/") > 1 or "\\" in text


# --- GPU path -------------------------------------------------------------------------------------------------------
# vLLM accepts only these LoRA ranks (vllm 0.32 config/lora.py:26, MaxLoRARanks = 1, 8, ... 320, 512); Unsloth rounds
# a rank up to the next one (unsloth_zoo 2026.10.9 vllm_utils.py:2765-2774), so any rank up to 512 works and none above.
VLLM_MAX_LORA_RANK = 512


def _check_gpu_path(config: RunConfig) -> list[str]:
    """What the GPU path cannot start with: a LoRA rank vLLM refuses, DeepSpeed asked for but not installed."""
    import importlib.util

    problems = []
    will_use_vllm = config.use_vllm and config.backend != "plain" and config.model_name_or_path != BUILTIN_MODEL
    if will_use_vllm and config.lora_r > VLLM_MAX_LORA_RANK:
        problems.append(
            f"lora_r {config.lora_r}: vLLM serves LoRA ranks up to {VLLM_MAX_LORA_RANK}; lower lora_r or set "
            "use_vllm: false"
        )
    if config.deepspeed_stage and importlib.util.find_spec("deepspeed") is None:
        problems.append(
            f"deepspeed_stage {config.deepspeed_stage} needs DeepSpeed, which is not installed: "
            "pip install 'grpo-studio[deepspeed]' (or set deepspeed_stage: 0)"
        )
    return problems
