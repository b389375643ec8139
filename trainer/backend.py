"""Which model path a run takes, and loading the model on it.

Two paths: the fast one (Unsloth loads the model, optionally in 4 bits, and vLLM generates the groups) when a CUDA
GPU is present and the ``gpu`` extra is installed; otherwise plain transformers + PEFT (bf16 on a GPU that supports
it, fp32 on CPU). The choice and its reason are recorded on the run row, so the dashboard can say why a run is slow.
Capability detection sits in :func:`probe` so tests can fake it at that boundary.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass

from trainer.config import BUILTIN_MODEL, RunConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Capabilities:
    """What this machine offers: a CUDA GPU (with bf16?), and whether Unsloth and vLLM are importable."""

    cuda: bool
    bf16: bool
    unsloth: bool
    vllm: bool


@dataclass(frozen=True)
class Backend:
    """The chosen path: ``unsloth`` or ``plain``, the device, and why."""

    name: str
    device: str
    bf16: bool
    use_vllm: bool
    reason: str

    def describe(self) -> str:
        """One line for the run row and log, e.g. "plain transformers + PEFT on cpu (fp32): no GPU"."""
        label = (
            "Unsloth" + (" + vLLM" if self.use_vllm else "") if self.name == "unsloth" else "plain transformers + PEFT"
        )
        return f"{label} on {self.device} ({'bf16' if self.bf16 else 'fp32'}): {self.reason}"


def probe() -> Capabilities:
    """Detect the GPU and the optional packages without importing Unsloth or vLLM (both are slow to import)."""
    import torch

    cuda = torch.cuda.is_available()
    return Capabilities(
        cuda=cuda,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        unsloth=importlib.util.find_spec("unsloth") is not None,
        vllm=importlib.util.find_spec("vllm") is not None,
    )


def select_backend(config: RunConfig, caps: Capabilities | None = None) -> Backend:
    """Choose the path for ``config`` on a machine with ``caps`` (probed when not given)."""
    caps = caps or probe()
    device = "cuda" if caps.cuda else "cpu"

    def plain(reason: str) -> Backend:
        return Backend("plain", device, caps.bf16, False, reason)

    if config.backend == "plain":
        return plain("plain path chosen in the config")
    if not caps.cuda:
        return plain("no GPU")
    if not caps.unsloth:
        return plain("unsloth not installed (pip install 'grpo-studio[gpu]')")
    if config.model_name_or_path == BUILTIN_MODEL:
        return plain("model architecture not supported by Unsloth: the built-in tiny model")
    use_vllm = config.use_vllm and caps.vllm
    reason = "GPU with unsloth" + (
        "" if use_vllm or not config.use_vllm else "; vllm not installed, generating with Unsloth"
    )
    return Backend("unsloth", "cuda", caps.bf16, use_vllm, reason)


def model_path(config: RunConfig) -> str:
    """Where to load the model from: the built-in model's cache directory, or the configured id/path."""
    if config.model_name_or_path == BUILTIN_MODEL:
        from trainer.tiny import tiny_model_dir

        return str(tiny_model_dir())
    return config.model_name_or_path


def load_tokenizer(path: str):
    """The model's tokenizer, left-padded, with a pad token (the EOS token where the model has none)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_model(config: RunConfig, backend: Backend):
    """Load the model for training: (model, tokenizer). On the Unsloth path the LoRA adapter is already applied."""
    path = model_path(config)
    if backend.name == "unsloth":
        return _load_unsloth(config, path, backend)
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if backend.bf16 else torch.float32
    kwargs = {"dtype": dtype}
    if config.load_in_4bit and backend.device == "cuda" and importlib.util.find_spec("bitsandbytes"):
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=dtype)
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if backend.device == "cuda" and "quantization_config" not in kwargs:
        model = model.to("cuda")
    return model, load_tokenizer(path)


def _load_unsloth(config: RunConfig, path: str, backend: Backend):
    from unsloth import FastLanguageModel  # must come before trl/transformers are used: it patches them

    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=path,
        max_seq_length=config.max_seq_length,
        load_in_4bit=config.load_in_4bit,
        fast_inference=backend.use_vllm,
        max_lora_rank=config.lora_r,
        gpu_memory_utilization=config.vllm_gpu_memory_utilization,
    )
    model = FastLanguageModel.get_peft_model(
        model,
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        use_gradient_checkpointing="unsloth" if config.gradient_checkpointing else False,
        random_state=config.seed,
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer
