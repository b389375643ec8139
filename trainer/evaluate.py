"""Held-out scoring: greedy answers of a model on problems it did not train on, scored by the reference rewards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainer.data import Problem, make_prompt
from trainer.rewards import correctness_reward, strict_format_reward


@dataclass(frozen=True)
class HeldOutScore:
    """Share of problems answered correctly and in the strict format, over ``n`` problems."""

    n: int
    correct: float
    formatted: float


def generate_greedy(model, tokenizer, prompts: Sequence[list[dict]], max_new_tokens: int, batch_size: int = 64) -> list[str]:
    """Greedy completions for chat prompts (left-padded batches), decoded without special tokens."""
    import torch

    tokenizer.padding_side = "left"
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    out: list[str] = []
    model.eval()
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
        batch = {k: v.to(model.device) for k, v in batch.items()}
        with torch.no_grad():
            ids = model.generate(
                **batch,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        new = ids[:, batch["input_ids"].shape[1] :]
        out.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    return out


def score_heldout(model, tokenizer, problems: Sequence[Problem], system_prompt: str, max_new_tokens: int = 64) -> HeldOutScore:
    """Greedy correctness and strict-format rate of ``model`` on ``problems``."""
    prompts = [make_prompt(p.question, system_prompt) for p in problems]
    completions = generate_greedy(model, tokenizer, prompts, max_new_tokens)
    correct = correctness_reward(prompts, completions, answer=[p.answer for p in problems])
    formatted = strict_format_reward(prompts, completions)
    n = len(problems)
    return HeldOutScore(n=n, correct=sum(1 for c in correct if c) / n, formatted=sum(1 for f in formatted if f) / n)
