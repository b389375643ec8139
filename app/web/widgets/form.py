"""The new-run form, generated from RunConfig's fields: labels, tooltips, ranges and groups come from the field
metadata, so a new config field appears in the form without UI code. Plain functions, tested without a browser.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainer import review
from trainer.config import GROUPS, ConfigError, RunConfig
from trainer.config.rules import MULTILINE_FIELDS, Problem

GROUP_TITLES = {
    "model": "Model",
    "data": "Data",
    "rewards": "Rewards",
    "grpo": "GRPO",
    "lora": "LoRA",
    "generation": "Generation",
    "advanced": "Advanced",
    "cluster": "Cluster",
}


# What a person calls the settings whose config names are jargon; the config name stays visible beside it ("Group size
# G (num_generations)") because YAML files and the CLI use it. A field not listed here is labelled by its name.
LABELS = {
    "name": "Run name",
    "model_name_or_path": "Model",
    "dataset_name": "Data set",
    "system_prompt": "System prompt",
    "few_shot_examples": "Worked examples",
    "eval_problems": "Held-out problems per evaluation",
    "reward_funcs": "Reward functions",
    "reward_weights": "Reward weights",
    "num_generations": "Group size G",
    "beta": "KL coefficient β",
    "epsilon": "Clip range ε",
    "learning_rate": "Learning rate",
    "max_steps": "Training steps",
    "per_device_train_batch_size": "Completions per device per step",
    "gradient_accumulation_steps": "Gradient accumulation steps",
    "warmup_ratio": "Warm-up share",
    "max_grad_norm": "Gradient clipping norm",
    "num_iterations": "Passes per generation batch μ",
    "steps_per_generation": "Steps per generation batch",
    "measured_kl_steps": "Measure KL at β = 0 every N steps",
    "report_to": "Also report to (trackers)",
    "max_prompt_length": "Max prompt tokens",
    "max_completion_length": "Max completion tokens",
    "temperature": "Sampling temperature",
    "top_p": "Top-p",
    "lora_r": "LoRA rank r",
    "lora_alpha": "LoRA alpha",
    "lora_dropout": "LoRA dropout",
    "lora_target_modules": "LoRA target modules",
    "eval_steps": "Held-out evaluation every N steps",
    "heldout_fraction": "Held-out share of the data",
    "executor": "Where the worker runs",
    "slurm_partition": "Slurm partition",
    "slurm_nodes": "Slurm nodes",
    "slurm_gpus_per_node": "GPUs per node",
    "slurm_time": "Slurm time limit",
    "slurm_account": "Slurm account",
    "vllm_mode": "vLLM mode",
    "vllm_gpus": "GPUs for the vLLM server",
}


@dataclass(frozen=True)
class FieldSpec:
    """What the UI needs to draw one config field."""

    name: str
    label: str
    help: str
    group: str
    kind: str  # "text", "multiline", "int", "float", "bool", "choice", "list", "rewards"
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple | None = None
    advanced: bool = False


def form_fields(defaults: RunConfig | None = None) -> list[FieldSpec]:
    """One spec per RunConfig field, in declaration order, starting from ``defaults`` (RunConfig() if None)."""
    hints = typing.get_type_hints(RunConfig)
    defaults = defaults or RunConfig()
    specs = []
    for f in dataclasses.fields(RunConfig):
        meta, hint = f.metadata, hints[f.name]
        if f.name == "reward_funcs":
            kind = "rewards"
        elif meta.get("choices"):
            kind = "choice"
        elif typing.get_origin(hint) is list:
            kind = "list"
        else:
            kind = {bool: "bool", int: "int", float: "float"}.get(hint, "text")
        if f.name in MULTILINE_FIELDS:
            kind = "multiline"
        rng = _range_note(meta.get("min"), meta.get("max"))
        specs.append(
            FieldSpec(
                name=f.name,
                label=f"{LABELS[f.name]} ({f.name})" if f.name in LABELS else f.name,
                help=meta["help"] + (f" ({rng})" if rng else ""),
                group=meta["group"],
                kind=kind,
                default=getattr(defaults, f.name),
                minimum=meta.get("min"),
                maximum=meta.get("max"),
                choices=meta.get("choices"),
                advanced=meta.get("advanced", False) or meta["group"] == "advanced",
            )
        )
    return specs


def grouped_fields(defaults: RunConfig | None = None) -> list[tuple[str, list[FieldSpec]]]:
    """The form's sections in order, each with its fields; the last one holds every advanced field."""
    specs = form_fields(defaults)
    sections = [(g, [s for s in specs if s.group == g and not s.advanced]) for g in GROUPS if g != "advanced"]
    sections.append(("advanced", [s for s in specs if s.advanced]))
    return [(g, fields) for g, fields in sections if fields]


def to_widget_value(spec: FieldSpec, value: Any) -> Any:
    """A config value as its widget shows it (lists as comma-separated text, except the reward checklist)."""
    if spec.kind == "list":
        return ", ".join(str(v) for v in value)
    return value


def config_from_form(
    values: Mapping[str, Any], check_rewards: bool = True, check_files: bool = True
) -> tuple[RunConfig | None, list[str]]:
    """Build a config from the form's widget values by setting name. Returns (config, problems); config is None if
    a value could not even be read, and problems lists everything wrong at once (RunConfig.from_dict reads the
    values, trainer.review.problems runs every rule)."""
    try:
        config, _ = RunConfig.from_dict(form_mapping(values))
    except ConfigError as exc:
        return None, exc.problems
    return config, review.problems(config, check_rewards=check_rewards, check_files=check_files)


def problems_by_field(problems: list[str], names: list[str]) -> dict[str, list[str]]:
    """Each field's problems, for showing them beside the field: a problem belongs to the field it is about (a
    :class:`~trainer.config.rules.Problem` names it: "group size 300: ..." is num_generations') and to every field
    its sentence names (the checks name the setting, e.g. "beta -0.5: expected a value from 0 to 10")."""
    found: dict[str, list[str]] = {}
    for problem in problems:
        about = problem.field if isinstance(problem, Problem) else None
        for name in names:
            named = re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", problem)
            if named or name == about:
                found.setdefault(name, []).append(problem)
    return found


def named(values: Mapping[Any, Any], widgets: Mapping[str, Any]) -> dict[str, Any]:
    """The form's values by setting name: ``values`` is what Gradio hands an event whose inputs are a set of
    components, one dict keyed by component (gradio 6.31: blocks.py:684-686 makes a set's event take its inputs as a
    dict, blocks.py:1921-1924 zips them into it), and ``widgets`` each setting's widget. Other inputs in the set (the
    operator's rules, the probe's result) are no setting and are left out."""
    return {name: values[widget] for name, widget in widgets.items()}


def form_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    """The form's widget values by setting name as a config mapping (text trimmed, except the prompt texts: the system prompt and the worked examples)."""
    return {
        name: value.strip() if isinstance(value, str) and name not in MULTILINE_FIELDS else value
        for name, value in values.items()
    }


def _range_note(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"{lo:g} to {hi:g}"
    if lo is not None:
        return f"at least {lo:g}"
    return f"at most {hi:g}" if hi is not None else ""


# --- presets --------------------------------------------------------------------------------------------------------
def default_config() -> RunConfig:
    """What the form starts with (actions.starting_config: the reference recipe on a GPU machine, the offline tiny
    demo without one)."""
    from app.actions import starting_config

    return starting_config()
