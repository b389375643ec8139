"""Exporting what a run learned: the adapter as a zip, the adapter merged into the base as a full model directory
(safetensors + tokenizer, loadable with plain transformers), and a push of either to the Hugging Face Hub."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from trainer.config import RunConfig
from trainer.evaluation.run_lookup import RunLookupError


class ExportError(RunLookupError):
    """An export that can't be done as asked, with what to do about it."""


def zip_adapter(adapter_dir: Path, target: Path) -> Path:
    """Zip an adapter directory to ``target`` (.zip added if missing); returns the zip's path. The dashboard's
    download and ``grpo-studio export --zip`` both make their zip here."""
    base = str(target)[:-4] if str(target).endswith(".zip") else str(target)
    return Path(shutil.make_archive(base, "zip", adapter_dir))


def merge(config: RunConfig, adapter_dir: Path, target: Path) -> Path:
    """Merge the adapter into the base weights and save a full model (safetensors) with its tokenizer."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from trainer.loading.backend import load_tokenizer, model_path

    base_path = model_path(config)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_path), str(adapter_dir))
    merged = model.merge_and_unload()
    target.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(target, safe_serialization=True)
    load_tokenizer(base_path).save_pretrained(target)
    return target


def push(folder: Path, repo_id: str, token: str | None = None, private: bool = True) -> str:
    """Upload a folder (an adapter or a merged model) to a Hub model repo; returns its URL."""
    token = token or os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if not token:
        raise ExportError("pushing to the Hugging Face Hub needs a token: pass --token or set HF_TOKEN")
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise ExportError("the Hugging Face Hub is switched off here (HF_HUB_OFFLINE=1): nothing was pushed")
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo_id, commit_message="grpo-studio export")
    except Exception as exc:  # network down, bad token, no rights: one clear message
        raise ExportError(f"could not push to {repo_id} on the Hugging Face Hub: {type(exc).__name__}: {exc}") from exc
    return f"https://huggingface.co/{repo_id}"
