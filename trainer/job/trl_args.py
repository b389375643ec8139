"""Turn a RunConfig into the installed TRL's ``GRPOConfig`` and PEFT's ``LoraConfig``.

Which RunConfig settings GRPOConfig gets, and under which name, is the ``trl`` flag of each field's metadata
(trainer.config): a new setting for TRL is one flag, not a line here too. The other arguments follow from a setting
(warm-up steps, reward weights), from the machine (vLLM, bf16, CPU) or are fixed for every run (logging).

grpo-studio supports TRL 1.15 and 1.16. An argument is set only if the installed GRPOConfig has it, and what is not
applied is reported in ``notes`` (shown in the run's log):

- Neither TRL 1.15 nor 1.16 has ``max_prompt_length`` on GRPOConfig (trl 1.15.0 and 1.16.0 trainer/grpo_config.py
  declare no such field); the worker truncates prompts itself (see :func:`truncate_prompts`) and still passes the
  argument, so a TRL that has it again applies it.
- ``num_iterations`` and ``steps_per_generation`` have the same names and meaning in both (trl 1.15.0
  grpo_config.py:523, 684; 1.16.0 :528, 689); ``report_to`` and ``project`` are transformers' TrainingArguments.
- transformers 5 dropped ``warmup_ratio``; a ratio below 1 passed as ``warmup_steps`` means the same thing.
- ``use_vllm`` with ``vllm_mode="colocate"`` is TRL's own vLLM engine in the training process (both versions:
  trl 1.15.0 grpo_config.py:582-598, 1.16.0 :587-603); ``vllm_max_model_length`` keeps its KV cache to the run's
  ``max_seq_length`` instead of the model's whole context window. ``vllm_mode="server"`` sends generation to the
  run's ``trl vllm-serve`` on GPUs of its own instead (trainer.supervise.vllm_server starts it).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainer.loading.backend import lora_kwargs
from trainer.supervise.commands import VLLM_GROUP_PORT_ENV, VLLM_SERVER_ENV

if TYPE_CHECKING:  # annotations only: the config is imported where it is built
    from trainer.config import RunConfig


@dataclass
class TrlArgs:
    """What :func:`to_trl` built, plus notes on settings the installed TRL handles differently."""

    grpo: Any
    lora: Any
    notes: list[str] = field(default_factory=list)
    prompt_truncation_needed: bool = False


def trl_settings(config: RunConfig) -> dict[str, Any]:
    """The settings RunConfig's field metadata marks for TRL (``trl=True`` or ``trl="name"``), under TRL's names."""
    return {
        f.name if f.metadata["trl"] is True else f.metadata["trl"]: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.metadata["trl"]
    }


def grpo_kwargs(
    config: RunConfig, output_dir: str, *, use_vllm: bool = False, bf16: bool = False, cpu: bool = False
) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for ``config``, before filtering by what the installed TRL accepts: the
    settings marked for TRL, plus what follows from them or from the machine."""
    return {
        **trl_settings(config),
        "output_dir": output_dir,
        # transformers 5 has no warmup_ratio (to_trl passes this instead); a value below 1 is read as a ratio
        "warmup_steps": config.warmup_ratio if config.warmup_ratio < 1 else config.max_steps,
        "data_seed": config.seed,
        "save_strategy": "steps",
        "reward_weights": config.weights(),
        "use_vllm": use_vllm,
        "vllm_mode": config.vllm_mode,
        **(vllm_server_kwargs() if config.vllm_mode == "server" else {}),
        "bf16": bf16,
        # 0 is RunConfig's word for TRL's own default (None: gradient_accumulation_steps, grpo_config.py:1098-1100)
        "steps_per_generation": config.steps_per_generation or None,
        # 0 is RunConfig's word for "as epsilon" (TRL's None), but for cispo, whose cap it is (5.0)
        "epsilon_high": config.effective_epsilon_high(),
        # luspo is GSPO's sequence-level ratio scaled by length: TRL warns unless the ratio is per sequence (trl 1.15.0
        # grpo_trainer.py:893-898)
        **({"importance_sampling_level": "sequence"} if config.loss_type == "luspo" else {}),
        # The trackers a user asked for get TRL's log dicts as well (transformers' integrations); grpo-studio's own
        # charts read its database either way. "project" names the trackio project (TrainingArguments.project).
        "report_to": list(config.report_to) or "none",
        **({"project": "grpo-studio"} if config.report_to else {}),
        # The worker stores the completions table itself; TRL's parquet files and rich printing would duplicate it.
        "log_completions": False,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        # On CPU say so explicitly: with several processes (torchrun) that makes Accelerate set up gloo data
        # parallelism instead of training independent copies.
        "use_cpu": cpu,
        **({"ddp_backend": "gloo"} if cpu and config.num_processes > 1 else {}),
    }


# the module each tracker of report_to needs (transformers' is_*_available look for these; tensorboardX also does)
TRACKER_MODULES = {"trackio": "trackio", "wandb": "wandb", "tensorboard": "tensorboard", "mlflow": "mlflow"}


def missing_trackers(report_to: list[str]) -> list[str]:
    """The trackers of ``report_to`` whose package is not installed (transformers would fail on them mid-setup)."""
    import importlib.util

    return [name for name in report_to if importlib.util.find_spec(TRACKER_MODULES.get(name, name)) is None]


def vllm_server_kwargs() -> dict[str, Any]:
    """Where the run's vLLM server listens, as trainer.supervise.vllm_server told the training processes through their
    environment (it picks free ports when it starts the server): GRPOConfig's ``vllm_server_host``,
    ``vllm_server_port`` and ``vllm_group_port`` (the weight-sync group; trl 1.15.0 grpo_config.py:627, 631, 642;
    1.16.0 :632, 636, 647)."""
    host, _, port = os.environ.get(VLLM_SERVER_ENV, "127.0.0.1:8000").rpartition(":")
    return {
        "vllm_server_host": host,
        "vllm_server_port": int(port),
        "vllm_group_port": int(os.environ.get(VLLM_GROUP_PORT_ENV, "51216")),
    }


def to_trl(
    config: RunConfig,
    output_dir: str,
    *,
    use_vllm: bool = False,
    bf16: bool = False,
    cpu: bool = False,
    **overrides: Any,
) -> TrlArgs:
    """Build the installed TRL's GRPOConfig and PEFT's LoraConfig from a RunConfig."""
    from peft import LoraConfig
    from trl import GRPOConfig

    missing = missing_trackers(config.report_to)
    if missing:
        raise ValueError(
            f"report_to {', '.join(missing)}: not installed where the worker runs: "
            + ", ".join(f"pip install 'grpo-studio[{name}]'" for name in missing)
        )
    accepted = {f.name for f in dataclasses.fields(GRPOConfig)}
    wanted = grpo_kwargs(config, output_dir, use_vllm=use_vllm, bf16=bf16, cpu=cpu) | overrides
    notes = []
    if "warmup_ratio" in accepted:
        wanted.pop("warmup_steps")
    else:
        wanted.pop("warmup_ratio")
    truncate = "max_prompt_length" not in accepted
    if truncate:
        notes.append(
            f"the installed TRL has no max_prompt_length: grpo-studio cuts prompts to {config.max_prompt_length} "
            "tokens itself (from the left)"
        )
    dropped = sorted(k for k in wanted if k not in accepted and k != "max_prompt_length")
    if dropped:
        notes.append(f"the installed TRL does not know {', '.join(dropped)}: not applied")
    grpo = GRPOConfig(**{k: v for k, v in wanted.items() if k in accepted})
    lora = LoraConfig(**lora_kwargs(config), task_type="CAUSAL_LM")
    return TrlArgs(grpo=grpo, lora=lora, notes=notes, prompt_truncation_needed=truncate)


def truncate_prompts(dataset, tokenizer, max_prompt_length: int, tools: list | None = None):
    """Cut each row's question from the left so its chat-templated prompt fits ``max_prompt_length`` tokens.

    Returns the dataset and how many rows were cut. Only the user's question is shortened: the system prompt and the
    template stay whole, as a left truncation of the templated token ids would not guarantee. Every prompt is
    measured in one batched call of the fast tokenizer, and the data set is only rewritten when a row is too long:
    a ``dataset.map`` over every row, tokenizing one at a time, cost the demo's first step a second (issue 17).
    ``tools``: the run's tools, whose schemas the template writes into every prompt (TRL renders them so).
    """
    lengths = _prompt_tokens(tokenizer, list(dataset["prompt"]), tools)
    too_long = {i: n for i, n in enumerate(lengths) if n > max_prompt_length}
    if not too_long:
        return dataset, 0

    def fit(row: dict, index: int) -> dict:
        if index not in too_long:
            return row
        messages = row["prompt"]
        question_ids = tokenizer(messages[-1]["content"], add_special_tokens=False)["input_ids"]
        keep = len(question_ids) - (too_long[index] - max_prompt_length)
        if keep <= 0:  # the rest of the prompt alone fills the limit: no cut of the question can fit it
            fixed = too_long[index] - len(question_ids)
            raise ValueError(
                f"max_prompt_length {max_prompt_length} leaves no room for a question: the system prompt, the worked "
                f"examples and the chat template alone take {fixed} tokens; raise max_prompt_length or shorten them"
            )
        text = tokenizer.decode(question_ids[len(question_ids) - keep :])
        row["prompt"] = messages[:-1] + [{**messages[-1], "content": text}]
        return row

    return dataset.map(fit, with_indices=True, load_from_cache_file=False), len(too_long)


def _prompt_tokens(tokenizer, prompts: list[list[dict]], tools: list | None = None) -> list[int]:
    """The token count of each chat-templated prompt (with the generation prompt and the tools, as TRL renders it:
    ``tools or None``, trl 1.16.0 trainer/grpo_trainer.py:1737-1741)."""
    texts = tokenizer.apply_chat_template(prompts, tokenize=False, add_generation_prompt=True, tools=tools or None)
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
