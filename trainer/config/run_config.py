"""RunConfig: the single source of truth for every setting of a run.

The dashboard form, the CLI, YAML/JSON files and the worker all use this dataclass. Each field carries in its
metadata a one-line ``help``, the ``group`` it belongs to in the form, its valid range (``min``/``max``, or
``choices``) and whether TRL's GRPOConfig gets it (``trl``), so the form's widgets and the TRL arguments
(trainer.job.trl_args) are generated from here: a new field needs no UI code and no second list.

This module is ground: it imports nothing from trainer.loading, trainer.job or trainer.scoring (tests/actions/test_actions.py
checks what ``import trainer.config`` loads). :meth:`RunConfig.field_problems` applies the rules the config itself
can check (trainer.config.rules: each field's range, settings that go together); the rules that look at a model, a
data set, the reward registry, the GPU path, a cluster or the operator's access sit in the modules of trainer.config
named for those concepts and are composed by trainer.review (``check``, ``problems``, ``warnings``), which
only the entries import.

Field names follow TRL's ``GRPOConfig`` (and open-r1's script arguments) where TRL has one, so a TRL recipe file
mostly loads as is; keys we don't know are reported and ignored rather than failing the whole file.

Defaults are the reference recipe of docs/grpo.md § The reference recipe (the seed script), written out explicitly
instead of inherited from TRL: TRL 1.16 changed its own defaults (beta 0.0, loss_type "dapo"), and a run must mean the
same thing whatever TRL is installed.

``per_device_train_batch_size`` counts *completions*, as in current TRL: with a group size of 8, a batch of 8 is one
prompt with its 8 completions. (The seed script's batch size 1 dates from older TRL/Unsloth semantics.)
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer import trl_features
from trainer.config import rules
from trainer.config.examples import parse_examples
from trainer.config.fields import (
    EXECUTORS,
    SYSTEM_PROMPT,
    advanced,
    cluster,
    data,
    generation,
    grpo,
    lora,
    model,
    rewards,
)
from trainer.config.file import ConfigFileError, read_mapping, write_mapping
from trainer.config.values import read_values

# cispo's cap on the importance weight when epsilon_high is 0 (RunConfig.effective_epsilon_high says why)
CISPO_EPSILON_MAX = 5.0


@dataclass
class RunConfig:
    """Every setting of a GRPO run (see the module docstring for naming and defaults)."""

    # --- model ---
    name: str = model("grpo-run", "A name for the run, shown in the dashboard and the run list.")
    model_name_or_path: str = model(
        # Unsloth's ungated copy of meta-llama/Llama-3.2-3B-Instruct (the same weights): the meta-llama repo needs
        # an HF_TOKEN of an account that accepted Meta's license, which compare, eval and the plain path would ask for.
        "unsloth/Llama-3.2-3B-Instruct",
        "Model to fine-tune: a Hugging Face hub id, a local directory, a .gguf file (as llama.cpp, Ollama and LM "
        "Studio keep them: dequantized once, then trained in 16/32 bits), or builtin:tiny (offline demo model).",
    )
    # --- data ---
    dataset_name: str = data(
        "gsm8k",
        "Data set: gsm8k (openai/gsm8k from the hub), builtin:arithmetic, builtin:word-problems (GSM8K's format, "
        "easy) or builtin:code (offline), a hub id, or a local .jsonl/.csv/.parquet file.",
    )
    dataset_split: str = data("train", "Split of the data set to train on.", advanced=True)
    question_column: str = data("question", "Column of a local file that holds the question.")
    answer_column: str = data("answer", "Column of a local file that holds the reference answer.")
    max_train_samples: int = data(
        0, "Use at most this many training examples (0: all).", min=0, max=100_000_000, advanced=True
    )
    heldout_fraction: float = data(
        0.0,
        "Share of the training rows kept out of training for held-out evaluation (needed for a local file or "
        "builtin:code; 0: held-out problems come from another split, minus any question the run trains on). Which "
        "rows is fixed by each question's text, not by the seed.",
        min=0.0,
        max=0.5,
        advanced=True,
    )
    system_prompt: str = data(SYSTEM_PROMPT, "System prompt put before every question.")
    few_shot_examples: str = data(
        "",
        "Worked examples shown before every question as earlier turns of the chat: a line 'Q: ...' (a question), "
        "then a line 'A: ...' (its answer, which may run over several lines), repeated. A small model that ignores "
        "the system prompt's format often copies it from one or two examples (empty: none).",
        advanced=True,
    )
    # --- rewards ---
    reward_funcs: list[str] = rewards(
        ["xmlcount", "soft_format", "strict_format", "int", "correctness"],
        "Reward functions by name (see the rewards list), or path/to/file.py:function for your own.",
    )
    reward_weights: list[float] = rewards([], "One weight per reward function, in the same order (empty: all 1.0).")
    length_penalty_max_tokens: int = rewards(
        200,
        "Token budget of the length_penalty reward: each completion token past it costs 0.002 (at most 1.0 in all).",
        min=1,
        max=1_000_000,
        advanced=True,
    )
    # --- tools: functions or an environment the model may call while it answers (trainer.tools, docs/tools.md) ---
    tools: list[str] = rewards(
        [],
        "Tools the model may call while it answers: builtin:calculator, or path/to/file.py:function for your own "
        "(a function with type hints and a Google-style docstring, from which its schema is built).",
        advanced=True,
    )
    environment: str = rewards(
        "",
        "An environment, one instance per rollout whose methods are the model's tools: builtin:calculator, or "
        "path/to/file.py:Class for your own (a class with reset(**row), tool methods and optionally get_reward); "
        "empty: none.",
        advanced=True,
    )
    tool_timeout_s: float = rewards(
        5.0,
        "Time limit of each tool call in seconds: a call that takes longer, or raises, answers the model with the "
        "error instead, and the rollout goes on.",
        min=0.01,
        max=3600.0,
        advanced=True,
    )
    # --- grpo ---
    num_generations: int = grpo(
        8,
        "Group size G: completions sampled per prompt; advantages compare answers within a group.",
        min=2,
        max=256,
    )
    beta: float = grpo(
        0.04,
        "KL weight: how strongly the policy is held near the base model (typical 0.01-0.04; 0 disables).",
        min=0.0,
        max=10.0,
    )
    epsilon: float = grpo(0.2, "Clip range of the policy ratio (PPO-style speed limit on change).", min=0.0, max=1.0)
    loss_type: str = grpo(
        "grpo",
        "How token losses are aggregated: grpo (per-sequence mean, as in the paper), dapo, dr_grpo or bnpo; where the "
        "installed TRL has them (1.15 and 1.16 do), cispo (clips the importance weights), sapo (a soft gate instead "
        "of the clip), luspo (length-unbiased sequence loss) or vespo (smooth sequence-level weights).",
        choices=trl_features.installed().loss_types,
    )
    epsilon_high: float = grpo(
        0.0,
        "Upper clip of the policy ratio, 1 + epsilon_high (DAPO's clip-higher, e.g. 0.28); 0: epsilon. With "
        "loss_type cispo it is the cap on each token's importance weight itself (ε_max, not 1 + ε_max), above 1; 0: "
        "5.0, ScaleRL's value.",
        min=0.0,
        max=10.0,
        advanced=True,
    )
    mask_truncated_completions: bool = grpo(
        False,
        "Leave completions cut at max_completion_length out of the loss (DAPO): a truncated answer teaches nothing "
        "about its ending.",
        advanced=True,
    )
    top_entropy_quantile: float = grpo(
        1.0,
        "Train only on the tokens whose entropy is in this top share of each batch (e.g. 0.2, the forking tokens); "
        "1: every token.",
        min=0.0,
        max=1.0,
        advanced=True,
    )
    scale_rewards: str = grpo(
        "group",
        "Divide advantages by the group's reward std (group), the batch's (batch), or not at all (none).",
        choices=("group", "batch", "none"),
        advanced=True,
    )
    learning_rate: float = grpo(5e-6, "Peak learning rate of the LoRA adapter.", min=1e-9, max=1.0)
    max_steps: int = grpo(250, "Number of optimizer steps to train.", min=1, max=1_000_000)
    per_device_train_batch_size: int = grpo(
        8,
        "Completions per device per step (prompts per step = this x accumulation / group size).",
        min=1,
        max=4096,
    )
    gradient_accumulation_steps: int = grpo(1, "Micro-batches accumulated before each optimizer step.", min=1, max=1024)
    warmup_ratio: float = grpo(0.1, "Share of steps spent warming the learning rate up.", min=0.0, max=1.0)
    lr_scheduler_type: str = grpo(
        "cosine",
        "Learning-rate schedule after warm-up.",
        choices=("cosine", "linear", "constant"),
        advanced=True,
    )
    max_grad_norm: float = grpo(0.1, "Gradient norm clip.", min=0.0, max=1e6)
    # TRL's names, so a TRL recipe's values load as they are. TRL keeps the sampling policy's log-probs (the ratio's
    # denominator) only when gradient_accumulation_steps is not a multiple of steps_per_generation × num_iterations
    # (trl 1.16.0 grpo_trainer.py:2642-2644): otherwise the ratio is exactly 1 and the clip never acts.
    num_iterations: int = grpo(
        1,
        "μ: optimisation passes over each generation batch. Clipping (epsilon) only acts when μ > 1 or "
        "steps_per_generation is set, and then only when gradient_accumulation_steps is not a multiple of "
        "steps_per_generation × μ: otherwise every pass falls within one optimizer step and the policy ratio is "
        "exactly 1.",
        min=1,
        max=64,
        advanced=True,
    )
    steps_per_generation: int = grpo(
        0,
        "Micro-batches (not optimizer steps) that share one generation batch (0: gradient_accumulation_steps, TRL's "
        "default). When gradient_accumulation_steps is not a multiple of this × num_iterations, later micro-batches "
        "learn from completions an older policy sampled, so the ratio moves and clipping can act.",
        min=0,
        max=1024,
        advanced=True,
    )
    # numpy's seed must fit in 32 bits
    seed: int = advanced(42, "Random seed for data order, sampling and initialisation.", min=0, max=2**32 - 1, trl=True)
    logging_steps: int = advanced(1, "Log metrics every N steps.", min=1, max=1_000_000, trl=True)
    save_steps: int = advanced(
        50, "Save a checkpoint (adapter + optimizer) every N steps.", min=1, max=1_000_000, trl=True
    )
    eval_steps: int = advanced(
        0,
        "Score held-out problems every N steps while training (greedy correctness, format rate, mean length, each "
        "reward), stored per step from step 0 (the base); 0: off.",
        min=0,
        max=1_000_000,
    )
    eval_problems: int = advanced(
        100,
        "How many held-out problems each evaluation while training scores, the same ones every time (100 gives a "
        "1-point resolution; fewer for a slow model on a CPU, where each greedy answer takes a while).",
        min=10,
        max=10_000,
    )
    measured_kl_steps: int = advanced(
        5,
        "At beta 0 (TRL then computes no KL), measure KL(policy ‖ base) every N steps on the step's sampled "
        "completions, the base being the model with the LoRA adapter off: charted as measured, not in the loss, and "
        "watched by the KL alert (0: off).",
        min=0,
        max=1_000_000,
    )
    report_to: list[str] = advanced(
        [],
        "Also report the run's metrics to these trackers: trackio, wandb, tensorboard, mlflow (each needs its extra, "
        "e.g. pip install 'grpo-studio[trackio]'); grpo-studio's own charts read its database either way.",
    )
    keep_samples_every: int = advanced(
        1, "Past the latest 100 steps, keep sampled completions of every Nth step only (1: all).", min=1, max=1_000_000
    )
    curriculum: bool = advanced(
        False,
        "Curriculum: stop sampling training prompts every answer of whose group was right in "
        "curriculum_solved_visits visits in a row, and sample never-solved ones less (curriculum_never_keep); "
        "each step's skipped prompts are stored, so the data order can be replayed. Off: TRL's plain shuffle.",
    )
    curriculum_solved_visits: int = advanced(
        3,
        "With curriculum: visits in a row solved by the whole group after which a prompt is no longer sampled.",
        min=1,
        max=1_000_000,
    )
    curriculum_never_keep: float = advanced(
        0.5, "With curriculum: the share of draws a prompt never solved so far is still sampled in.", min=0.0, max=1.0
    )
    token_samples_per_step: int = advanced(
        8,
        "Sampled completions per step whose per-token log-probability and entropy under the policy (and the "
        "reference's: the base, adapter off) are kept for the Monitor's token view: the best and the worst answer of "
        "each group whose answers differ first, group by group, then groups that scored alike; two extra no-grad "
        "forward passes over them; 0: none.",
        min=0,
        max=1024,
    )
    # --- generation ---
    max_prompt_length: int = generation(
        256, "Prompts longer than this many tokens are cut from the left.", min=1, max=131072
    )
    max_completion_length: int = generation(200, "Completions are cut after this many tokens.", min=1, max=131072)
    temperature: float = generation(1.0, "Sampling temperature of the group completions.", min=0.01, max=10.0)
    top_p: float = generation(
        1.0, "Nucleus sampling: keep the smallest token set with this much probability.", min=0.01, max=1.0
    )
    # --- lora ---
    lora_r: int = lora(32, "LoRA rank.", min=1, max=1024)
    lora_alpha: int = lora(64, "LoRA alpha (scale = alpha / rank).", min=1, max=4096)
    lora_dropout: float = lora(0.0, "Dropout on the LoRA branch.", min=0.0, max=0.9)
    lora_target_modules: list[str] = lora(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        "Module names that get a LoRA adapter.",
    )
    # --- loading ---
    backend: str = advanced(
        "auto",
        "Model path: auto (Unsloth + vLLM when a GPU and the gpu extra are there; TRL + vLLM with vLLM but no Unsloth; "
        "else plain), or force plain, unsloth or trl (TRL's own vLLM colocate mode, no Unsloth; on a CPU with a CPU "
        "build of vLLM installed, trl with use_vllm is how vLLM generates there).",
        choices=("auto", "plain", "unsloth", "trl"),
    )
    load_in_4bit: bool = advanced(True, "Load the base model in 4 bits (GPU only; saves memory).")
    use_vllm: bool = advanced(
        True,
        "Generate groups with vLLM: the GPU fast path. On a CPU only with backend: trl and a CPU build of vLLM: for "
        "SmolLM2-135M on 2 quiet cores a step took 1.09x plain generation's (its generation 0.63x) and the engine's "
        "start added 40 s (bench/vllm_cpu.py), and it can't run every model (heads 32, 64, 80, ... wide), so plain "
        "generation stays the CPU's default.",
    )
    vllm_enforce_eager: bool = advanced(
        False,
        "TRL's vLLM colocate engine without compiling the model (vLLM's enforce_eager): it starts sooner and "
        "generates slower. On 2 CPU cores with SmolLM2-135M it started in 6 s against 45-61 s and wrote a batch of "
        "8 x 64 tokens in 3.3 s against 2.0 s (bench/vllm_eager.py): worth it for runs shorter than a few dozen "
        "steps; on a GPU it also gives up CUDA graphs.",
    )
    vllm_importance_sampling_correction: bool = advanced(
        True,
        "TRL + vLLM: weight each completion by pi_train / pi_vLLM, the gap between the sampler's and the trainer's "
        "log-probs (TRL's default; Unsloth's vLLM path corrects in its own way and ignores this).",
        trl=True,
    )
    vllm_importance_sampling_mode: str = advanced(
        "sequence_mask",
        "How that correction acts: per token or per sequence, clipping the ratio at the cap (truncate) or dropping "
        "what exceeds it (mask).",
        choices=("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"),
        trl=True,
    )
    vllm_importance_sampling_clip_max: float = advanced(
        3.0, "The cap C of that correction's ratio.", min=1.0, max=1e6, trl=True
    )
    vllm_gpu_memory_utilization: float = advanced(
        0.6, "Share of GPU memory vLLM may take.", min=0.05, max=0.95, trl=True
    )
    num_processes: int = advanced(
        1,
        "Training processes (one per GPU; per node on Slurm); more than 1 launches the worker with accelerate.",
        min=1,
        max=64,
    )
    deepspeed_stage: int = advanced(
        0,
        "DeepSpeed ZeRO stage for multi-process runs (0: off; 1-3 shard optimizer, gradients, weights).",
        min=0,
        max=3,
    )
    max_seq_length: int = advanced(
        1024, "Longest prompt + completion the model is loaded for.", min=16, max=262_144, trl="vllm_max_model_length"
    )
    gradient_checkpointing: bool = advanced(True, "Trade compute for memory by recomputing activations.", trl=True)

    # --- cluster: where the worker runs (trainer.supervise.slurm) and where vLLM generates (trainer.supervise.vllm_server) ---
    executor: str = cluster(
        "local", "Where the worker runs: local, or slurm (an sbatch job; needs PostgreSQL).", choices=EXECUTORS
    )
    slurm_partition: str = cluster("", "Slurm partition (empty: the cluster's default).")
    slurm_nodes: int = cluster(1, "Slurm nodes; above 1, accelerate trains across them.", min=1, max=1024)
    slurm_gpus_per_node: int = cluster(0, "GPUs per node (--gpus-per-node; 0: ask for none).", min=0, max=64)
    slurm_time: str = cluster("", "Time limit, e.g. 04:00:00 (empty: the partition's).")
    slurm_account: str = cluster("", "Slurm account to charge (empty: your default).")
    slurm_cpus_per_task: int = cluster(
        0, "CPUs for the job (--cpus-per-task; 0: Slurm's default, often 1).", min=0, max=4096
    )
    slurm_mem: str = cluster("", "Memory per node, e.g. 64G (--mem; empty: the partition's default).")
    slurm_exclusive: bool = cluster(False, "Take whole nodes (--exclusive).")
    slurm_requeue: bool = cluster(
        False, "Let Slurm requeue the job (--requeue): after preemption it resumes from its latest checkpoint."
    )
    slurm_extra: list[str] = cluster([], "Extra #SBATCH options, e.g. --qos=high.", advanced=True)
    vllm_mode: str = cluster(
        "colocate",
        "colocate: vLLM on the training GPUs; server: trl vllm-serve on vllm_gpus.",
        choices=("colocate", "server"),
    )
    vllm_gpus: str = cluster("", "Server mode: positions of the GPUs for vLLM, e.g. 0 or 0,1.")

    # ---------------------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The flat mapping of field names that is stored on the run row and written to YAML/JSON."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> tuple[RunConfig, list[str]]:
        """Build a config from a flat mapping.

        Returns the config and a list of notes about keys that were ignored. Values of the wrong type raise
        :class:`ConfigError` listing every problem (with the range problems of the values that did parse, so a second
        try isn't needed); everything else is left to trainer.review.problems.
        """
        ranges = {
            f.name: rules.range_text(f.metadata["min"], f.metadata["max"])
            for f in dataclasses.fields(cls)
            if f.metadata.get("min") is not None or f.metadata.get("max") is not None
        }
        kwargs, problems, notes = read_values(data, typing.get_type_hints(cls), ranges)
        if problems:
            partial = cls(**kwargs)
            problems.extend(partial.field_problems())
            raise ConfigError(problems, partial)
        return cls(**kwargs), notes

    @classmethod
    def from_stored(cls, data: Mapping[str, Any] | None) -> RunConfig:
        """A run's stored config (the mapping on its row) read back as its worker reads it, whichever grpo-studio
        stored it: a key that is no setting (any more) is ignored, a setting it lacks takes its default here, and a
        value that no longer reads as its setting's type takes its default too. A place that shows or uses a stored
        run's settings reads them through this, not by key with a default of its own (one default per setting)."""
        try:
            return cls.from_dict(dict(data or {}))[0]
        except ConfigError as exc:
            return exc.partial if exc.partial is not None else cls()

    @classmethod
    def load(cls, path: str | Path) -> tuple[RunConfig, list[str]]:
        """Load a YAML or JSON file holding a flat mapping of field names."""
        try:
            return cls.from_dict(read_mapping(path))
        except ConfigFileError as exc:
            raise ConfigError([str(exc)]) from None

    def save(self, path: str | Path) -> None:
        """Write the config as YAML, fields in declaration order (or JSON when the file name ends in .json)."""
        write_mapping(path, self.to_dict())

    # ---------------------------------------------------------------------------------------------------------------
    def field_problems(self) -> list[str]:
        """The problems this config shows on its own: a value out of its field's range, an empty name, a batch that
        doesn't split into whole groups, lengths that don't fit, no LoRA target (trainer.review.problems adds
        the checks that look outside the config)."""
        found: list[str] = []
        trl = trl_features.installed()
        fields = {f.name: f for f in dataclasses.fields(self)}
        for f in fields.values():
            value = getattr(self, f.name)
            # a setting the installed TRL lacks is refused naming its version: asked for, or set off its default
            lacking = trl.lacks(f.name, value) if f.name == "loss_type" or value != f.default else None
            if lacking:
                found.append(lacking)
            elif f.name != "num_generations":  # check_batch words its range in GRPO terms (the field's range)
                found.extend(rules.check_range(f, value))
        if not self.name.strip():
            found.append("name is empty: give the run a name")
        batch = (self.per_device_train_batch_size, self.gradient_accumulation_steps, self.num_processes)
        found.extend(rules.check_batch(*batch, group=self.num_generations, group_field=fields["num_generations"]))
        found.extend(
            rules.check_generation_batch(
                self.per_device_train_batch_size, self.num_processes, self.steps_per_generation, self.num_generations
            )
        )
        found.extend(rules.check_trackers(list(self.report_to)))
        found.extend(rules.check_lengths(self.max_prompt_length, self.max_completion_length, self.max_seq_length))
        if self.loss_type == "cispo" and 0 < self.epsilon_high <= 1:
            found.append(
                f"epsilon_high {self.epsilon_high:g} with loss_type cispo caps each token's importance weight at "
                f"{self.epsilon_high:g} (cispo's cap is epsilon_high itself, not 1 + epsilon_high), so even an unchanged "
                f"token's update shrinks to {self.epsilon_high:g} of its size; expected above 1 (ScaleRL: 5.0), or 0 "
                "for 5.0"
            )
        try:
            parse_examples(self.few_shot_examples)
        except ValueError as exc:
            found.append(str(exc))
        if not self.lora_target_modules:
            found.append("lora_target_modules is empty: name at least one module (e.g. q_proj) to adapt")
        return found

    def effective_epsilon_high(self) -> float | None:
        """The epsilon_high TRL gets: the setting, or for 0 TRL's own default (None: epsilon, trl 1.16
        grpo_trainer.py:946) except with cispo, whose cap on the importance weight is epsilon_high itself
        (grpo_trainer.py:3109-3110: ``clamp(ratio, max=epsilon_high)``): epsilon's 0.2 would cut an unchanged token's
        weight to 0.2 and shrink every update five-fold, so 0 means ScaleRL's 5.0 there (TRL's own doc of the
        setting, grpo_config.py:187-188)."""
        if self.epsilon_high:
            return self.epsilon_high
        return CISPO_EPSILON_MAX if self.loss_type == "cispo" else None

    def uses_tools(self) -> bool:
        """Whether the run gives its model tools or an environment (its rollouts, held-out answers and Compare sides
        are then conversations with tool turns)."""
        return bool(self.tools or self.environment)

    def weights(self) -> list[float]:
        """The reward weights, 1.0 each where none were given."""
        return list(self.reward_weights) if self.reward_weights else [1.0] * len(self.reward_funcs)

    def prompts_per_step(self) -> int:
        """How many distinct prompts one optimizer step sees (over all processes)."""
        batch = self.per_device_train_batch_size * self.gradient_accumulation_steps * self.num_processes
        return batch * (self.slurm_nodes if self.executor == "slurm" else 1) // self.num_generations

    def with_absolute_paths(self, base: Path) -> RunConfig:
        """This config with its relative local paths (model directory, data file, custom reward and tool files) made absolute
        against ``base``, the directory they were checked from: a launched worker runs in its run directory."""

        def absolute(text: str) -> str:
            path = Path(text).expanduser()
            return str(base / path) if not path.is_absolute() and (base / path).exists() else text

        def code(name: str) -> str:  # path/to/file.py:name with its file made absolute
            target, sep, func = name.rpartition(":")
            return absolute(target) + sep + func if target.endswith(".py") else name

        return dataclasses.replace(
            self,
            model_name_or_path=absolute(self.model_name_or_path),
            dataset_name=absolute(self.dataset_name),
            reward_funcs=[code(name) for name in self.reward_funcs],
            tools=[code(name) for name in self.tools],
            environment=code(self.environment),
        )


class ConfigError(ValueError):
    """A config with problems; ``problems`` lists each in plain words. ``partial``: when values were of the wrong
    type, the config of the others (defaults in their place), so a caller can still check the rest."""

    def __init__(self, problems: list[str], partial: RunConfig | None = None):
        self.problems = problems
        self.partial = partial
        super().__init__("invalid run config:\n" + "\n".join(f"  - {p}" for p in problems))
