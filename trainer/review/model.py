"""The rules of the model settings: what ``model_name_or_path`` names (a built-in model, a local directory or .gguf
file, a hub id:
trainer.config.names decides which), and what the GPU path (trainer.loading.backend) cannot start with."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from trainer.config.names import BUILTIN_MODEL, BUILTIN_MODELS, hub_id_problem, looks_like_path, protected_file_problem
from trainer.config.run_config import RunConfig
from trainer.loading.backend import VLLM_MAX_LORA_RANK, cpu_vllm_problem, nvidia_smi_gpu
from trainer.loading.gguf import gguf_problem, is_gguf


def check_model(model: str) -> list[str]:
    """What is wrong with ``model_name_or_path`` before anything loads it: an unknown
    built-in model, a local directory that isn't there, or a name that is no hub id."""
    if model in BUILTIN_MODELS:
        return []
    if model.startswith("builtin:"):
        return [f"model {model!r}: the built-in models are {', '.join(BUILTIN_MODELS)}"]
    if looks_like_path(model) or Path(model).expanduser().is_dir():
        if problem := protected_file_problem(model, "model"):
            return [problem]
        if is_gguf(model):
            return [problem] if (problem := gguf_problem(model)) else []
        if Path(model).expanduser().is_file():
            return [f"model {model!r} is a file: expected a model directory or a .gguf file"]
        return [] if Path(model).expanduser().is_dir() else [f"model {model!r}: no such directory"]
    if problem := hub_id_problem(model, "model", owner_required=False):
        return [f"{problem}; expected a hub id like owner/name, a local directory, a .gguf file, or {BUILTIN_MODEL}"]
    return []


def gpu_path_problems(config: RunConfig) -> list[str]:
    """What the GPU path cannot start with: a LoRA rank vLLM refuses, DeepSpeed asked
    for with one process or without DeepSpeed installed."""
    problems = []
    if config.deepspeed_stage and config.num_processes < 2:
        problems.append(f"deepspeed_stage {config.deepspeed_stage} needs num_processes of 2 or more")
    will_use_vllm = config.use_vllm and config.backend != "plain" and config.model_name_or_path not in BUILTIN_MODELS
    if will_use_vllm and config.lora_r > VLLM_MAX_LORA_RANK:
        problems.append(
            f"lora_r {config.lora_r}: vLLM serves LoRA ranks up to {VLLM_MAX_LORA_RANK}; lower lora_r or set "
            "use_vllm: false"
        )
    server = config.use_vllm and config.vllm_mode == "server" and config.executor != "slurm"
    if (server or asks_cpu_vllm(config)) and nvidia_smi_gpu() is None and (problem := cpu_vllm_problem(config)):
        problems.append(problem)
    if config.deepspeed_stage and importlib.util.find_spec("deepspeed") is None:
        problems.append(
            f"deepspeed_stage {config.deepspeed_stage} needs DeepSpeed, which is not installed: "
            "pip install 'grpo-studio[deepspeed]' (or set deepspeed_stage: 0)"
        )
    return problems


def asks_cpu_vllm(config: RunConfig) -> bool:
    """Whether ``config`` asks vLLM to generate here even without a GPU: backend: trl with use_vllm, run locally, vLLM
    installed (trainer.loading.backend.select_backend makes the same choice, with no GPU, from torch)."""
    asks = config.backend == "trl" and config.use_vllm and config.executor != "slurm"
    return asks and importlib.util.find_spec("vllm") is not None


def machine_warnings(config: RunConfig) -> list[str]:
    """What this machine lacks for a config that asks for a GPU's paths (vLLM, 4-bit) and runs here: without a GPU
    the run falls back to plain transformers on the CPU in 32 bits (trainer.loading.backend.select_backend), which a
    preset of billions of parameters makes a matter of days. Read from nvidia-smi, not torch, so a check in the
    dashboard's process loads nothing (issue 58: a GPU preset read "Valid" on a CPU-only machine)."""
    wants_gpu = (config.use_vllm or config.load_in_4bit) and config.backend != "plain"
    if not wants_gpu or config.executor == "slurm" or config.model_name_or_path in BUILTIN_MODELS:
        return []
    if nvidia_smi_gpu() is not None:
        return []
    if asks_cpu_vllm(config) and not config.load_in_4bit:
        return []  # vLLM on the CPU, asked for on purpose, and it runs (checked by gpu_path_problems)
    asked = " and ".join(
        name for name, on in (("use_vllm", config.use_vllm), ("load_in_4bit", config.load_in_4bit)) if on
    )
    return [
        f"this machine has no GPU that nvidia-smi sees, so {asked} can't apply: {config.model_name_or_path} would "
        "train on the CPU in 32 bits with plain transformers, hours to days for a model of billions of parameters; "
        "run it on a machine with an NVIDIA GPU (or through Slurm), or set backend: plain to train here on purpose"
    ]


def sampling_warnings(config: RunConfig) -> list[str]:
    """top_p below 1 with TRL's vLLM importance-sampling correction: vLLM returns the log-probs of the distribution it
    sampled from, renormalised over the nucleus (trl 1.16 generation/vllm_generation.py:361,
    ``logprobs_mode="processed_logprobs"``), while the trainer's come from the whole distribution at the same
    temperature (grpo_trainer.py: logits / temperature, no top_p), so every token's ratio is the nucleus's mass, below
    1, and a sequence's ratio is their product. Measured on this CPU (tests/engines/test_vllm_cpu.py's settings, top_p 0.95,
    32-token completions): 0.43-0.50 at every step, so the correction scaled every update down by half or more.
    Unsloth's vLLM path corrects in its own way (RunConfig.vllm_importance_sampling_correction's help)."""
    trl_path = config.backend == "trl" or (config.backend == "auto" and importlib.util.find_spec("unsloth") is None)
    corrected = config.use_vllm and config.vllm_importance_sampling_correction and trl_path
    if not corrected or config.top_p >= 1 or config.model_name_or_path in BUILTIN_MODELS:
        return []
    return [
        f"top_p {config.top_p:g} with use_vllm: TRL's importance-sampling correction weighs each completion by the "
        "trainer's log-probs (the whole distribution) over vLLM's (renormalised to the top_p nucleus), a ratio below 1 "
        "on every token that shrinks each update (measured: 0.43-0.50 over 32 tokens at top_p 0.95); set top_p: 1, or "
        "vllm_importance_sampling_correction: false"
    ]
