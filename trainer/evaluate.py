"""Held-out scoring: greedy answers of a model on problems it did not train on, scored by the reference rewards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainer.data import Problem, make_prompt
from trainer.rewards import correctness_reward, strict_format_reward


@dataclass(frozen=True)
class HeldOutScore:
    """Greedy correctness and strict-format rate over ``n`` problems; with sampling, pass@1 (the mean correctness
    of ``samples`` sampled answers per problem) as ``sampled_correct``."""

    n: int
    correct: float
    formatted: float
    sampled_correct: float | None = None


def generate(
    model,
    tokenizer,
    prompts: Sequence[list[dict]],
    max_new_tokens: int,
    batch_size: int = 64,
    temperature: float | None = None,
    seed: int = 0,
) -> list[str]:
    """Completions for chat prompts (left-padded batches), greedy unless a ``temperature`` is given, decoded without
    special tokens."""
    import torch

    tokenizer.padding_side = "left"
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    out: list[str] = []
    model.eval()
    sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0} if temperature else {"do_sample": False}
    torch.manual_seed(seed)
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(
            texts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False
        )
        batch = {k: v.to(model.device) for k, v in batch.items()}
        with torch.no_grad():
            ids = model.generate(
                **batch,
                max_new_tokens=max_new_tokens,
                **sampling,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        new = ids[:, batch["input_ids"].shape[1] :]
        out.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    return out


def score_heldout(
    model,
    tokenizer,
    problems: Sequence[Problem],
    system_prompt: str,
    max_new_tokens: int = 64,
    samples: int = 0,
    temperature: float = 1.0,
    seed: int = 0,
) -> HeldOutScore:
    """Greedy correctness and strict-format rate of ``model`` on ``problems``; with ``samples`` > 0 also pass@1 over
    that many sampled answers per problem at ``temperature`` (seeded, so base and tuned see the same randomness)."""
    prompts = [make_prompt(p.question, system_prompt) for p in problems]
    answers = [p.answer for p in problems]
    completions = generate(model, tokenizer, prompts, max_new_tokens)
    correct = correctness_reward(prompts, completions, answer=answers)
    formatted = strict_format_reward(prompts, completions)
    n = len(problems)
    sampled = None
    if samples:
        many = [p for p in prompts for _ in range(samples)]
        drawn = generate(model, tokenizer, many, max_new_tokens, temperature=temperature, seed=seed)
        scores = correctness_reward(many, drawn, answer=[a for a in answers for _ in range(samples)])
        sampled = sum(1 for c in scores if c) / len(scores)
    return HeldOutScore(
        n=n,
        correct=sum(1 for c in correct if c) / n,
        formatted=sum(1 for f in formatted if f) / n,
        sampled_correct=sampled,
    )
