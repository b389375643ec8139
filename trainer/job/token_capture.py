"""The tokens behind an advantage (issue 31, item 4): each token's log-probability and entropy under the policy, and
the reference's log-probability, for a few sampled completions per step, taken from what GRPOTrainer computes
anyway: no extra forward pass.

TRL's loss computes both for every completion token of the batch: ``_compute_loss`` calls
``_get_per_token_logps_and_entropies(..., compute_entropy=True)`` (trl 1.16 grpo_trainer.py:3020-3045), and the
reference's log-probabilities arrive in the batch as ``ref_per_token_logps`` when beta > 0 (grpo_trainer.py:2737-2765,
read at :3099). :class:`TokenCapture` wraps those two methods on the trainer instance, keeps a CPU copy of the
values of each training batch, and hands the callback the rows of the chosen completions at the step's log. With one
optimisation pass per generation batch (num_iterations 1, the default) the policy that scores them is the one that
sampled them.

The batches TRL trains on are shuffled out of generation order (``shuffle_sequence_dict``, grpo_trainer.py:1543), so a
completion is matched to its stored sample by its decoded text and advantage, as the completions table logs them.

Bounded per step: ``RunConfig.token_samples_per_step`` completions (the best and the worst answer of each group whose
answers differ first, group by group: the pair an advantage is about), at most ``max_completion_length`` tokens each.
"""

from __future__ import annotations

import logging
from typing import Any

from storage.learning import token_row

log = logging.getLogger(__name__)


def chosen_indices(rows: list[dict], limit: int) -> list[int]:
    """Which of a step's sample rows get token values, ``limit`` in all: the best and the worst answer of each group
    whose advantages differ, interleaved group by group (best, worst, next group's best, worst...), then one answer
    of each group that scored alike (advantage 0 throughout: nothing won or lost there), then the rest in order.
    Taking every group's best first filled the quota with winners: on the demo (8 groups a step, 8 kept) none of 800
    stored views had a negative advantage (issue 34)."""
    groups: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(row["group_index"], []).append(i)

    def advantage(i: int) -> float:
        value = rows[i]["advantage"]
        return value if value is not None else 0.0

    def mixed(members: list[int]) -> bool:
        return max(map(advantage, members)) - min(map(advantage, members)) > 1e-9

    order: list[int] = []
    for members in (m for m in groups.values() if mixed(m)):
        order += [max(members, key=advantage), min(members, key=advantage)]
    order += [members[0] for members in groups.values() if not mixed(members)]
    order += range(len(rows))
    chosen: list[int] = []
    for i in order:
        if len(chosen) == limit:
            break
        if i not in chosen:
            chosen.append(i)
    return sorted(chosen)


class TokenCapture:
    """Keeps the per-token values of the batches a trainer computes its loss on, until :meth:`rows` takes them."""

    def __init__(self, trainer: Any, limit: int) -> None:
        self.trainer, self.limit = trainer, limit
        self.batches: list[dict[str, Any]] = []
        self._last: Any = None
        logps, loss = trainer._get_per_token_logps_and_entropies, trainer._compute_loss

        def capturing_logps(*args, **kwargs):
            out = logps(*args, **kwargs)
            if kwargs.get("compute_entropy"):
                self._last = out
            return out

        def capturing_loss(model, inputs, *args, **kwargs):
            self._last = None
            result = loss(model, inputs, *args, **kwargs)
            if self._last is not None and trainer.model.training:
                self._keep(inputs, self._last)
            return result

        trainer._get_per_token_logps_and_entropies = capturing_logps
        trainer._compute_loss = capturing_loss

    @classmethod
    def install(cls, trainer: Any, limit: int) -> TokenCapture | None:
        """Capture on ``trainer`` (None when ``limit`` is 0 or this TRL lacks the methods it wraps)."""
        if limit <= 0:
            return None
        if not all(hasattr(trainer, name) for name in ("_get_per_token_logps_and_entropies", "_compute_loss")):
            log.warning("this TRL computes its loss elsewhere: no per-token values are kept")
            return None
        return cls(trainer, limit)

    def _keep(self, inputs: dict, out: Any) -> None:
        logps, entropies = out[0], out[1] if len(out) > 1 else None
        ref = inputs.get("ref_per_token_logps")
        self.batches.append(
            {
                "ids": inputs["completion_ids"].detach().cpu(),
                "mask": inputs["completion_mask"].detach().cpu(),
                "logps": logps.detach().float().cpu(),
                "entropies": None if entropies is None else entropies.detach().float().cpu(),
                "ref": None if ref is None else ref.detach().float().cpu(),
                "advantages": inputs["advantages"].detach().float().cpu().reshape(len(logps), -1)[:, 0],
            }
        )

    def rows(self, samples: list[dict], run_id: int, step: int) -> list[dict]:
        """Token rows (storage.learning.token_row) for the chosen ones of ``samples``, the step's sample rows; forgets
        the batches kept so far."""
        batches, self.batches = self.batches, []
        if not samples or not batches:
            return []
        tokenizer = self.trainer.processing_class
        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor wraps its tokenizer
        pad = tokenizer.pad_token_id
        found: dict[tuple[str, float], list[tuple[dict, int, int]]] = {}
        for batch in batches:
            for j in range(len(batch["ids"])):
                ids, mask = batch["ids"][j], batch["mask"][j]
                if mask.any():
                    length = int(mask.nonzero().max()) + 1
                else:  # a truncated completion TRL masked out whole (mask_truncated_completions): its non-pad tokens
                    length = int((ids != pad).sum()) if pad is not None else len(ids)
                text = tokenizer.decode(ids[:length], skip_special_tokens=True).strip()
                key = (text, round(float(batch["advantages"][j]), 4))
                found.setdefault(key, []).append((batch, j, length))
        rows = []
        for i in chosen_indices(samples, self.limit):
            sample = samples[i]
            advantage = sample["advantage"] if sample["advantage"] is not None else 0.0
            matches = found.get((sample["completion"].strip(), round(advantage, 4)))
            if not matches:
                continue
            batch, j, length = matches.pop(0)
            ids = batch["ids"][j][:length].tolist()
            logps, entropies, ref = (
                None if batch[name] is None else batch[name][j][:length].tolist()
                for name in ("logps", "entropies", "ref")
            )
            tokens = [tokenizer.decode([t]) for t in ids]
            rows.append(token_row(run_id, step, i, tokens, logps, entropies, ref))
        return rows
