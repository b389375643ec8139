"""The probe's model work: sample a few prompts × G completions from the base model with the run's own generation
settings, score them with the run's own rewards, and time and measure it all (trainer.probe.report reads the result).

The base model loads on the plain transformers path (4-bit on a GPU when the run asks for it), whatever path the run
itself will take: a probe should cost a minute, not vLLM's start-up. Times are therefore those of transformers'
generate; a run on the vLLM path generates faster than projected. Prompts are picked at random with the run's seed,
each group seeded on its own, so a probe is repeatable.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time

from trainer.config import RunConfig
from trainer.job.callback import message_text
from trainer.probe.report import Measured, ProbeReport, build_report

DEFAULT_PROMPTS = 8


def run_probe(config: RunConfig, prompts: int = DEFAULT_PROMPTS, log=None) -> ProbeReport:
    """Probe ``config`` on ``prompts`` prompts of its training data; ``log`` (a callable) hears about progress."""
    import torch

    from trainer.evaluation.compare import generate_group
    from trainer.evaluation.sampling import SamplingSettings
    from trainer.loading.backend import load_model, select_backend
    from trainer.loading.data import build_dataset
    from trainer.supervise.gpu_lease import lease_for

    log = log or (lambda message: None)
    plain = dataclasses.replace(config, backend="plain")
    backend = select_backend(plain)
    dataset = build_dataset(config)
    picks = random.Random(config.seed).sample(range(len(dataset)), min(prompts, len(dataset)))
    # the GPU's lease (trainer.supervise.gpu_lease) while the model is loaded; none on a CPU
    with lease_for(backend.device, f"the probe of {config.name}", log):
        log(f"loading {config.model_name_or_path} ({backend.describe()})")
        model, tokenizer = load_model(plain, backend)
        model.eval()
        cuda = backend.device == "cuda"
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        stop_ids = _stop_ids(model, tokenizer)
        rows, generated, gen_seconds, forward_seconds = [], [], [], []
        for k, index in enumerate(picks):
            row = dataset[index]
            started = time.perf_counter()
            settings = SamplingSettings.of_run(config, seed=config.seed + k)
            ids, prompt_length = generate_group(model, tokenizer, row["prompt"], config.num_generations, settings)
            gen_seconds.append(_since(started, cuda))
            started = time.perf_counter()
            with torch.no_grad():
                model(ids)  # the scoring pass training runs over prompt + completion (timed for the projection)
            forward_seconds.append(_since(started, cuda))
            rows.append(row)
            generated.extend(_trim(seq, stop_ids) for seq in ids[:, prompt_length:].tolist())
            log(f"group {k + 1} of {len(picks)}: {gen_seconds[-1]:.2f} s")
        texts = tokenizer.batch_decode([seq for seq, _ in generated], skip_special_tokens=True)
        scores, errors = score(config, rows, texts, [seq for seq, _ in generated])
        adapter_params = _lora_parameters(model, config)
        return build_report(
            Measured(
                config=config,
                prompts=[message_text(row["prompt"], last_user=True) for row in rows],
                answers=[None if row.get("answer") is None else str(row["answer"]) for row in rows],
                completions=texts,
                scores=scores,
                errors=errors,
                lengths=[len(seq) for seq, _ in generated],
                truncated=[not finished for _, finished in generated],
                # the first group also pays for warming up; later ones are what a long run sees
                seconds_per_group=_typical(gen_seconds),
                forward_seconds_per_group=_typical(forward_seconds),
                device=backend.device,
                peak_memory_gb=torch.cuda.max_memory_allocated() / 1e9 if cuda else None,
                adapter_gb=adapter_params * 4 / 1e9,  # fp32 LoRA weights
            )
        )


def score(
    config: RunConfig, rows: list[dict], texts: list[str], completion_ids: list[list[int]]
) -> tuple[dict[str, list[float | None]], dict[str, str]]:
    """Each reward's scores for the completions (groups of G, one per row), called as TRL calls it: conversational
    completions, the data set's other columns repeated per completion, and the completion token ids. A reward that
    raises is reported by name, not raised: the report says the run would fail."""
    from trainer.scoring.rewards import get_rewards

    g = config.num_generations
    columns = {key: [row[key] for row in rows for _ in range(g)] for key in rows[0] if key != "prompt"}
    prompts = [row["prompt"] for row in rows for _ in range(g)]
    completions = [[{"role": "assistant", "content": text}] for text in texts]
    scores, errors = {}, {}
    for reward in get_rewards(config):
        name = reward.__name__
        try:
            values = reward(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns)
            scores[name] = [None if v is None else float(v) for v in values]
            if len(scores[name]) != len(texts):
                raise ValueError(f"returned {len(scores[name])} scores for {len(texts)} completions")
        except Exception as exc:  # noqa: BLE001 - any failure of user code is what the report is for
            scores.pop(name, None)
            errors[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return scores, errors


def _stop_ids(model, tokenizer) -> set[int]:
    eos = model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    return ids | ({tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set())


def _trim(seq: list[int], stop_ids: set[int]) -> tuple[list[int], bool]:
    """A completion's tokens up to and including its end-of-sequence token, and whether it had one (else it was cut
    at max_completion_length)."""
    for i, token in enumerate(seq):
        if token in stop_ids:
            return seq[: i + 1], True
    return seq, False


def _lora_parameters(model, config: RunConfig) -> int:
    """How many parameters the run's LoRA adapter will have: r × (in + out) per targeted linear layer."""
    targets = set(config.lora_target_modules)
    return sum(
        config.lora_r * (module.in_features + module.out_features)
        for name, module in model.named_modules()
        if name.rsplit(".", 1)[-1] in targets and hasattr(module, "in_features")
    )


def _since(started: float, cuda: bool) -> float:
    if cuda:
        import torch

        torch.cuda.synchronize()
    return time.perf_counter() - started


def _typical(seconds: list[float]) -> float:
    later = seconds[1:] or seconds
    return sorted(later)[len(later) // 2] if later else math.nan
