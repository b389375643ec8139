"""What TRL's colocate vLLM engine was actually built and asked with, read back from the live engine into the run's
log: the settings the run's config maps to (lengths, batch, memory) as the engine holds them, and the sampling
parameters of its first generation. So a user (and tests/engines/test_vllm_cpu.py) sees that the config reached vLLM,
rather than trusting that it did.

TRL 1.16 keeps the engine at ``trainer.vllm_generation.llm`` (trainer/grpo_trainer.py:1107-1140,
generation/vllm_generation.py:347-364) and builds a ``SamplingParams`` per call (vllm_generation.py:683).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainer.loading.vllm_cpu import GIB


def engine_line(llm: Any) -> str:
    """One line of the engine's settings, from its ``vllm_config``."""
    config = llm.llm_engine.vllm_config
    cache = config.cache_config
    memory = (
        f"KV cache {cache.kv_cache_memory_bytes / GIB:g} GiB"
        if getattr(cache, "kv_cache_memory_bytes", None)
        else f"gpu_memory_utilization {cache.gpu_memory_utilization:g}"
    )
    return (
        f"vLLM engine: {config.device_config.device_type}, {str(config.model_config.dtype).removeprefix('torch.')}, "
        f"{'eager' if config.model_config.enforce_eager else 'compiled'}, max_model_len {config.model_config.max_model_len}, max_num_seqs {config.scheduler_config.max_num_seqs}, "
        f"{memory}"
    )


def sampling_line(params: Any) -> str:
    """One line of a ``SamplingParams``' settings that the run's config sets."""
    return (
        f"vLLM sampling: temperature {params.temperature:g}, top_p {params.top_p:g}, top_k {params.top_k}, "
        f"max_tokens {params.max_tokens}, n {params.n}"
    )


def report_engine(trainer: Any, log_line: Callable[[str], None]) -> bool:
    """Log the colocate engine's settings now and its first generation's sampling parameters when it happens.
    Returns whether there was an engine to report (False in server mode and without vLLM)."""
    llm = getattr(getattr(trainer, "vllm_generation", None), "llm", None)
    if llm is None:
        return False
    log_line(engine_line(llm))
    generate = llm.generate

    def generate_reporting_once(*args, **kwargs):
        params = kwargs.get("sampling_params", args[1] if len(args) > 1 else None)
        if params is not None:
            first = params[0] if isinstance(params, list) else params
            log_line(sampling_line(first))
        llm.generate = generate  # once is enough: later calls go straight to vLLM
        return generate(*args, **kwargs)

    llm.generate = generate_reporting_once
    return True
