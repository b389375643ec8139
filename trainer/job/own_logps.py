"""Per-token log-probabilities and entropies of sampled completions by grpo-studio's own forward passes, for the
measured KL (trainer.job.measures) and the token view (trainer.job.token_capture).

Why not TRL's ``_get_per_token_logps_and_entropies``: which method computes log-probs, and in which layout, depends on
the model path. Unsloth replaces TRL's with one that left-packs the padding and returns ``logits_to_keep +
max_left_pad`` columns (unsloth 2026.10.9 models/rl_replacements.py:3628-3634, 4168-4173; the packing itself is
unsloth_zoo 2026.10.9 rl_replacements.py:778-784), and entropies None (:4237, returned at :4242); asked with ``compute_efficient=True`` it
returns ``(None, None)`` (:3437-3442), and its ``compute_loss`` (:4764) never calls TRL's ``_compute_loss``. A measure
built on those methods failed on shape, or saw nothing, on the default GPU path. Here the model is called directly, as
every path's trainer calls it: ``model(input_ids=..., attention_mask=...).logits``.

The layout is grpo-studio's own and works on every path: each row's real tokens (prompt mask, then completion mask,
as TRL builds the attention mask) are moved to the front, padding to the back. With padding only after the real
tokens a causal model's values for the real tokens do not depend on how the attention implementation treats padding
(Unsloth left-packs for the same reason: its fast forward has a "left-pad RoPE error", rl_replacements.py:3628-3634, 3687), and the positions are 0..n-1 without
position ids. The values are put back in the completion's own columns, zero where the completion mask is 0.

The temperature is TRL's (logits / temperature, as its fused head and Unsloth's scorer apply it). Unsloth's forward
returns hidden states instead of logits while ``UNSLOTH_RETURN_HIDDEN_STATES`` is "1" (rl_replacements.py:3685,
reset to "0" at :4239): it is "0" for these passes.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

# Rows per forward pass: the logits of a row are (sequence x vocabulary); 4 rows of 456 tokens of a 128k vocabulary
# are under 1 GB in float32.
ROWS_PER_PASS = 4


@dataclass
class RowValues:
    """Per-token values of some completions, in their own columns (``mask`` says which count)."""

    policy: Any  # log-probabilities under the policy (adapter on), float32 [rows, completion length]
    base: Any  # and under the base (adapter off)
    entropies: Any  # the policy's entropies, or None when not asked for
    mask: Any  # completion tokens that count: completion mask (times the tool mask where TRL has one)


@contextlib.contextmanager
def logits_not_hidden_states():
    """Unsloth's forward returns logits, not hidden states, inside this block (see the module docstring)."""
    key = "UNSLOTH_RETURN_HIDDEN_STATES"
    previous = os.environ.get(key)
    if previous is not None:
        os.environ[key] = "0"
    try:
        yield
    finally:
        if previous is not None:
            os.environ[key] = previous


def completion_logps(
    model,
    prompt_ids,
    prompt_mask,
    completion_ids,
    completion_mask,
    temperature=1.0,
    entropy=False,
    autocast=contextlib.nullcontext,
):
    """Each completion token's log-probability under ``model`` (and the entropy of its distribution with
    ``entropy``), shaped like ``completion_ids``; zero where ``completion_mask`` is 0. ``autocast``: the trainer's
    mixed-precision context, as TRL runs its own forward passes in it (``accelerator.autocast()``)."""
    import torch

    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1).long()
    order = torch.argsort(mask, dim=1, descending=True, stable=True)  # real tokens first, in their order
    packed, packed_mask = ids.gather(1, order), mask.gather(1, order)
    # the first completion token of the shortest prompt is the first one scored: logits from the position before
    start = max(int(prompt_mask.sum(dim=1).min()) - 1, 0)
    logps, entropies = [], []
    with torch.no_grad(), logits_not_hidden_states(), autocast():
        for first in range(0, len(ids), ROWS_PER_PASS):
            rows = slice(first, first + ROWS_PER_PASS)
            # no KV cache: nothing is generated here
            logits = model(input_ids=packed[rows], attention_mask=packed_mask[rows], use_cache=False).logits
            logits = logits[:, start:-1].float() / temperature
            log_probs = torch.log_softmax(logits, dim=-1)
            logps.append(log_probs.gather(-1, packed[rows, start + 1 :].unsqueeze(-1)).squeeze(-1))
            if entropy:
                entropies.append(-(log_probs.exp() * log_probs).sum(-1))

    def unpacked(values):
        # the value of packed position t belongs to the token that came from column order[:, t]
        full = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
        full.scatter_(1, order[:, start + 1 :], torch.cat(values))
        return full[:, prompt_ids.size(1) :] * completion_mask

    return unpacked(logps), unpacked(entropies) if entropy else None


def row_values(trainer: Any, output: dict, rows, entropy: bool = False) -> RowValues | None:
    """Policy and base log-probabilities of ``rows`` (indices into ``output``, what TRL's
    ``_generate_and_score_completions`` returned), the base being the model with its LoRA adapter off (peft's
    ``disable_adapter()``, which Unsloth's LoRA kernels honour: unsloth kernels/fast_lora.py:91). None when the model
    has no adapter to switch off. Runs the same passes on every process (collective under DeepSpeed ZeRO-3)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if not hasattr(model, "disable_adapter"):
        return None
    temperature = getattr(trainer, "temperature", None) or getattr(trainer.args, "temperature", 1.0)
    picked = [output[key][rows] for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")]
    mask = picked[3]
    if "tool_mask" in output:
        mask = mask * output["tool_mask"][rows]
    autocast = getattr(trainer.accelerator, "autocast", contextlib.nullcontext)
    policy, entropies = completion_logps(
        trainer.model, *picked, temperature=temperature, entropy=entropy, autocast=autocast
    )
    with model.disable_adapter():
        base, _ = completion_logps(trainer.model, *picked, temperature=temperature, autocast=autocast)
    return RowValues(policy, base, entropies, mask.float())
