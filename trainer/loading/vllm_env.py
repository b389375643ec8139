"""The environment every vLLM engine grpo-studio starts needs (issue 26, item 1).

vLLM 0.32 samples top-k/top-p with FlashInfer by default (vllm 0.32 envs.py:878-882: on unless
``VLLM_USE_FLASHINFER_SAMPLER`` is set). Its gate checks the platform, the compute capability, the SM count and
FlashInfer's target architectures, never whether a CUDA compiler exists (v1/sample/ops/topk_topp_sampler.py:77-136;
flashinfer 0.7.0.post1 jit/core.py:108-120 ``check_cuda_arch`` looks at architectures only, and
jit/cpp_ext.py:68-87 ``get_cuda_version`` falls back to torch's CUDA version without nvcc). Start-up profiling then
samples with top_p and top_k set (vllm 0.32 v1/worker/gpu_model_runner.py:5947-5967), and FlashInfer 0.7 compiles its
sampling kernels on first use (flashinfer sampling.py:66-68 → jit/sampling.py:21-30, built by jit/core.py:315-335
with ``<cuda home>/bin/nvcc``, where jit/cpp_ext.py:48-65 takes the CUDA home from CUDA_HOME, CUDA_PATH,
``which nvcc`` or /usr/local/cuda). On a machine without nvcc (the Docker image's CUDA runtime base, or
``pip install ".[gpu]"`` on a host without a CUDA toolkit) every engine therefore dies at start-up. Unsloth's own engine
is spared because unsloth_zoo turns FlashInfer off itself when nvcc is missing (vllm_utils.py:4680-4724, cited from
the issue); TRL's colocate engine, ``trl vllm-serve`` and the Compare panel's engine are not.

So before any ``LLM(...)``, every place that starts vLLM calls :func:`prepare_vllm` (in-process engines: the Compare
panel's, TRL's colocate engine in the worker) or adds :func:`vllm_env` to a server's environment. vLLM then uses its
PyTorch/Triton sampler, which needs no compiler. A choice the user made (the variable already set) is kept.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

FLASHINFER_SAMPLER = "VLLM_USE_FLASHINFER_SAMPLER"
DEFAULT_CUDA_HOME = "/usr/local/cuda"


def nvcc_path(
    environ: Mapping[str, str] | None = None, which: Callable[[str], str | None] = shutil.which
) -> str | None:
    """The nvcc FlashInfer would compile with, or None: the CUDA home it picks (flashinfer 0.7.0.post1
    jit/cpp_ext.py:48-65: CUDA_HOME, else CUDA_PATH, else the directory above ``which nvcc``, else /usr/local/cuda)
    must hold ``bin/nvcc`` (jit/cpp_ext.py:72)."""
    env = os.environ if environ is None else environ
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    if not home:
        found = which("nvcc")
        home = str(Path(found).resolve().parent.parent) if found else DEFAULT_CUDA_HOME
    nvcc = Path(home) / "bin" / "nvcc"
    return str(nvcc) if nvcc.is_file() else None


def vllm_env(environ: Mapping[str, str] | None = None, nvcc: Callable[..., str | None] | None = None) -> dict[str, str]:
    """The variables to add to a vLLM engine's environment: ``VLLM_USE_FLASHINFER_SAMPLER=0`` when there is no nvcc
    (``nvcc``: how to find it, :func:`nvcc_path` by default) and nobody chose otherwise, else nothing."""
    env = os.environ if environ is None else environ
    if FLASHINFER_SAMPLER in env or (nvcc or nvcc_path)(env):
        return {}
    return {FLASHINFER_SAMPLER: "0"}


def prepare_vllm() -> dict[str, str]:
    """Set :func:`vllm_env` in this process's environment (before ``LLM(...)``; engine processes it forks or
    spawns inherit it). Returns what it set."""
    added = vllm_env()
    if added:
        os.environ.update(added)
        log.info("no nvcc found: %s=0, so vLLM samples without FlashInfer's JIT-compiled kernels", FLASHINFER_SAMPLER)
    return added


def engine_defaults(**defaults) -> None:
    """Make every ``vllm.LLM`` built from now on in this process take ``defaults`` for the keywords its caller did
    not pass. TRL builds its colocate engine with a fixed set (trl 1.16 generation/vllm_generation.py:347-364: no
    dtype, no ``enforce_eager``), so this is how a run's choice reaches it. Defaults given again add to the earlier."""
    import functools

    import vllm

    current = vllm.LLM.__init__
    original = getattr(current, "grpo_studio_original", current)
    merged = {**getattr(current, "grpo_studio_defaults", {}), **defaults}

    @functools.wraps(original)
    def init_with_defaults(self, *args, **kwargs):
        original(self, *args, **{**merged, **kwargs})

    init_with_defaults.grpo_studio_original = original
    init_with_defaults.grpo_studio_defaults = merged
    vllm.LLM.__init__ = init_with_defaults
