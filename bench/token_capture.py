"""What keeping per-token values costs a step (trainer/job/token_capture.py), beside the step it rides on.

    python bench/token_capture.py [--completions 64] [--tokens 48] [--keep 8] [--repeats 20]

Since issue 38 the capture runs forward passes of its own (trainer.job.own_logps), so that it works on every model
path, Unsloth's included: after each generation batch it scores the ``keep`` chosen completions with the adapter on
(log-probs and entropies) and off (the base's log-probs), and at the step's log it matches them to their stored
samples and builds their rows. Both are timed here on the demo's shape (64 completions of up to 48 tokens after a
16-token prompt, the built-in model with a LoRA adapter), against one forward pass of the same model over the whole
batch (the least a step does: TRL's step is a generation, a forward and a backward pass), measured side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--keep", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    opts = parser.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer.job.token_capture import TokenCapture
    from trainer.loading.tiny import tiny_model_dir

    path = tiny_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(path), LoraConfig(r=8, target_modules=["q_proj", "v_proj"])
    )
    model.train()
    torch.manual_seed(0)
    prompt = torch.randint(5, len(tokenizer), (opts.completions, 16))
    ids = torch.randint(5, len(tokenizer), (opts.completions, opts.tokens))
    output = {
        "prompt_ids": prompt,
        "prompt_mask": torch.ones_like(prompt),
        "completion_ids": ids,
        "completion_mask": torch.ones_like(ids),
        "advantages": torch.randn(opts.completions),
    }
    texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
    samples = [
        {"group_index": i // 8, "advantage": float(output["advantages"][i]), "completion": texts[i]}
        for i in range(opts.completions)
    ]
    trainer = SimpleNamespace(  # what the capture reads of a GRPOTrainer
        model=model,
        processing_class=tokenizer,
        args=SimpleNamespace(num_generations=8, temperature=1.0),
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
        state=SimpleNamespace(global_step=0),
        _generate_and_score_completions=lambda: output,
    )
    capture = TokenCapture(trainer, opts.keep)
    full = torch.cat([prompt, ids], dim=1)
    capture_ms, forward_ms = [], []
    for _ in range(opts.repeats):
        started = time.perf_counter()
        trainer._generate_and_score_completions()
        rows = capture.rows(samples, 1, 1)
        capture_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        with torch.no_grad():
            model(input_ids=full, attention_mask=torch.ones_like(full))
        forward_ms.append((time.perf_counter() - started) * 1000)
    assert len(rows) == opts.keep and not capture.off, len(rows)
    c, f = statistics.median(capture_ms), statistics.median(forward_ms)
    print(f"{opts.completions} completions of {opts.tokens} tokens, {opts.keep} kept, {opts.repeats} repeats (medians)")
    print(
        f"capture (two passes over the kept + match + rows): {c:.2f} ms a step; one forward pass of the batch: {f:.2f} ms"
    )
    print(f"ratio capture / forward: {c / f:.3f}")


if __name__ == "__main__":
    main()
