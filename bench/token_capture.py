"""What keeping per-token values costs a step (trainer/job/token_capture.py), beside the step it rides on.

    python bench/token_capture.py [--completions 64] [--tokens 48] [--keep 8] [--repeats 50]

The capture does no forward pass of its own: it copies the log-probabilities and entropies TRL's loss computed to the
CPU (``_keep``) and, at the step's log, decodes the batch to match completions to their stored samples and builds the
rows of the ``keep`` chosen ones (``rows``). Both are timed here on the demo's shape (64 completions of up to 48
tokens, the built-in tokenizer), against one forward pass of the built-in model over the same batch (the least a step
does: TRL's step is a generation, a reference pass and a forward and backward pass), measured side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--keep", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=50)
    opts = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer.job.token_capture import TokenCapture
    from trainer.loading.tiny import tiny_model_dir

    path = tiny_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    torch.manual_seed(0)
    ids = torch.randint(5, len(tokenizer), (opts.completions, opts.tokens))
    mask = torch.ones_like(ids)
    logps = -torch.rand(opts.completions, opts.tokens)
    advantages = torch.randn(opts.completions)
    texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
    samples = [
        {"group_index": i // 8, "advantage": float(advantages[i]), "completion": texts[i]}
        for i in range(opts.completions)
    ]

    class Trainer:  # the two methods the capture wraps, and what it reads
        processing_class = tokenizer

        def __init__(self) -> None:
            self.model = model
            self.model.train()

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            return logps, logps.abs(), None

        def _compute_loss(self, model, inputs):
            self._get_per_token_logps_and_entropies(compute_entropy=True)
            return 0.0

    trainer = Trainer()
    capture = TokenCapture(trainer, opts.keep)
    inputs = {"completion_ids": ids, "completion_mask": mask, "advantages": advantages, "ref_per_token_logps": logps}
    capture_ms, forward_ms = [], []
    for _ in range(opts.repeats):
        started = time.perf_counter()
        trainer._compute_loss(model, inputs)
        rows = capture.rows(samples, 1, 1)
        capture_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        with torch.no_grad():
            model(input_ids=ids, attention_mask=mask)
        forward_ms.append((time.perf_counter() - started) * 1000)
    assert len(rows) == opts.keep, len(rows)
    c, f = statistics.median(capture_ms), statistics.median(forward_ms)
    print(f"{opts.completions} completions of {opts.tokens} tokens, {opts.keep} kept, {opts.repeats} repeats (medians)")
    print(f"capture (copy + match + rows): {c:.2f} ms a step; one forward pass of the batch: {f:.2f} ms")
    print(f"ratio capture / forward: {c / f:.3f}")


if __name__ == "__main__":
    main()
