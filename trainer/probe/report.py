"""What the probe found, and what it means: from the raw samples and scores (:class:`Measured`) to a
:class:`ProbeReport` with a verdict in plain words and a fix for each risk.

Torch-free: the dashboard reads a report a probe job wrote (JSON) and shows it with :meth:`ProbeReport.to_text`,
which the CLI prints too. The thresholds put numbers on docs/grpo.md § Failure signs to watch, stated once here:
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainer.insight.spread import WASTED_ZERO_STD  # at least this share of groups alike: the run learns ~nothing
from trainer.scoring.rewards import PARTIAL_CREDIT  # rewards that pay for part of the format

RISKY_ZERO_STD = 0.5
RISKY_TRUNCATED = 0.3  # this share of completions cut at max_completion_length: answers never get written


@dataclass
class RewardStats:
    """One reward function over every probed completion. ``histogram`` is (label, count) pairs: each distinct value
    when there are few, else ten equal-width bins."""

    name: str
    weight: float
    mean: float | None
    nonzero_share: float
    nan_count: int = 0
    none_count: int = 0
    error: str | None = None
    histogram: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Risk:
    """A reason the run may waste its time, and what to change. ``fatal``: the run would learn nothing (or fail)."""

    message: str
    fix: str
    fatal: bool = False


@dataclass
class Measured:
    """The probe's raw findings (trainer.probe.sampling): completions in groups of ``group_size``, each reward's
    scores (None where it did not apply; NaN kept), or the error it raised."""

    config: Any  # the RunConfig probed
    prompts: list[str]
    answers: list[str | None]
    completions: list[str]
    scores: dict[str, list[float | None]]
    errors: dict[str, str]
    lengths: list[int]
    truncated: list[bool]
    seconds_per_group: float
    forward_seconds_per_group: float
    device: str
    peak_memory_gb: float | None = None
    adapter_gb: float | None = None


@dataclass
class ProbeReport:
    """The probe's report (see trainer/probe/__init__.py). Times are measured per group and projected per step and
    run; memory is measured on CUDA only."""

    model: str
    prompts: int
    group_size: int
    rewards: list[RewardStats]
    zero_std_share: float
    signal_share: float  # share of prompts whose group has any signal
    step_signal_share: float  # chance that a step's groups include at least one with signal
    mean_length: float
    max_completion_length: int
    truncated_share: float
    seconds_per_group: float
    seconds_per_step: float
    seconds_per_run: float
    device: str
    peak_memory_gb: float | None
    training_memory_gb: float | None
    risks: list[Risk]
    samples: list[dict] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """ "wasted" (the run would learn nothing: the CLI exits 3), "risky" or "ok"."""
        if any(r.fatal for r in self.risks):
            return "wasted"
        return "risky" if self.risks else "ok"

    def to_dict(self) -> dict:
        """A JSON-able mapping (what a probe job hands the dashboard)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ProbeReport:
        """The report :meth:`to_dict` wrote."""
        values = dict(data)
        values["rewards"] = [
            RewardStats(**{**r, "histogram": [tuple(h) for h in r["histogram"]]}) for r in data["rewards"]
        ]
        values["risks"] = [Risk(**r) for r in data["risks"]]
        return cls(**values)

    def sample_rows(self, run_id: int) -> list[dict]:
        """The probed completions as the run's step-0 sample rows (the columns of storage.models.Sample)."""
        return [{"run_id": run_id, "step": 0, **sample} for sample in self.samples]

    def to_text(self, quote: Callable[[str], str] = str) -> str:
        """The report in plain words (Markdown that also reads as plain text): what the CLI prints and the
        dashboard shows. ``quote`` is applied to every value the report did not write itself (the model's name,
        reward names, a reward's error, the risks' sentences): the dashboard passes app.markup.md."""
        head = {
            "ok": "✅ ok: the run has a learning signal",
            "risky": "⚠️ risky: the run may waste part of its time",
            "wasted": "❌ the run would learn nothing",
        }[self.verdict]
        lines = [f"Verdict: {head}", ""]
        lines += [f"- {'✖' if r.fatal else '!'} {quote(r.message)}: {quote(r.fix)}" for r in self.risks]
        lines += [""] if self.risks else []
        lines += [
            f"{self.prompts} prompts × {self.group_size} completions of {quote(self.model)} on {quote(self.device)}",
            f"- groups with identical rewards (std 0, no signal): {self.zero_std_share:.0%}; prompts with signal: "
            f"{self.signal_share:.0%}; steps with at least one such prompt: {self.step_signal_share:.0%}",
            f"- completion length: mean {self.mean_length:.0f} of {self.max_completion_length} tokens; "
            f"cut at the limit: {self.truncated_share:.0%}",
            f"- time: {self.seconds_per_group:.2f} s to generate one group; about {_duration(self.seconds_per_step)} "
            f"per step and {_duration(self.seconds_per_run)} for the run (estimate)",
        ]
        if self.peak_memory_gb is not None:
            lines.append(
                f"- GPU memory: {self.peak_memory_gb:.1f} GB peak while probing; training needs about "
                f"{self.training_memory_gb:.1f} GB plus the backward pass's activations (estimate)"
            )
        lines += ["", "Rewards (mean · share non-zero · distribution):"]
        for r in self.rewards:
            if r.error:
                lines.append(f"- {quote(r.name)}: raised {quote(r.error)}")
                continue
            mean = "n/a" if r.mean is None else f"{r.mean:.3f}"
            bars = "  ".join(f"{label}: {count}" for label, count in r.histogram)
            lines.append(
                f"- {quote(r.name)} (weight {r.weight:g}): mean {mean} · {r.nonzero_share:.0%} non-zero · {bars}"
            )
        return "\n".join(lines)


def build_report(m: Measured) -> ProbeReport:
    """Statistics, projections, risks and the step-0 samples of one probe."""
    config = m.config
    g = config.num_generations
    names = [name.rsplit(":", 1)[-1] for name in config.reward_funcs]  # custom rewards by function name, as TRL
    weights = dict(zip(names, config.weights()))
    totals = [
        sum(weights[n] * v for n, values in m.scores.items() if _finite(v := values[i])) for i in range(len(m.lengths))
    ]
    groups = [totals[i : i + g] for i in range(0, len(totals), g)]
    zero_std = sum(1 for group in groups if _std(group) < 1e-8) / len(groups)
    per_step = max(config.prompts_per_step(), 1)
    groups_per_step = per_step / config.num_processes
    # A training step generates its groups, then runs the policy forward and backward (about three forward passes)
    # and, with beta > 0, the reference model forward once more.
    step = groups_per_step * (m.seconds_per_group + m.forward_seconds_per_group * (3 + (config.beta > 0)))
    # Training adds to what sampling held the adapter's gradients and Adam's two moments, each the size of the fp32
    # adapter weights; the backward pass's activations come on top (the report says so).
    memory = None if m.peak_memory_gb is None else m.peak_memory_gb + 4 * (m.adapter_gb or 0.0)
    stats = [_reward_stats(n, weights[n], m.scores.get(n, []), m.errors.get(n)) for n in names]
    report = ProbeReport(
        model=config.model_name_or_path,
        prompts=len(groups),
        group_size=g,
        rewards=stats,
        zero_std_share=zero_std,
        signal_share=1 - zero_std,
        step_signal_share=1 - zero_std**per_step,
        mean_length=sum(m.lengths) / len(m.lengths),
        max_completion_length=config.max_completion_length,
        truncated_share=sum(m.truncated) / len(m.truncated),
        seconds_per_group=m.seconds_per_group,
        seconds_per_step=step,
        seconds_per_run=step * config.max_steps,
        device=m.device,
        peak_memory_gb=m.peak_memory_gb,
        training_memory_gb=memory,
        risks=[],
        samples=_samples(m, totals, groups, weights),
    )
    report.risks = risks(report, config)
    return report


def risks(report: ProbeReport, config) -> list[Risk]:
    """Every risk the report shows, most serious first, each with its fix."""
    found = []
    for r in report.rewards:
        if r.error:
            found.append(
                Risk(f"reward {r.name} raised {r.error}", "the run would fail at its first step: fix it", True)
            )
    if report.zero_std_share >= RISKY_ZERO_STD:
        found.append(_zero_std_risk(report, config))
    for r in report.rewards:
        n = report.prompts * report.group_size
        if r.nan_count:
            found.append(
                Risk(
                    f"reward {r.name} returned NaN on {r.nan_count} of {n} completions",
                    "TRL leaves NaN out of the sum as if the reward did not apply; return None for 'not applicable' "
                    "and a number otherwise",
                )
            )
        elif not r.error and r.none_count == n:
            found.append(Risk(f"reward {r.name} applied to none of the completions", "check the data set it needs"))
        elif not r.error and r.nonzero_share == 0 and report.zero_std_share < RISKY_ZERO_STD:
            found.append(
                Risk(
                    f"reward {r.name} scored 0 on every completion",
                    "it adds no signal until the model starts earning it; the other rewards carry the run until then",
                )
            )
    if report.truncated_share >= RISKY_TRUNCATED:
        found.append(
            Risk(
                f"{report.truncated_share:.0%} of completions hit the length limit ({report.max_completion_length} "
                "tokens)",
                "raise max_completion_length, or the answers never get written",
            )
        )
    return found


def _zero_std_risk(report: ProbeReport, config) -> Risk:
    fatal = report.zero_std_share >= WASTED_ZERO_STD
    message = f"{report.zero_std_share:.0%} of groups have identical rewards: GRPO learns nothing from them"
    never = [r.name for r in report.rewards if not r.error and r.nonzero_share == 0.0]
    if never and len(never) == len([r for r in report.rewards if not r.error]):
        missing = [name for name in PARTIAL_CREDIT if name not in config.reward_funcs]
        fix = f"the model never earns {', '.join(never)}: " + (
            f"add {' / '.join(missing)} for partial credit, or warm the model up on the format first"
            if missing
            else "warm the model up on the answer format first, or use easier prompts"
        )
    elif all(r.nonzero_share == 1.0 for r in report.rewards if not r.error):
        fix = "every answer already earns the same rewards: use harder prompts or a reward that tells answers apart"
    else:
        fix = "raise temperature or num_generations so a group's answers differ, or add a reward with partial credit"
    return Risk(message, fix, fatal)


def _reward_stats(name: str, weight: float, values: list[float | None], error: str | None) -> RewardStats:
    if error:
        return RewardStats(name, weight, None, 0.0, error=error)
    finite = [v for v in values if _finite(v)]
    nans = sum(1 for v in values if v is not None and not _finite(v))
    return RewardStats(
        name,
        weight,
        sum(finite) / len(finite) if finite else None,
        sum(1 for v in finite if v != 0) / len(values) if values else 0.0,
        nan_count=nans,
        none_count=sum(1 for v in values if v is None),
        histogram=histogram(finite),
    )


def histogram(values: list[float], bins: int = 10) -> list[tuple[str, int]]:
    """(label, count) pairs: each distinct value when there are at most ``bins`` of them, else equal-width bins
    labelled by their lower edge."""
    distinct = sorted(set(values))
    if len(distinct) <= bins:
        return [(f"{v:g}", values.count(v)) for v in distinct]
    low, high = distinct[0], distinct[-1]
    width = (high - low) / bins
    counts = [0] * bins
    for v in values:
        counts[min(int((v - low) / width), bins - 1)] += 1
    return [(f"{low + i * width:.3g}", c) for i, c in enumerate(counts)]


def _samples(m: Measured, totals: list[float], groups: list[list[float]], weights: dict) -> list[dict]:
    """Step-0 sample rows (without run_id): the columns the worker's callback writes, advantages as TRL computes
    them with scale_rewards "group"."""
    g = len(groups[0])
    rows = []
    for i, completion in enumerate(m.completions):
        group = groups[i // g]
        mean, std = sum(group) / len(group), _std(group)
        scores = {n: (v if _finite(v := m.scores[n][i]) else None) for n in weights if n in m.scores}
        rows.append(
            {
                "group_index": i // g,
                "prompt": m.prompts[i // g],
                "completion": completion,
                "rewards": scores,
                "total_reward": totals[i],
                "advantage": (totals[i] - mean) / (std + 1e-4),
                "reference_answer": m.answers[i // g],
            }
        )
    return rows


def _std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
