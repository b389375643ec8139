"""Is a checkpoint whole before a resume trusts it? (issue 23, item 3)

A checkpoint with ``trainer_state.json`` was written to the end (:meth:`RunFiles.complete_checkpoints`), but a file
in it can still be damaged afterwards: truncated by a full disk or a copy cut short, overwritten. Resuming from one
failed deep inside transformers with ``SafetensorError: … incomplete metadata`` and a traceback. This reads each file
the way its format allows without loading a tensor, so it needs no torch and costs a read of the checkpoint:

- ``*.safetensors``: the 8-byte header length, the JSON header, and a file exactly as long as the header says;
- ``*.pt``/``*.pth``/``*.bin`` (torch.save's zip format: optimizer, scheduler, RNG states): every member's CRC;
- ``*.json``: parses.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path


def file_problem(path: Path) -> str | None:
    """What is wrong with one checkpoint file, or None when it reads whole."""
    try:
        if path.suffix == ".safetensors":
            return _safetensors_problem(path)
        if path.suffix in (".pt", ".pth", ".bin"):
            if not zipfile.is_zipfile(path):
                return f"{path.name} is cut short or not a torch file"
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
            return f"{path.name} is damaged (member {bad} fails its checksum)" if bad else None
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        return f"{path.name} can't be read ({exc})"
    return None


def _safetensors_problem(path: Path) -> str | None:
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return f"{path.name} is cut short ({size} bytes)"
        (length,) = struct.unpack("<Q", head)
        if 8 + length > size:
            return f"{path.name} is cut short ({size} bytes, its header alone says {8 + length})"
        header = json.loads(f.read(length))
    end = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0)
    if 8 + length + end != size:
        return f"{path.name} is cut short ({size} of {8 + length + end} bytes)"
    return None


def checkpoint_problem(checkpoint: Path) -> str | None:
    """The first thing wrong with a checkpoint directory (a LoRA checkpoint needs its adapter weights), or None."""
    if (checkpoint / "adapter_config.json").is_file() and not any(checkpoint.glob("adapter_model.*")):
        return "its adapter weights are missing"
    for path in sorted(p for p in checkpoint.iterdir() if p.is_file()):
        problem = file_problem(path)
        if problem:
            return problem
    return None
