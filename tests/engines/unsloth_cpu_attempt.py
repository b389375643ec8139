"""Unsloth's CPU mode on the product's own load path, for tests/engines/test_unsloth_cpu.py: run as a script by the Python of
the Unsloth environment (scripts/ci-unsloth-env.sh), never imported by pytest, which runs the newer TRL and
transformers that Unsloth 2026.10.9 refuses (its pins: trl <= 1.15, transformers <= 5.17).

``python tests/engines/unsloth_cpu_attempt.py OUT_JSON`` with ``GRPO_STUDIO_HOME`` set: loads SmolLM2-135M-Instruct (the
installed GGUF copy, dequantized into the data dir) through ``trainer.loading.backend._load_unsloth`` with the
smollm2-135m preset's LoRA settings, trains it through ``trainer.job.worker.build_trainer``, and writes what the test
asserts: which classes loaded it, the dtypes, and how far the adapter and base weights moved.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

# Unsloth before trl, transformers and peft, as the worker does (trainer.job.worker.start_backend).
import unsloth

from trainer.loading.backend import Backend, _load_unsloth, model_path
from trainer.presets import load_preset, resolve_preset

STEPS = 2
LENGTH_REWARD = f"{Path(__file__).resolve().parents[1] / 'fixtures' / 'length_reward.py'}:long_answers"
BACKEND = Backend("unsloth", "cpu", False, False, "test: Unsloth's CPU mode")


def snapshot(model) -> dict[str, torch.Tensor]:
    """A float32 copy of every parameter, by name."""
    return {name: p.detach().float().clone() for name, p in model.named_parameters()}


def moved(before: dict[str, torch.Tensor], model, lora: bool) -> dict[str, float]:
    """The largest absolute change of each LoRA (``lora``) or base parameter since ``before``."""
    return {
        name: (p.detach().float() - before[name]).abs().max().item()
        for name, p in model.named_parameters()
        if ("lora_" in name) == lora
    }


def main(out: Path) -> None:
    from trainer.job.worker import build_trainer

    preset = load_preset(resolve_preset("smollm2-135m"))
    config = dataclasses.replace(
        preset,
        name="unsloth-cpu",
        max_steps=STEPS,
        num_generations=4,  # one prompt's group per step: the least GRPO has advantages for
        per_device_train_batch_size=4,
        max_completion_length=16,  # only time is saved: the test asserts that weights move, not what is written
        few_shot_examples="",  # the prompt's two worked examples double its length and never reach the loader
        # The preset's rewards score a group of four alike more often than not (no tag written: all 0), and then
        # nothing trains; a reward paid per character tells any four completions apart, so every step has a gradient.
        reward_funcs=[*preset.reward_funcs, LENGTH_REWARD],
        reward_weights=[*preset.reward_weights, 1.0],
        save_steps=0,
        eval_steps=0,  # the held-out pass's 100 greedy answers would take minutes
    )
    path = model_path(config)  # the GGUF copy, dequantized into GRPO_STUDIO_HOME/cache/gguf
    started = time.perf_counter()
    model, tokenizer = _load_unsloth(config, path, BACKEND, None)
    loaded_s = time.perf_counter() - started

    loaded = {"model_class": type(model).__name__, "dtype": str(next(model.parameters()).dtype)}
    del model, tokenizer

    # build_trainer loads the model again on the same path (trainer.loading.backend.load_model -> _load_unsloth)
    lines: list[str] = []
    trainer = build_trainer(config, out.parent / "run", [], lines.append, backend=BACKEND)
    model, tokenizer = trainer.model, trainer.processing_class
    before = snapshot(model)
    trainer.train()
    history = [row for row in trainer.state.log_history if "loss" in row]
    lora = moved(before, model, lora=True)
    base = moved(before, model, lora=False)
    import peft
    import transformers
    import trl

    out.write_text(
        json.dumps(
            {
                "versions": {
                    "unsloth": unsloth.__version__,
                    "torch": torch.__version__,
                    "trl": trl.__version__,
                    "transformers": transformers.__version__,
                    "peft": peft.__version__,
                },
                "device_type": unsloth.DEVICE_TYPE,
                "loader": ".".join(
                    (unsloth.FastLanguageModel.__mro__[1].__module__, unsloth.FastLanguageModel.__mro__[1].__qualname__)
                ),
                "loaded": loaded,
                "model_class": type(model).__name__,
                "base_class": type(model.get_base_model()).__name__,
                "dtype": str(next(model.parameters()).dtype),
                "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "total": sum(p.numel() for p in model.parameters()),
                "steps": trainer.state.global_step,
                "history": history,
                # [moved, count] by adapter and matrix: "default" is trained; "ref" is the copy TRL adds as the KL
                # reference when beta > 0 (trl 1.15.0 trainer/grpo_trainer.py), which must stay as it was loaded
                "lora": {
                    adapter: {
                        m: [
                            sum(v > 0 for k, v in lora.items() if f".{m}.{adapter}." in k),
                            sum(f".{m}.{adapter}." in k for k in lora),
                        ]
                        for m in ("lora_A", "lora_B")
                    }
                    for adapter in ("default", "ref")
                },
                "lora_max_change": max(lora.values()),
                "base_max_change": max(base.values()),
                "base_count": len(base),
                "padding_side": tokenizer.padding_side,
                "loaded_s": round(loaded_s, 1),
                "log": lines,
            },
            indent=1,
            default=str,
        )
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
