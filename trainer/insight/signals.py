"""Alerts for the silent failures GRPO users report, read off TRL's own metrics (issue 30), beside the failure signs
of trainer.insight.health; and notes on readings that look wrong but are normal. Pure functions, tested on rows."""

from __future__ import annotations

from trainer.insight.health import WINDOW, Alert, Series, _mean, _values
from trainer.scoring.rewards import PARTIAL_CREDIT

LOGP_DIFFERENCE = "sampling/sampling_logp_difference/mean"


def signal_alerts(series: Series) -> list[Alert]:
    """The silent failures the recent steps show (empty when healthy or too early to tell)."""
    return _vllm_mismatch(series) + _truncated_flat(series)


def signal_notes(series: Series) -> list[Alert]:
    """Readings that look like a failure but are normal for GRPO, explained where users look."""
    loss = _values(series, "loss")[-WINDOW:]
    if len(loss) >= 3 and all(abs(v) < 1e-4 for v in loss):
        return [
            Alert(
                "loss_zero",
                "loss is 0: normal for GRPO",
                "on-policy the advantages of each group sum to zero, so the loss is ~0 while its gradient is not "
                "(trl#3452); progress shows in the reward and KL charts, updates in the gradient norm",
                level="note",
            )
        ]
    return []


def _vllm_mismatch(series: Series) -> list[Alert]:
    """vLLM's log-probs of its samples drifting from the trainer's: vLLM samples from other weights than the trainer
    holds, as after a weight sync that failed (trl#5312). A difference that is large, or climbing past its earlier
    level, fires; a steady small one (bf16 against fp32 kernels, ~0.01-0.05 nats) does not."""
    diff = _values(series, LOGP_DIFFERENCE)
    if len(diff) < 3:
        return []
    now = _mean(diff[-WINDOW:])
    before = _mean(diff[-2 * WINDOW : -WINDOW]) if len(diff) >= 2 * WINDOW else None
    climbing = before is not None and now > 0.1 and now > 3 * max(before, 0.01)
    if now <= 0.5 and not climbing:
        return []
    change = f"{before:.3g} → {now:.3g}" if before is not None else f"{now:.3g}"
    return [
        Alert(
            "vllm_mismatch",
            f"vLLM and the trainer disagree on the sampled tokens (log-prob difference {change} nats)",
            "vLLM is likely sampling from stale weights, e.g. after a weight sync that failed (trl#5312): look for "
            "sync errors in the raw worker output (and the vLLM server's log in server mode), then stop the run and "
            "resume it from its latest checkpoint, which starts vLLM with the trainer's weights",
        )
    ]


def _truncated_flat(series: Series) -> list[Alert]:
    """Nearly every completion cut at the length limit while the rewards are flat: truncated answers all score the
    same (usually 0), so every advantage is 0 and nothing is learned (trl#5697)."""
    clipped = _values(series, "completions/clipped_ratio")[-WINDOW:]
    spread = _values(series, "reward_std")[-WINDOW:]
    if len(clipped) < 3 or len(spread) < 3 or _mean(clipped) < 0.9 or _mean(spread) > 1e-6:
        return []
    return [
        Alert(
            "truncated_flat",
            f"{_mean(clipped):.0%} of completions are cut at max_completion_length and the rewards are flat",
            "truncated answers all score alike, so every advantage is 0 and nothing is learned (trl#5697): raise "
            "max_completion_length, ask for shorter reasoning in the system prompt, or give partial credit "
            f"({', '.join(PARTIAL_CREDIT)})",
        )
    ]
