"""The tokens behind an advantage (issue 31, item 4): each token's log-probability and entropy under the policy that
sampled it, and the base's log-probability (the model with its LoRA adapter off, the reference TRL's KL uses), for a
few sampled completions per generation batch.

The values come from grpo-studio's own forward passes (trainer.job.own_logps) on the chosen completions, right after
TRL's ``_generate_and_score_completions`` returned them, on every model path alike. They used to be taken from TRL's
loss computation (``_compute_loss``), which Unsloth's ``compute_loss`` never calls (unsloth 2026.10.9
models/rl_replacements.py:4764), its log-prob method returning ``(None, None)`` there (:3437-3442): on the default GPU
path no completion had token values. Scoring right after sampling also means the policy is the sampler's whatever
num_iterations is. Two no-grad passes over ``token_samples_per_step`` completions a generation batch, on every process
(collective under DeepSpeed ZeRO-3); only the writing process stores them.

Which completions: :func:`kept_rows` (the best and the worst answer of each group whose answers differ first, group
by group, then groups that scored alike: the pair an advantage is about, by :func:`chosen_indices`), at most
``max_completion_length`` tokens each. The step's stored samples are matched to them by decoded text and advantage, as
the completions table logs them (TRL's log is gathered over processes and its batches are shuffled out of generation
order). If the capture fails it turns itself off and says so in the run's log (storage.queries.measure_off_line),
which the token view shows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
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


def kept_rows(output: dict, group_size: int, limit: int) -> list[int]:
    """Which completions of a generation batch (``output``) get token values: :func:`chosen_indices` on its rows,
    groups being consecutive ``group_size`` rows as TRL samples them."""
    advantages = output["advantages"].reshape(len(output["completion_ids"]), -1)[:, 0].tolist()
    rows = [{"group_index": i // group_size, "advantage": a} for i, a in enumerate(advantages)]
    return chosen_indices(rows, limit)


class TokenCapture:
    """Scores the chosen completions of each generation batch a trainer samples, and keeps their values until the
    next one replaces them; :meth:`rows` hands the step's samples theirs."""

    def __init__(self, trainer: Any, limit: int, note: Callable[[str], None] | None = None) -> None:
        self.trainer, self.limit, self.note = trainer, limit, note
        self.kept: dict[tuple[str, float], list[dict[str, list]]] = {}
        self.off = False
        score = trainer._generate_and_score_completions

        def scored_with_tokens(*args, **kwargs):
            output = score(*args, **kwargs)
            if not self.off and trainer.model.training:
                try:
                    self.kept = self._score(output)
                except Exception as exc:  # noqa: BLE001 - the token view must never end a training run
                    from trainer.job.measures import turned_off

                    self.off, self.kept = True, {}
                    turned_off("token_values", trainer.state.global_step + 1, exc, note)
            return output

        trainer._generate_and_score_completions = scored_with_tokens

    @classmethod
    def install(cls, trainer: Any, limit: int, note: Callable[[str], None] | None = None) -> TokenCapture | None:
        """Capture on ``trainer`` (None when ``limit`` is 0, or, said in the run's log, when this trainer has no
        ``_generate_and_score_completions`` to follow)."""
        if limit <= 0:
            return None
        if not hasattr(trainer, "_generate_and_score_completions"):
            line = "this trainer samples completions elsewhere: no per-token values are kept"
            log.warning(line)
            if note is not None:
                note(line)
            return None
        return cls(trainer, limit, note)

    def _score(self, output: dict) -> dict[tuple[str, float], list[dict[str, list]]]:
        from trainer.job.own_logps import row_values

        chosen = kept_rows(output, self.trainer.args.num_generations, self.limit)
        values = row_values(self.trainer, output, chosen, entropy=True) if chosen else None
        if values is None:
            return {}
        tokenizer = self.tokenizer()
        pad = tokenizer.pad_token_id
        advantages = output["advantages"].reshape(len(output["completion_ids"]), -1)[:, 0]
        kept: dict[tuple[str, float], list[dict[str, list]]] = {}
        for j, i in enumerate(chosen):
            ids, mask = output["completion_ids"][i].cpu(), output["completion_mask"][i].cpu()
            if mask.any():
                length = int(mask.nonzero().max()) + 1
            else:  # a truncated completion TRL masked out whole (mask_truncated_completions): its non-pad tokens
                length = int((ids != pad).sum()) if pad is not None else len(ids)
            text = tokenizer.decode(ids[:length], skip_special_tokens=True).strip()
            entry = {"ids": ids[:length].tolist()}
            for name, tensor in (("logps", values.policy), ("entropies", values.entropies), ("ref", values.base)):
                entry[name] = tensor[j, :length].cpu().tolist()
            kept.setdefault((text, round(float(advantages[i]), 4)), []).append(entry)
        return kept

    def tokenizer(self) -> Any:
        """The trainer's tokenizer (a processor wraps its tokenizer)."""
        tokenizer = self.trainer.processing_class
        return getattr(tokenizer, "tokenizer", tokenizer)

    def rows(self, samples: list[dict], run_id: int, step: int) -> list[dict]:
        """Token rows (storage.learning.token_row) for the chosen ones of ``samples``, the step's sample rows, from
        the latest generation batch's values (the steps that share one generation batch share its values)."""
        if not samples or not self.kept:
            return []
        tokenizer = self.tokenizer()
        left = {key: list(entries) for key, entries in self.kept.items()}
        rows = []
        for i in chosen_indices(samples, self.limit):
            sample = samples[i]
            advantage = sample["advantage"] if sample["advantage"] is not None else 0.0
            matches = left.get((sample["completion"].strip(), round(advantage, 4)))
            if not matches:
                continue
            entry = matches.pop(0)
            tokens = [tokenizer.decode([t]) for t in entry["ids"]]
            rows.append(token_row(run_id, step, i, tokens, entry["logps"], entry["entropies"], entry["ref"]))
        return rows
