"""The compare panel's vLLM path: one vLLM engine on the base model with LoRA enabled, the base side sampled plainly
and the tuned side with the run's adapter as a LoRA request (vllm 0.32 entrypoints/llm.py:617-633
``LLM.chat(..., lora_request=)``, lora/request.py:8-28), each completion with its own seed, so base and tuned see the
same randomness. Taken on a GPU with vLLM installed, for a run that generated with vLLM; vllm is imported on first
use only.
"""

from __future__ import annotations

from pathlib import Path

from trainer.config import RunConfig
from trainer.config.names import BUILTIN_MODELS
from trainer.evaluation.sampling import SamplingSettings

# vLLM serves only these LoRA ranks (vllm 0.32 config/lora.py:26); the engine's max_lora_rank is the next one up.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def uses_vllm_engine(config: RunConfig, caps=None) -> bool:
    """Whether :func:`trainer.evaluation.compare.compare` samples with vLLM: a GPU with vLLM installed, and a run that generated
    with vLLM."""
    from trainer.loading.backend import probe

    if not config.use_vllm or config.backend == "plain" or config.model_name_or_path in BUILTIN_MODELS:
        return False
    caps = caps or probe()
    return caps.cuda and caps.vllm


def adapter_signature(adapter_dir: Path) -> tuple:
    """What identifies the adapter saved in ``adapter_dir`` now: each file's relative name, size and modification
    time (ns). A resumed run rewrites ``adapter/`` in place, so the directory's name alone would keep serving the
    weights vLLM cached the first time (issue 26, item 3). Empty for a directory that is not there."""
    try:
        files = sorted(p for p in Path(adapter_dir).rglob("*") if p.is_file())
        return tuple((str(p.relative_to(adapter_dir)), (st := p.stat()).st_size, st.st_mtime_ns) for p in files)
    except OSError:  # being rewritten right now: the next request sees the new files
        return ()


class VllmSampler:
    """One vLLM engine on the base model with LoRA enabled: the base side without a LoRA request, the tuned side
    with the run's adapter as one."""

    def __init__(self, base_path: str, config: RunConfig) -> None:
        from trainer.loading.hub import hub_access
        from trainer.loading.vllm_env import prepare_vllm

        prepare_vllm()  # before vLLM reads its settings: no FlashInfer sampler without nvcc (issue 26)
        from vllm import LLM

        # (adapter directory, its files' signature) -> LoRA id; ids must be >= 1 and name one adapter's weights for the
        # engine's life, because vLLM keeps the weights it loaded under an id (vllm 0.32 lora/request.py:15-28)
        self.lora_ids: dict[tuple[str, tuple], int] = {}
        with hub_access(base_path):
            self.llm = LLM(
                model=base_path,
                enable_lora=True,
                max_lora_rank=next(r for r in VLLM_LORA_RANKS if r >= config.lora_r),
                max_loras=1,
                max_model_len=config.max_seq_length,
                gpu_memory_utilization=config.vllm_gpu_memory_utilization,
                seed=0,
            )

    def sample(
        self,
        messages: list[dict],
        n: int,
        adapter_dir: Path | None,
        settings: SamplingSettings,
    ) -> list[str]:
        """``n`` completions in one batch, completion i seeded with ``seed + i``; with ``adapter_dir`` through it."""
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest

        params = [
            SamplingParams(
                n=1,
                temperature=0.0 if settings.greedy else settings.temperature,
                top_p=1.0 if settings.greedy else settings.top_p,
                max_tokens=settings.max_new_tokens,
                seed=settings.seed + i,
            )
            for i in range(n)
        ]
        lora = None
        if adapter_dir is not None:
            lora_id = self.lora_ids.setdefault(
                (str(adapter_dir), adapter_signature(adapter_dir)), len(self.lora_ids) + 1
            )
            lora = LoRARequest(lora_name=f"adapter-{lora_id}", lora_int_id=lora_id, lora_path=str(adapter_dir))
        outputs = self.llm.chat([messages] * n, params, use_tqdm=False, lora_request=lora)
        return [out.outputs[0].text for out in outputs]

    def shutdown(self) -> None:
        """Stop the engine (its engine-core process holds the GPU memory: vllm 0.32 v1/engine/core_client.py:766)."""
        engine_core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if engine_core is not None:
            engine_core.shutdown()
        self.llm = None
