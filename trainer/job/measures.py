"""What the worker measures beside TRL's own metrics, each one more metric key of the step it belongs to:

- ``kl_measured``: KL(policy ‖ base) at beta 0, where TRL computes no KL at all (its ``kl`` needs the reference
  log-probs it only computes when beta != 0: trl 1.15.0 grpo_trainer.py:2636, 1.16.0 :2709-2739), so the KL chart stayed empty and
  the KL-climb alert could never fire exactly when nothing holds the policy back. Every ``measured_kl_steps`` steps,
  on 16 of that step's sampled completions spread over every group of its batch (:func:`kl_rows`), with TRL's own
  estimator; the base is the model with its LoRA adapter off (peft's ``disable_adapter()``), so it costs two no-grad
  forward passes and no memory. Not in the loss. The passes are grpo-studio's own (trainer.job.own_logps), not the
  trainer's log-prob method, which Unsloth replaces with one of another layout: the same value on every model path.
- ``time/...``: where the step's wall time went, part by part (generation, each reward, log-prob passes, the update,
  held-out evaluation, grpo-studio's writes, a checkpoint, the rest), summing to it: trainer.job.step_times.
- ``throughput/tokens_per_step`` and ``throughput/tokens_per_second``: prompt and completion tokens, from the counter
  TRL logs as ``num_tokens`` (``state.num_input_tokens_seen``, grpo_trainer.py:2292), over the steps' wall time.
- ``memory/peak_gib``: the step's peak GPU memory for training (``torch.cuda.max_memory_allocated``, reset at each
  step's start), on CUDA only, without what a colocated vLLM engine allocated through this process's torch when it
  was built (its weights and KV cache, about ``vllm_gpu_memory_utilization`` of the card whatever the model: it would
  otherwise be most of the figure); that reservation is ``memory/engine_gib``, charted beside it. Counted by wrapping
  ``vllm.LLM``'s constructor (:func:`count_engine_reservation`), which TRL's colocate engine and Unsloth's both call
  (trl 1.15.0 generation/vllm_generation.py, unsloth_zoo 2026.10.9 vllm_utils.py:5320), as scripts/gpu_check.py does.

A measure that fails turns itself off for the rest of the run (a measurement must never end a training run) and says
so, with the reason, in the run's log (storage.queries.measure_off_line), which the KL chart shows.

They go into TRL's metric buffer (``trainer._metrics["train"]``: trl 1.15.0 grpo_trainer.py:1054, 1.16.0 :1080), which
TRL averages and logs with its own keys at each logging step: they reach the database and every tracker of
``report_to`` the same way TRL's metrics do, and a multi-process run logs them once. Everything here runs on every
process of a multi-process run (the forward passes may be collective, under DeepSpeed ZeRO-3), and the measured KL is
averaged over all of them.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainer.job.step_times import BACKWARD, LOGPROBS, StepClock, device_sync, time_parts

log = logging.getLogger(__name__)

KL_KEY = "kl_measured"
# Completions per process a measured KL looks at, spread evenly over the generation batch (kl_rows). A KL per token
# averaged over 16 completions of a few hundred tokens is steady enough for a trend, and measuring all 64 completions
# of the offline demo's step at every step cost 20-40 % of the step (bench/overhead.py --measured-kl 1). The first 16
# were two groups of eight, two prompts: on the demo that sample read 0.004x to 3.8x the whole batch's KL (issue 34).
KL_COMPLETIONS = 16
GIB = 2**30


def per_token_kl(policy_logps, base_logps):
    """TRL's per-token KL estimator, exp(ref - logp) - (ref - logp) - 1: never negative, and unbiased for
    KL(policy ‖ base) on tokens the policy sampled (trl 1.15.0 grpo_trainer.py:3026-3028, 1.16.0 :3100-3102;
    docs/grpo.md § GRPO in five quantities, quantity 5)."""
    import torch

    delta = base_logps - policy_logps
    return torch.exp(delta) - delta - 1


@dataclass
class EngineReservation:
    """Bytes this process's torch allocator handed the vLLM engines built in it (see the module docstring)."""

    torch_bytes: int = 0


ENGINE = EngineReservation()


def count_engine_reservation(reservation: EngineReservation = ENGINE) -> None:
    """Wrap ``vllm.LLM.__init__`` to add what each engine allocates through torch to ``reservation`` (once per
    process; the worker calls it before a colocated engine starts, after Unsloth's import). Without vLLM installed
    there is no engine to count."""
    import importlib.util
    import sys

    if "vllm" not in sys.modules and importlib.util.find_spec("vllm") is None:
        return
    import torch
    import vllm

    original = vllm.LLM.__init__
    if getattr(original, "grpo_studio_counted", False):
        return

    @functools.wraps(original)
    def counting_init(self, *args, **kwargs):
        before = torch.cuda.memory_allocated()
        original(self, *args, **kwargs)
        reservation.torch_bytes += max(torch.cuda.memory_allocated() - before, 0)

    counting_init.grpo_studio_counted = True
    vllm.LLM.__init__ = counting_init


class CudaMemory:
    """Peak GPU memory of the current device, the one boundary :class:`StepMeasures` crosses for it (tests fake it):
    torch's allocator, and what vLLM engines took from it (``reservation``)."""

    def __init__(self, reservation: EngineReservation = ENGINE) -> None:
        self.reservation = reservation

    def reset(self) -> None:
        """Start a new peak."""
        import torch

        torch.cuda.reset_peak_memory_stats()

    def allocated_peak(self) -> int:
        """The peak bytes allocated since the last reset, everything counted."""
        import torch

        return torch.cuda.max_memory_allocated()

    def peak_gib(self) -> float:
        """The training peak since the last reset, in GiB: without the engines' reservation."""
        return max(self.allocated_peak() - self.reservation.torch_bytes, 0) / GIB

    def engine_gib(self) -> float:
        """What the vLLM engines of this process reserved through torch, in GiB (0 without one)."""
        return self.reservation.torch_bytes / GIB


def cuda_memory(device: Any) -> CudaMemory | None:
    """A :class:`CudaMemory` when the model trains on a CUDA device, else None (no memory figure on a CPU)."""
    return CudaMemory() if getattr(device, "type", str(device)) == "cuda" else None


@dataclass
class StepMeasures:
    """The measurements of the current step, and what they are measured from (see the module docstring)."""

    kl_every: int = 0  # 0: no measured KL (beta > 0, where TRL logs its own, or turned off)
    memory: CudaMemory | None = None
    clock: Any = time.perf_counter
    times: StepClock | None = None  # where each step's time goes (trainer.job.step_times); on ``clock`` by default
    last_kl_step: int | None = None
    tokens: int | None = None  # the token counter at the last step that added tokens
    tokens_at: float | None = None  # and when that step ended (train begin before the first)

    def __post_init__(self) -> None:
        if self.times is None:
            self.times = StepClock(self.clock)

    def kl_due(self, step: int) -> bool:
        """Whether the generation batch of the step after ``step`` (steps done) gets a measured KL."""
        return bool(self.kl_every) and (self.last_kl_step is None or step - self.last_kl_step >= self.kl_every)

    def begin_training(self, tokens_seen: int) -> None:
        """Train begin (also after a resume): the token counter's start and the time it is counted from, and the
        first step's clock."""
        self.tokens, self.tokens_at = tokens_seen, self.clock()
        self.times.start()

    def begin_step(self) -> None:
        """A step starts: its memory peak starts from zero (its clock started when the previous step ended)."""
        if self.memory is not None:
            self.memory.reset()

    def end_step(self, tokens_seen: int) -> dict[str, float]:
        """The step's measurements by key (what :class:`MeasureCallback` hands TRL's buffer). Token figures only for
        a step that generated: with steps_per_generation > 1 the steps in between count no new tokens."""
        found = self.times.lap()
        now = self.clock()
        if self.tokens is not None and tokens_seen > self.tokens:
            found["throughput/tokens_per_step"] = float(tokens_seen - self.tokens)
            found["throughput/tokens_per_second"] = (tokens_seen - self.tokens) / max(now - self.tokens_at, 1e-9)
            self.tokens, self.tokens_at = tokens_seen, now
        if self.memory is not None:
            found["memory/peak_gib"] = self.memory.peak_gib()
            if self.memory.engine_gib():
                found["memory/engine_gib"] = self.memory.engine_gib()
        return found


def kl_rows(batch: int, limit: int = KL_COMPLETIONS) -> list[int]:
    """Which rows of a generation batch of ``batch`` completions the measured KL reads: ``limit`` of them at an even
    stride, so every group of the batch is in the sample (groups are consecutive blocks of G rows: at G = 8 and 64
    rows, rows 0, 4, 8, ... take two answers of each of the 8 prompts); all of them in a smaller batch."""
    if batch <= limit:
        return list(range(batch))
    return [i * batch // limit for i in range(limit)]


def measure_kl(trainer: Any, output: dict) -> float | None:
    """KL(policy ‖ base) per completion token of one generation batch (``output``, what
    ``_generate_and_score_completions`` returned), on :func:`kl_rows`, averaged over every process; None when the model
    has no adapter to switch off."""
    import torch

    from trainer.job.own_logps import row_values

    values = row_values(trainer, output, kl_rows(output["completion_ids"].size(0)))
    if values is None:
        return None
    kl = per_token_kl(values.policy, values.base) * values.mask
    totals = torch.stack([kl.sum(), values.mask.sum()])
    kl_sum, tokens = trainer.accelerator.gather(totals.reshape(1, 2)).sum(dim=0).tolist()
    return kl_sum / tokens if tokens else None


def install_measures(trainer: Any, kl_every: int, note: Callable[[str], None] | None = None) -> StepMeasures:
    """Measure ``trainer``'s steps (see the module docstring): time its generation, add a measured KL every
    ``kl_every`` steps (0: none) and register the callback that logs each step's figures. ``note`` gets the line that
    says a measure turned itself off (the run's log). Returns the measures."""
    device = getattr(getattr(trainer, "accelerator", None), "device", None)  # a fake trainer in tests has none
    measures = StepMeasures(kl_every=kl_every, memory=cuda_memory(device))
    measures.times.sync = device_sync(device)
    time_parts(trainer, measures.times)
    if kl_every:
        measures.times.declare(LOGPROBS)
        measured = measures.times.timed(LOGPROBS, measure_kl)
        score = trainer._generate_and_score_completions

        def scored_with_kl(*args, **kwargs):
            output = score(*args, **kwargs)
            step = trainer.state.global_step
            if trainer.model.training and measures.kl_due(step):
                measures.last_kl_step = step
                try:
                    value = measured(trainer, output)
                except Exception as exc:  # noqa: BLE001 - a measurement must never end a training run
                    # said once, in the run's log too (the KL chart shows it), and not tried again
                    turned_off(KL_KEY, step + 1, exc, note)
                    measures.kl_every, value = 0, None
                if value is not None:
                    trainer._metrics["train"][KL_KEY].append(value)
            return output

        trainer._generate_and_score_completions = scored_with_kl
    trainer.add_callback(measure_callback(trainer, measures))
    return measures


def turned_off(measure: str, step: int, exc: BaseException, note: Callable[[str], None] | None) -> None:
    """Say that ``measure`` turned itself off at ``step`` because of ``exc``: the process log, and ``note``."""
    from storage.queries import measure_off_line

    line = measure_off_line(measure, step, f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300])
    log.warning(line)
    if note is not None:
        note(line)


def measure_callback(trainer: Any, measures: StepMeasures) -> Any:
    """The TrainerCallback that starts and ends each step's measurements and puts them in TRL's metric buffer at the
    step's end, which comes before the step's log (transformers 5 trainer.py:1957-1958)."""
    from transformers import TrainerCallback

    class MeasureCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            measures.begin_training(state.num_input_tokens_seen)

        def on_step_begin(self, args, state, control, **kwargs):
            measures.begin_step()

        # the optimizer step is part of the update (trainer.job.step_times)
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            measures.times.enter(BACKWARD)

        def on_optimizer_step(self, args, state, control, **kwargs):
            measures.times.leave()

        def on_step_end(self, args, state, control, **kwargs):
            buffer = trainer._metrics["train"]
            for key, value in measures.end_step(state.num_input_tokens_seen).items():
                buffer[key].append(value)

        def on_train_end(self, args, state, control, **kwargs):
            # read by bench/overhead.py, which prices the timers from it
            times = measures.times
            log.info("step timers: %d timed calls over %d steps", times.timed_calls, times.laps)

    return MeasureCallback()
