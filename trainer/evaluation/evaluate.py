"""Held-out scoring: greedy answers of a model on problems it did not train on, scored by the reference rewards."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainer.loading.data import Problem, make_prompt
from trainer.loading.heldout import HeldOut
from trainer.scoring.rewards import correctness_reward, get_rewards, strict_format_reward


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
    on_batch: Callable[[int], None] | None = None,
) -> list[str]:
    """Completions for chat prompts (left-padded batches), greedy unless a ``temperature`` is given, decoded without
    special tokens; ``on_batch(n)`` hears of each batch of ``n`` completions done."""
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
        if on_batch:
            on_batch(len(new))
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


# --- held-out evaluation of a run -----------------------------------------------------------------------------------
class EvaluationError(ValueError):
    """A run that can't be evaluated as asked (no held-out split)."""


def heldout_for(config, k: int) -> HeldOut:
    """The first K problems the run did not train on, with where they came from: the one definition of held-out
    (trainer.loading.heldout.heldout_set), said as an EvaluationError when there are none or the data won't load."""
    from trainer.loading.heldout import NoHeldOut, heldout_set

    try:
        held = heldout_set(config)
    except NoHeldOut as exc:
        raise EvaluationError(str(exc)) from None
    except Exception as exc:
        raise EvaluationError(f"could not load {config.dataset_name}: {exc}") from exc
    return dataclasses.replace(held, problems=held.problems[:k])


def heldout_problems(config, k: int) -> list[Problem]:
    """The first K problems the run did not train on (:func:`heldout_for`)."""
    return heldout_for(config, k).problems


def side_metrics(
    config,
    model,
    tokenizer,
    problems: Sequence[Problem],
    samples: int,
    seed: int,
    on_batch: Callable[[int], None] | None = None,
    per_problem: list[bool] | None = None,
) -> dict:
    """Greedy correctness, pass@1 over ``samples`` sampled answers, strict-format rate, mean completion length in
    tokens, the mean of each of the run's rewards (on the greedy answers) and, for a run with tools, the share of
    greedy answers that call one, for one side. ``on_batch`` hears of
    each batch of answers generated (``len(problems) * (1 + samples)`` in all); ``per_problem``, when given, is
    extended with each problem's greedy correctness (the learning map's held-out rows)."""
    from trainer.evaluation.tool_turns import generate_with_tools, run_tools

    prompts = [make_prompt(p.question, config.system_prompt, config.few_shot_examples) for p in problems]
    answers = [p.answer for p in problems]
    max_new = config.max_completion_length
    tools_for = run_tools(config) if config.uses_tools() else None
    calls = None
    if tools_for is not None:  # answered as TRL's rollouts are, calling the run's tools (trainer.evaluation.tool_turns)
        rows = [{"question": p.question, "answer": p.answer} for p in problems]
        greedy, lengths, calls = generate_with_tools(
            model, tokenizer, prompts, rows, tools_for, max_new, on_batch=on_batch
        )
    else:
        greedy = generate(model, tokenizer, prompts, max_new, on_batch=on_batch)
        lengths = [len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in greedy]
    correct = correctness_reward(prompts, greedy, answer=answers)
    if per_problem is not None:
        per_problem.extend(bool(c) for c in correct)
    formatted = strict_format_reward(prompts, greedy)
    rewards = {}
    for name, reward in zip(config.reward_funcs, get_rewards(config)):
        values = [v for v in reward(prompts=prompts, completions=greedy, answer=answers) if v is not None]
        rewards[name] = sum(values) / len(values) if values else None
    result = {
        "correct": sum(1 for c in correct if c) / len(problems),
        "format": sum(1 for f in formatted if f) / len(problems),
        "mean_length": sum(lengths) / len(lengths),
        "rewards": rewards,
        "pass_at_1": None,
        # the share of greedy answers that call a tool at least once (None for a run without tools)
        "tool_calls": None if calls is None else sum(1 for c in calls if c) / len(problems),
    }
    if samples:
        many = [p for p in prompts for _ in range(samples)]
        if tools_for is None:
            drawn = generate(
                model, tokenizer, many, max_new, temperature=config.temperature, seed=seed, on_batch=on_batch
            )
        else:  # sampled as training's rollouts are, with the calls run (as generate samples: top_p 1, seeded)
            import torch

            torch.manual_seed(seed)
            sampling = {"do_sample": True, "temperature": config.temperature, "top_p": 1.0}
            many_rows = [row for row in rows for _ in range(samples)]
            drawn, _, _ = generate_with_tools(
                model, tokenizer, many, many_rows, tools_for, max_new, on_batch=on_batch, sampling=sampling
            )
        scores = correctness_reward(many, drawn, answer=[a for a in answers for _ in range(samples)])
        result["pass_at_1"] = sum(1 for s in scores if s) / len(scores)
    return result


def evaluate_run(
    run_id: int,
    k: int = 200,
    samples: int = 4,
    adapter: str = "final",
    seed: int = 0,
    progress=None,
    on_answers: Callable[[int, int], None] | None = None,
    store: bool = True,
) -> dict:
    """Score base and tuned on K held-out problems and return the result (stored on the run as a finished
    evaluation with ``store``; an evaluation job stores its own). ``on_answers(done, total)`` hears how many answers
    are generated so far. Raises RunLookupError for a missing run or adapter, EvaluationError when the data has no
    held-out split."""
    import torch

    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.config.names import BUILTIN_MODELS
    from trainer.evaluation.compare import CACHE
    from trainer.evaluation.run_lookup import run_adapter
    from trainer.loading.backend import model_path
    from trainer.loading.tiny import tiny_threads

    config, adapter_dir = run_adapter(run_id, adapter)
    held = heldout_for(config, k)
    problems = held.problems
    total, done = 2 * len(problems) * (1 + samples), 0

    def on_batch(n: int) -> None:
        nonlocal done
        done += n
        if on_answers:
            on_answers(done, total)

    # the built-in model on a CPU runs on the worker's thread setting: two threads spin-wait on a busy machine
    # (trainer/loading/tiny.py), and an eval took 13-14 min that way (issue 24)
    tiny_cpu = config.model_name_or_path in BUILTIN_MODELS and not torch.cuda.is_available()
    with CACHE.lock, tiny_threads(tiny_cpu):
        model, tokenizer = CACHE.get(model_path(config), adapter_dir, progress)
        with model.disable_adapter():
            base = side_metrics(config, model, tokenizer, problems, samples, seed, on_batch)
        tuned = side_metrics(config, model, tokenizer, problems, samples, seed, on_batch)
    results = {"base": base, "tuned": tuned, "problems": len(problems), "split": held.split, "heldout": held.record()}
    if store:
        with get_sessionmaker().begin() as session:
            queries.add_evaluation(session, run_id, adapter, len(problems), samples, results)
    return results
