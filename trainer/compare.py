"""Side by side: the base model and base + a run's LoRA adapter, sampled on the same prompts with the same seeds.

One copy of the base weights: the adapter is attached to the base with PEFT and switched off for the base side
(``disable_adapter``), never a second model. The loaded model stays cached between requests (switching checkpoints
of the same run loads only the adapter) and is released when another base model is picked. torch is imported here,
on first use, never by the dashboard at start-up.
"""

from __future__ import annotations

import gc
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from trainer.config import RunConfig

log = logging.getLogger(__name__)


@dataclass
class Side:
    """One column of the comparison: the completions and their scores."""

    completions: list[str]
    rewards: list[dict[str, float | None]]
    totals: list[float]
    mean_reward: float
    formatted: int
    correct: int


@dataclass
class Comparison:
    """Base and tuned side by side for one prompt."""

    base: Side
    tuned: Side
    reference: str | None = None
    notes: list[str] = field(default_factory=list)


class RunLookupError(ValueError):
    """A run, or a saved adapter of it, that isn't there."""


def run_adapter(run_id: int, adapter: str = "final") -> tuple[RunConfig, Path]:
    """A run's config and the directory of one of its saved adapters ("final" or "step N")."""
    from storage import queries
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, run_id)
        if run is None:
            raise RunLookupError(f"no run with id {run_id}")
        config, _ = RunConfig.from_dict(run.config)
        adapters = adapter_dirs(run.output_dir or "")
    if adapter not in adapters:
        raise RunLookupError(f"run {run_id} has no adapter {adapter!r} (saved: {', '.join(adapters) or 'none yet'})")
    return config, adapters[adapter]


def adapter_dirs(output_dir: str | Path) -> dict[str, Path]:
    """The adapters a run has saved: "final" (the adapter/ directory) and "step N" for each checkpoint."""
    root = Path(output_dir)
    found = {}
    if (root / "adapter" / "adapter_config.json").is_file():
        found["final"] = root / "adapter"
    checkpoints = sorted(
        (p for p in (root / "checkpoints").glob("checkpoint-*") if (p / "adapter_config.json").is_file()),
        key=lambda p: int(p.name.split("-")[-1]),
    )
    for p in checkpoints:
        found[f"step {p.name.split('-')[-1]}"] = p
    return found


class ModelCache:
    """Holds at most one base model with the adapters loaded onto it. Thread-safe: Gradio may call concurrently."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.base_path: str | None = None
        self.model = None  # a PeftModel once an adapter is attached
        self.tokenizer = None
        self.adapters: dict[str, str] = {}  # adapter name -> its directory

    def get(self, base_path: str, adapter_dir: Path, progress=None):
        """The PEFT model with ``adapter_dir`` active, loading the base and/or the adapter as needed."""
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        from trainer.backend import load_tokenizer

        if self.base_path != base_path:
            self.release()
            if progress:
                progress(0.1, desc=f"loading {base_path}")
            dtype = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32
            base = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype)
            if torch.cuda.is_available():
                base = base.to("cuda")
            self.tokenizer = load_tokenizer(base_path)
            self.base_path = base_path
            self.model = base
        name = "a" + str(abs(hash(str(adapter_dir))))
        if name not in self.adapters:
            if progress:
                progress(0.6, desc=f"loading adapter {adapter_dir.name}")
            if not self.adapters:
                self.model = PeftModel.from_pretrained(self.model, str(adapter_dir), adapter_name=name)
            else:
                self.model.load_adapter(str(adapter_dir), adapter_name=name)
            self.adapters[name] = str(adapter_dir)
        self.model.set_adapter(name)
        self.model.eval()
        return self.model, self.tokenizer

    def release(self) -> None:
        """Drop the cached model and free its memory."""
        self.model = self.tokenizer = self.base_path = None
        self.adapters = {}
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover
            pass


CACHE = ModelCache()


def base_weight_bytes(model) -> int:
    """Bytes held by non-LoRA parameters, counting shared storage once (one copy of the base means this equals the
    base model's own size)."""
    seen, total = set(), 0
    for name, p in model.named_parameters():
        if "lora_" in name:
            continue
        ptr = p.untyped_storage().data_ptr()
        if ptr not in seen:
            seen.add(ptr)
            total += p.untyped_storage().nbytes()
    return total


def sample(
    model,
    tokenizer,
    messages: list[dict],
    n: int,
    *,
    adapter: bool,
    greedy: bool,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int,
) -> list[str]:
    """``n`` completions for one chat prompt with the adapter on or off; completion i uses seed ``seed + i`` on
    both sides, so base and tuned see the same randomness."""
    import contextlib

    import torch

    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    batch = tokenizer([text], return_tensors="pt", add_special_tokens=False).to(model.device)
    context = contextlib.nullcontext() if adapter else model.disable_adapter()
    out = []
    with context, torch.no_grad():
        for i in range(n):
            torch.manual_seed(seed + i)
            kwargs = {"do_sample": False} if greedy else {"do_sample": True, "temperature": temperature, "top_p": top_p}
            ids = model.generate(
                **batch,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                **kwargs,
            )
            out.append(tokenizer.decode(ids[0, batch["input_ids"].shape[1] :], skip_special_tokens=True))
    return out


def score(
    config: RunConfig,
    messages: list[dict],
    completions: list[str],
    reference: str | None,
    tests: list[str] | None = None,
) -> Side:
    """Score completions with the run's reward functions and weights."""
    from trainer.rewards import resolve_reward

    n = len(completions)
    columns = {"answer": [reference] * n}
    if tests:
        columns["tests"] = [tests] * n
    per_reward = {
        name: resolve_reward(name)(prompts=[messages] * n, completions=completions, **columns)
        for name in config.reward_funcs
    }
    weights = dict(zip(config.reward_funcs, config.weights()))
    rewards = [{name: per_reward[name][i] for name in config.reward_funcs} for i in range(n)]
    totals = [sum(weights[k] * v for k, v in r.items() if v is not None) for r in rewards]
    strict = resolve_reward("strict_format")(prompts=None, completions=completions)
    correct = resolve_reward("correctness")(prompts=None, completions=completions, answer=[reference] * n)
    return Side(
        completions=completions,
        rewards=rewards,
        totals=totals,
        mean_reward=sum(totals) / n if n else 0.0,
        formatted=sum(1 for s in strict if s),
        correct=sum(1 for c in correct if c),
    )


def compare(
    config: RunConfig,
    adapter_dir: Path,
    messages: list[dict],
    reference: str | None,
    *,
    n: int = 4,
    greedy: bool = False,
    temperature: float | None = None,
    top_p: float | None = None,
    max_new_tokens: int | None = None,
    seed: int = 0,
    progress=None,
    cache: ModelCache = CACHE,
) -> Comparison:
    """Sample ``n`` completions from base and tuned with the run's sampling settings and score both sides."""
    from trainer.backend import model_path

    with cache.lock:
        model, tokenizer = cache.get(model_path(config), adapter_dir, progress)
        settings = dict(
            greedy=greedy,
            temperature=temperature or config.temperature,
            top_p=top_p or config.top_p,
            max_new_tokens=max_new_tokens or config.max_completion_length,
            seed=seed,
        )
        if progress:
            progress(0.8, desc="sampling")
        base = sample(model, tokenizer, messages, n, adapter=False, **settings)
        tuned = sample(model, tokenizer, messages, n, adapter=True, **settings)
    return Comparison(score(config, messages, base, reference), score(config, messages, tuned, reference), reference)
