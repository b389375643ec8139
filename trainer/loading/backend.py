"""Which model path a run takes, and loading the model on it.

Three paths, chosen by :func:`select_backend` from the config and what the machine offers:

- ``unsloth``: Unsloth loads the model (optionally in 4 bits) and, with ``use_vllm``, its own vLLM engine generates
  the groups. Needs a CUDA GPU and the ``gpu`` extra.
- ``trl_vllm``: plain transformers + PEFT for training, TRL's own vLLM engine in ``colocate`` mode for generation.
  For a GPU with vLLM but no Unsloth (Unsloth pins an older TRL; this path works with the newest), a model Unsloth
  refuses (:class:`UnsupportedByUnsloth`), or ``backend: trl``. It loads in 16 bits: TRL's weight sync merges the adapter and streams the base weights into vLLM
  one tensor at a time (trl 1.16 generation/vllm_generation.py:443-469, 508-510), which packed 4-bit weights
  without their quantisation state do not survive.
- ``plain``: transformers + PEFT with ``generate`` (bf16 on a GPU that supports it, fp32 on CPU).

The choice and its reason are recorded on the run row, so the dashboard can say why a run is slow. Capability
detection sits in :func:`probe` so tests can fake it at that boundary. Problems that would only surface minutes into
a GPU run (a GPU torch cannot use, 4-bit + vLLM without the bitsandbytes plugin) raise :class:`BackendError` here,
before anything loads.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.config.names import BUILTIN_MODELS, BUILTIN_TOOL_MODEL
from trainer.loading.errors import BackendError
from trainer.loading.gguf import dequantized_dir, existing_dequantized, is_gguf, offline_copy
from trainer.loading.hub import hub_access, is_cached
from trainer.loading.vllm_cpu import config_head_width, head_width_problem

if TYPE_CHECKING:  # for annotations only
    from trainer.config import RunConfig

log = logging.getLogger(__name__)

# vLLM accepts only these LoRA ranks (vllm 0.32 config/lora.py:26, MaxLoRARanks = 1, 8, ... 320, 512); Unsloth rounds
# a rank up to the next one (unsloth_zoo 2026.10.9 vllm_utils.py:2765-2774), so any rank up to 512 works and none above.
VLLM_MAX_LORA_RANK = 512

# Compile and kernel caches, each under the data directory rather than the working directory or /tmp, so they
# survive a container restart (the Docker image sets the same variables under /data). Without them: Unsloth's
# compiled modules go to ./unsloth_compiled_cache (unsloth_zoo 2026.10.9 compiler.py:88-94, falling back to a temp
# dir when that is not writable, :1040-1060), TorchInductor and Triton to /tmp/torchinductor_<user>
# (torch 2.13 _inductor/runtime/cache_dir_utils.py:14-44), vLLM to ~/.cache/vllm (vllm 0.32 envs.py:712-716).
CACHE_VARIABLES = {
    "UNSLOTH_COMPILE_LOCATION": "unsloth-compiled",
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "VLLM_CACHE_ROOT": "vllm",
}


def cache_env(data_dir: Path) -> dict[str, str]:
    """The cache variables pointed under ``data_dir/cache``; set where unset before a worker imports torch."""
    return {name: str(data_dir / "cache" / sub) for name, sub in CACHE_VARIABLES.items()}


class UnsupportedByUnsloth(BackendError):
    """Unsloth refused to load this model (a model type it doesn't support yet). The worker restarts itself on TRL's
    path (trainer.job.worker.restart_without_unsloth): Unsloth has patched TRL on import, so it can't carry on."""


def unsloth_refusal(exc: Exception) -> bool:
    """Whether ``exc`` from Unsloth's loader means "model not supported" (unsloth 2026.10.9 models/loader.py:3258-3261
    NotImplementedError; :1589-1592, 1609-1612, 2572-2575 ValueError "... is not supported yet")."""
    return isinstance(exc, NotImplementedError) or (isinstance(exc, ValueError) and "not supported" in str(exc).lower())


@dataclass(frozen=True)
class Capabilities:
    """What this machine offers: a CUDA GPU (with bf16?), the optional packages, and a GPU that ``nvidia-smi`` sees
    but torch cannot use (``unusable_gpu``, a line of nvidia-smi output)."""

    cuda: bool
    bf16: bool
    unsloth: bool
    vllm: bool
    vllm_bnb: bool = False  # vllm-bnb-plugin: vLLM's bitsandbytes support since vLLM 0.28
    bitsandbytes: bool = False
    unusable_gpu: str | None = None
    torch_cuda: str | None = None  # the CUDA version torch was built for (torch.version.cuda)


@dataclass(frozen=True)
class Backend:
    """The chosen path: ``unsloth``, ``trl_vllm`` or ``plain``, the device, and why."""

    name: str
    device: str
    bf16: bool
    use_vllm: bool
    reason: str
    load_in_4bit: bool = False

    def describe(self) -> str:
        """One line for the run row and log, e.g. "plain transformers + PEFT on cpu (fp32): no GPU"."""
        label = {
            "unsloth": "Unsloth" + (" + vLLM" if self.use_vllm else ""),
            "trl_vllm": "TRL + vLLM colocate, transformers + PEFT",
        }.get(self.name, "plain transformers + PEFT")
        precision = "4-bit" if self.load_in_4bit else "bf16" if self.bf16 else "fp32"
        return f"{label} on {self.device} ({precision}): {self.reason}"


def probe() -> Capabilities:
    """Detect the GPU and the optional packages without importing Unsloth or vLLM (both are slow to import)."""
    import torch

    cuda = torch.cuda.is_available()

    def found(name: str) -> bool:
        return importlib.util.find_spec(name) is not None

    return Capabilities(
        cuda=cuda,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        unsloth=found("unsloth"),
        vllm=found("vllm"),
        vllm_bnb=found("vllm_bnb_plugin"),
        bitsandbytes=found("bitsandbytes"),
        unusable_gpu=None if cuda else nvidia_smi_gpu(),
        torch_cuda=torch.version.cuda,
    )


NVIDIA_SMI_QUERY = ["--query-gpu=name,driver_version", "--format=csv,noheader"]


def nvidia_smi_gpu() -> str | None:
    """The first GPU ``nvidia-smi`` lists ("NVIDIA H200, 570.86.15"), or None when there is no nvidia-smi or it
    lists none (it also fails when the driver is not loaded)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
    return lines[0] if lines else None


def select_backend(config: RunConfig, caps: Capabilities | None = None) -> Backend:
    """Choose the path for ``config`` on a machine with ``caps`` (probed when not given); raises
    :class:`BackendError` for a machine that cannot run the config as asked."""
    caps = caps or probe()
    device = "cuda" if caps.cuda else "cpu"
    wants_gpu = config.backend != "plain" and config.model_name_or_path not in BUILTIN_MODELS
    if wants_gpu and caps.unusable_gpu:
        raise BackendError(
            f"nvidia-smi sees a GPU ({caps.unusable_gpu}) but torch, built for CUDA {caps.torch_cuda or 'none'}, "
            "cannot use it, so this run would train on the CPU. The usual cause is a host driver older than that "
            "CUDA needs (CUDA 13 needs driver 580 or newer; nvidia-smi shows the driver version). Update the driver, "
            "or set backend: plain to train on the CPU on purpose."
        )

    def plain(reason: str) -> Backend:
        four_bit = config.load_in_4bit and caps.cuda and caps.bitsandbytes
        if config.load_in_4bit and caps.cuda and not caps.bitsandbytes:
            reason += "; bitsandbytes not installed, so 16-bit instead of 4-bit"
        return Backend("plain", device, caps.bf16, False, reason, load_in_4bit=four_bit)

    if config.backend == "plain":
        return plain("plain path chosen in the config")
    if not caps.cuda:
        if config.backend == "trl" and config.use_vllm and caps.vllm:
            if problem := cpu_vllm_problem(config):
                raise BackendError(problem)
            return Backend(
                "trl_vllm",
                "cpu",
                False,
                True,
                "no GPU; backend: trl asks TRL's vLLM colocate engine to generate on the CPU",
            )
        return plain("no GPU")
    if config.model_name_or_path in BUILTIN_MODELS:
        return plain("model architecture not supported by Unsloth: the built-in tiny model")
    if caps.unsloth and config.backend != "trl":
        use_vllm = config.use_vllm and caps.vllm
        if use_vllm and config.load_in_4bit and not caps.vllm_bnb:
            # Unsloth would raise this itself, but only after minutes of loading (unsloth_zoo 2026.10.9
            # vllm_utils.py:4526-4531): vLLM >= 0.28 moved bitsandbytes into the vllm-bnb-plugin package.
            raise BackendError(
                "load_in_4bit with vLLM needs the vllm-bnb-plugin package (vLLM 0.28 moved bitsandbytes support "
                "out of vLLM): pip install vllm-bnb-plugin (the gpu extra includes it), or set load_in_4bit: false "
                "or use_vllm: false"
            )
        reason = "GPU with unsloth" + (
            "" if use_vllm or not config.use_vllm else "; vllm not installed, generating with Unsloth"
        )
        return Backend("unsloth", "cuda", caps.bf16, use_vllm, reason, load_in_4bit=config.load_in_4bit)
    why = (
        "TRL path chosen in the config"
        if config.backend == "trl"
        else "unsloth not installed (pip install 'grpo-studio[gpu]')"
    )
    if config.use_vllm and caps.vllm:
        note = "; 16-bit, as TRL's weight sync to vLLM needs" if config.load_in_4bit else ""
        return Backend("trl_vllm", "cuda", caps.bf16, True, f"{why}; TRL + vLLM colocate generates the groups{note}")
    return plain(why + ("; vllm not installed, generating with transformers" if config.use_vllm else ""))


def cpu_vllm_problem(config: RunConfig) -> str | None:
    """Why vLLM can't generate for ``config`` on a CPU, in one sentence, or None: training through a server needs a
    GPU (TRL 1.16 syncs the weights to the server over NCCL only, trl/generation/vllm_client.py:755-760), and vLLM's CPU
    attention runs only some head widths (trainer.loading.vllm_cpu.VLLM_CPU_HEAD_SIZES). A model whose config can't be
    read here yet (a hub id not downloaded, a GGUF file not yet dequantized) passes: its width is checked when it
    loads (trainer.loading.vllm_cpu.prepare_cpu_vllm)."""
    if config.vllm_mode == "server":
        return (
            "vllm_mode: server needs a GPU: TRL sends the trained weights to the vLLM server over NCCL only; on a CPU "
            "use vllm_mode: colocate"
        )
    return head_width_problem(config, head_width(config))


def head_width(config: RunConfig) -> int | None:
    """The width of one attention head of ``config``'s model, read from its config.json without loading it (the
    built-in models' from their spec), or None when that file isn't on this machine yet."""
    import json

    if config.model_name_or_path in BUILTIN_MODELS:
        from trainer.loading.tiny import TinySpec

        return TinySpec.hidden_size // TinySpec.num_heads
    path = existing_model_path(config)
    if path is None:
        return None
    try:
        found = json.loads((Path(path).expanduser() / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return config_head_width(found) if isinstance(found, dict) else None


def model_path(config: RunConfig) -> str:
    """Where to load the model from: a built-in model's directory (shipped or cached), a GGUF file's dequantized
    folder (made on first use, trainer.loading.gguf), a hub model's installed GGUF copy (:func:`offline_source`), or
    the configured id/path."""
    name = config.model_name_or_path
    if is_gguf(name):
        return str(dequantized_dir(name))
    if (copy := offline_source(name)) is not None:
        return str(dequantized_dir(str(copy)))
    return _plain_path(config)


def base_source(config: RunConfig) -> str | None:
    """A line for the run's log when the base is not what ``model_name_or_path`` says at face value: a GGUF file's
    dequantized folder, or a hub model's installed GGUF copy (whose weights differ from the hub's by rounding)."""
    name = config.model_name_or_path
    if is_gguf(name):
        return f"base: {name}, dequantized into {dequantized_dir(name)}"
    if (copy := offline_source(name)) is not None:
        return (
            f"base: {name} is not in the local Hugging Face cache, so its installed GGUF copy {copy} is trained "
            "instead (dequantized: the same architecture and tokenizer, weights rounded by its quantisation)"
        )
    return None


def offline_source(name: str) -> Path | None:
    """The installed GGUF copy (trainer.loading.gguf.OFFLINE_COPIES) a hub model loads from, or None when it loads
    from the hub. Decided from this machine's files alone, never from whether the hub answers now, so the worker,
    Compare, evaluation, export and a fork all load the same base: the copy when the model is not in the local
    Hugging Face cache and the copy is installed."""
    copy = offline_copy(name)
    return copy if copy is not None and not is_cached(name, "model") else None


def existing_model_path(config: RunConfig) -> str | None:
    """:func:`model_path` without its side effects, for checks (the config's review, the form's preview): a GGUF
    model's folder only when it is already dequantized (None otherwise), a hub id as it is (no download)."""
    name = config.model_name_or_path
    if is_gguf(name):
        found = existing_dequantized(name)
        return None if found is None else str(found)
    if (copy := offline_source(name)) is not None:
        found = existing_dequantized(str(copy))
        return None if found is None else str(found)
    return _plain_path(config)


def _plain_path(config: RunConfig) -> str:
    if config.model_name_or_path == BUILTIN_TOOL_MODEL:
        from trainer.loading.tiny_tools import tiny_tools_dir

        return str(tiny_tools_dir())
    if config.model_name_or_path in BUILTIN_MODELS:
        from trainer.loading.tiny import tiny_model_dir

        return str(tiny_model_dir())
    return config.model_name_or_path


# --- loading --------------------------------------------------------------------------------------------------------
def local_rank() -> int:
    """This process's GPU index on its machine: ``LOCAL_RANK`` under accelerate launch or torchrun, else 0."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def device_map(config: RunConfig, backend: Backend) -> dict[str, int] | None:
    """Where this process loads the model: the whole model on its own GPU (``{"": local_rank}``).

    Without it every process of a multi-GPU run loads onto GPU 0, and accelerate refuses a 4-bit model that sits on
    another device than the process trains on (accelerate 1.15 accelerator.py:1841-1870). None on CPU, and under
    DeepSpeed ZeRO-3, which places the weights itself and with which transformers refuses a device_map
    (transformers 5.17 integrations/accelerate.py:133-135).
    """
    if backend.device != "cuda" or config.deepspeed_stage == 3:
        return None
    return {"": local_rank()}


def _use_gpu(index: int) -> None:
    """Make GPU ``index`` this process's current device, so that anything placed on "cuda" lands there too."""
    import torch

    torch.cuda.set_device(index)


def bnb_4bit_config(dtype):
    """QLoRA's 4-bit settings: NF4 with double quantisation. transformers' own defaults are fp4 without double
    quantisation (transformers 5.17 utils/quantization_config.py:449-450)."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=dtype,
    )


def load_tokenizer(path: str):
    """The model's tokenizer, left-padded, with a pad token (the EOS token where the model has none)."""
    from transformers import AutoTokenizer

    with hub_access(path):
        tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_model(config: RunConfig, backend: Backend):
    """Load the model for training: (model, tokenizer). On the Unsloth path the LoRA adapter is already applied."""
    path = model_path(config)
    placement = device_map(config, backend)
    if backend.device == "cuda":
        _use_gpu(local_rank())
    with hub_access(path):
        if backend.name == "unsloth":
            return _load_unsloth(config, path, backend, placement)
        import torch
        from transformers import AutoModelForCausalLM

        if config.model_name_or_path in BUILTIN_MODELS and backend.device == "cpu":
            from trainer.loading.tiny import use_tiny_threads

            use_tiny_threads()  # on a busy CPU, two threads made it 10x slower (see trainer/loading/tiny.py)
        dtype = torch.bfloat16 if backend.bf16 else torch.float32
        kwargs: dict = {"dtype": dtype}
        if backend.load_in_4bit:
            kwargs["quantization_config"] = bnb_4bit_config(dtype)
        if placement is not None:
            kwargs["device_map"] = placement
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
        return model, load_tokenizer(path)


def _load_unsloth(config: RunConfig, path: str, backend: Backend, placement: dict | None):
    from unsloth import FastLanguageModel  # the worker imported unsloth first thing (see trainer.job.worker)

    kwargs = {} if placement is None else {"device_map": placement}
    try:
        model, tokenizer = FastLanguageModel.from_pretrained(
            model_name=path,
            max_seq_length=config.max_seq_length,
            load_in_4bit=backend.load_in_4bit,
            fast_inference=backend.use_vllm,
            max_lora_rank=config.lora_r,
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            **kwargs,
        )
    except (NotImplementedError, ValueError) as exc:
        if unsloth_refusal(exc):
            raise UnsupportedByUnsloth(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}") from exc
        raise
    model = FastLanguageModel.get_peft_model(
        model,
        **lora_kwargs(config),
        use_gradient_checkpointing="unsloth" if config.gradient_checkpointing else False,
        random_state=config.seed,
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer


def lora_kwargs(config: RunConfig) -> dict[str, Any]:
    """The LoRA adapter's settings, in the argument names PEFT's LoraConfig and Unsloth's get_peft_model share."""
    return {
        "r": config.lora_r,
        "lora_alpha": config.lora_alpha,
        "lora_dropout": config.lora_dropout,
        "target_modules": list(config.lora_target_modules),
        "bias": "none",
    }
