"""Exporting what a run learned: the adapter as a zip, the adapter merged into the base as a full model directory
(safetensors + tokenizer, loadable with plain transformers), and a push of either to the Hugging Face Hub.

What leaves the machine is made to be read elsewhere (:func:`shareable_adapter`): PEFT records the base model by the
path it was loaded from, which for the built-in model or a cached hub model is a local directory (``/tmp/.../models/
tiny-96-...``) that means nothing on another machine, so the copy names it as the config does (the hub id, or
``builtin:tiny``); and PEFT's blank model card is replaced by one that says what the adapter is.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from trainer.config import RunConfig
from trainer.evaluation.run_lookup import RunLookupError
from trainer.loading.gguf import is_gguf
from trainer.version import version


class ExportError(RunLookupError):
    """An export that can't be done as asked, with what to do about it."""


def shareable_adapter(run_id: int, config: RunConfig, adapter_dir: Path, target: Path) -> Path:
    """A copy of ``adapter_dir`` in ``target`` (made fresh) that names its base model portably and carries a model card
    (:func:`model_card`); returns ``target``."""
    shutil.copytree(adapter_dir, target, dirs_exist_ok=True)
    settings = target / "adapter_config.json"
    if settings.is_file():
        data = json.loads(settings.read_text())
        data["base_model_name_or_path"] = config.model_name_or_path
        settings.write_text(json.dumps(data, indent=2) + "\n")
    (target / "README.md").write_text(model_card(run_id, config))
    return target


def model_card(run_id: int, config: RunConfig) -> str:
    """What an exported adapter is, in the Hub's model-card format: the base model, the data set, the rewards and
    their weights, the GRPO settings that shape it, held-out correctness before → after when it was measured, and
    the grpo-studio version that made it."""
    from storage import queries
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, run_id)
        name = run.name if run else config.name
        evaluation = queries.latest_evaluation(session, run_id, finished=True)
        results = evaluation.results if evaluation else None
        curve = queries.metric_series(session, run_id, "heldout/correct")
    if results and results.get("base", {}).get("correct") is not None:
        base, tuned = results["base"]["correct"], results["tuned"]["correct"]
        heldout = (
            f"{base:.1%} → {tuned:.1%} greedy correctness on {results['problems']} held-out problems (base → tuned)"
        )
    elif len(curve) > 1:
        heldout = (
            f"{curve[0].value:.1%} → {curve[-1].value:.1%} greedy correctness (step {curve[0].step} → {curve[-1].step})"
        )
    else:
        heldout = "not measured"
    weights = config.weights()
    rewards = ", ".join(f"{r} × {w:g}" for r, w in zip(config.reward_funcs, weights))
    hub = "builtin:" not in config.model_name_or_path and not config.model_name_or_path.startswith(("/", "~", "."))
    front = ["---", "library_name: peft", "tags: [grpo, lora, grpo-studio]"]
    if hub:
        front.append(f"base_model: {config.model_name_or_path}")
    return "\n".join(
        [
            *front,
            "---",
            "",
            f"# {name}",
            "",
            f"A LoRA adapter trained with GRPO by grpo-studio {version()} (run {run_id}).",
            "",
            f"- base model: `{config.model_name_or_path}`",
            f"- data set: `{config.dataset_name}` (split `{config.dataset_split}`)",
            f"- rewards (summed, with weights): {rewards}",
            f"- GRPO: {config.num_generations} completions per prompt, KL weight β {config.beta:g}, learning rate "
            f"{config.learning_rate:g}, {config.max_steps} steps, completions up to {config.max_completion_length} tokens",
            f"- LoRA: r {config.lora_r}, alpha {config.lora_alpha}, on {', '.join(config.lora_target_modules)}",
            f"- held-out: {heldout}",
            "",
            "Load it with PEFT on top of its base model:",
            "",
            "```python",
            "from peft import PeftModel",
            "from transformers import AutoModelForCausalLM",
            "",
            base_load_line(config.model_name_or_path, hub),
            'model = PeftModel.from_pretrained(base, "PATH/TO/THIS/FOLDER")',
            "```",
            "",
        ]
    )


def base_load_line(model: str, hub: bool) -> str:
    """The model card's line that loads the base: the hub id, a GGUF file through transformers' ``gguf_file`` (it
    dequantizes the file as the run did), or a placeholder for a local folder."""
    if is_gguf(model):
        name = Path(model).name
        return (
            f'base = AutoModelForCausalLM.from_pretrained("PATH/TO/THE/FOLDER/OF/{name}", gguf_file="{name}")'
            "  # pip install gguf"
        )
    return f'base = AutoModelForCausalLM.from_pretrained("{model if hub else "PATH/TO/BASE"}")'


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
