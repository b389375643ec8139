"""Where each step's time goes (issue 57, item 8): a step's wall time cut into the parts a user can act on, each a
metric key of the step, measured by timers around the calls that do the work, never estimated.

The parts and the calls they time (trl 1.16.0 grpo_trainer.py, transformers 5.25 trainer.py):

- ``time/generation``: sampling the completions, TRL's ``_generate`` (:2193), tool calls included (TRL runs them in
  its generation loop), the weight sync below excluded;
- ``time/sync``: copying the policy's weights into vLLM before it samples, ``vllm_generation.sync_weights`` (called
  at :1770 and :2203), on a run where vLLM generates;
- ``time/rewards/<name>``: each reward function's call, named as TRL names it in ``rewards/<name>/mean``: the run's
  config name, a custom ``file.py:function`` by its function's name (trainer.scoring.rewards.get_rewards); a
  sandbox's or a judge's time is included since it runs inside the call;
- ``time/logprobs``: no-grad log-prob passes outside the loss: TRL's old-policy and reference passes
  (``_get_per_token_logps_and_entropies`` called from ``_generate_and_score_completions``, :2646-2728; the reference
  one runs at beta > 0) and grpo-studio's measured KL (trainer.job.measures);
- ``time/backward``: the update: the loss's forward pass (``compute_loss``), its backward pass
  (``accelerator.backward``, trainer.py:2163) and the optimizer step (between the ``on_pre_optimizer_step`` and
  ``on_optimizer_step`` callbacks, trainer.py:1979-1981);
- ``time/eval``: grpo-studio's held-out evaluation at the steps it runs (trainer.evaluation.periodic_eval);
- ``time/writes``: grpo-studio's own work for its views: handing the step's metrics, samples and token rows to the
  database writer, the flush before a checkpoint (trainer.job.callback's ``on_log``), and the token view's capture
  passes (trainer.job.token_capture);
- ``time/checkpoint``: saving a checkpoint (``_save_checkpoint``, trainer.py:2322);
- ``time/other``: the rest: fetching the batch, TRL's batching, advantages and bookkeeping, logging, callbacks.

Why timers of our own: TRL's own timers (``profiling_context``, trl/extras/profiling.py) time the same reward calls
and the same sync, but report only to the trackers of ``report_to`` (W&B, MLflow, trackio), never to its metric buffer
or the database, and the only time TRL logs there is ``step_time``, the whole of ``training_step`` in one figure.

Exclusive time: every instant of a step goes to the innermost part running then, or to ``time/other``, so the parts
sum to the step's wall time by construction. A step runs from the end of the previous one (its ``on_step_end``) to
its own end, so what happens between two steps (the previous step's log and database writes, a checkpoint saved
after it) counts in the next one: the same span as the difference between two steps' stored ``wall_time`` (stamped
when a step's metrics are logged, right after its end). The first step runs from train begin, after the held-out
evaluation of step 0. A part that can run in the run is logged at every step, 0 where it did not run. With
``logging_steps`` N, TRL averages the N steps' values, so each key is a mean step.

On a GPU, work is queued asynchronously: each part's start and end wait for the device (``torch.cuda.synchronize``),
so a backward pass's kernels count in ``time/backward``, not in whatever part next waited for them. A timer costs two
clock reads (plus that wait on a GPU); bench/overhead.py prices them (docs/benchmarks.md). Timers run on the thread
that trains; a call from another thread goes untimed (it overlaps the step instead of taking a share of it).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

PREFIX = "time/"
GENERATION = "time/generation"
SYNC = "time/sync"
LOGPROBS = "time/logprobs"
BACKWARD = "time/backward"
EVAL = "time/eval"
WRITES = "time/writes"
CHECKPOINT = "time/checkpoint"
OTHER = "time/other"
REWARDS = "time/rewards/"


def reward_part(name: str) -> str:
    """The key of reward ``name`` (its name in the run's config)."""
    return REWARDS + name


class StepClock:
    """A step's seconds by part, each instant charged to the innermost part then running (see the module docstring).
    ``sync`` is called before every reading of the clock (a GPU's synchronize; None on a CPU)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter, sync: Callable[[], None] | None = None) -> None:
        self.clock, self.sync = clock, sync
        self.parts: list[str] = []  # declared parts, logged at every step
        self.spent: dict[str, float] = {}
        self.running: list[str] = []  # the parts open now, innermost last
        self.since: float | None = None  # the last reading: the innermost part (or "other") runs from here
        self.started: float | None = None  # the current step's start
        self.thread = threading.get_ident()
        self.timed_calls = 0  # how many parts were entered, and over how many steps: bench/overhead.py's price
        self.laps = 0

    def declare(self, part: str) -> None:
        """``part`` can run in this run: it is logged at every step, 0 where it did not run."""
        if part not in self.parts:
            self.parts.append(part)

    def _now(self) -> float:
        if self.sync is not None:
            self.sync()
        return self.clock()

    def _charge(self, now: float) -> None:
        if self.running and self.since is not None:
            part = self.running[-1]
            self.spent[part] = self.spent.get(part, 0.0) + now - self.since
        self.since = now

    def start(self) -> None:
        """A step starts now (train begin; later steps start at the previous one's end, in :meth:`lap`)."""
        self.started = self.since = self._now()
        self.spent = {}

    def enter(self, part: str) -> None:
        """``part`` starts running, inside whatever part runs now."""
        self._charge(self._now())
        self.running.append(part)
        self.timed_calls += 1

    def leave(self) -> None:
        """The innermost running part ends."""
        self._charge(self._now())
        if self.running:
            self.running.pop()

    def timed(self, part: str, func: Callable, outermost: bool = False) -> Callable:
        """``func`` with its time charged to ``part``; ``outermost``: only where no other part runs (a log-prob pass
        that is part of the loss's forward pass belongs to the update)."""

        @functools.wraps(func)
        def timed_call(*args, **kwargs):
            if self.started is None or threading.get_ident() != self.thread or (outermost and self.running):
                return func(*args, **kwargs)
            self.enter(part)
            try:
                return func(*args, **kwargs)
            finally:
                self.leave()

        return timed_call

    def lap(self) -> dict[str, float]:
        """The step that ends now, by key: every declared part (0 where it did not run), a part that ran undeclared,
        and ``time/other`` for the rest; the next step starts now. Empty before :meth:`start`."""
        if self.started is None:
            return {}
        now = self._now()
        self._charge(now)
        seconds = dict.fromkeys(self.parts, 0.0) | self.spent
        seconds[OTHER] = max(now - self.started - sum(self.spent.values()), 0.0)  # float rounding only
        self.started, self.spent = now, {}
        self.laps += 1
        return seconds


def time_parts(trainer: Any, clock: StepClock) -> None:
    """Put the timers of the module docstring on ``trainer`` (a GRPOTrainer; whatever it lacks goes untimed, as on a
    stand-in trainer in tests). The held-out evaluation and the writes are the worker's: :func:`time_method`."""
    if getattr(trainer, "_generate", None) is not None:
        clock.declare(GENERATION)
        trainer._generate = clock.timed(GENERATION, trainer._generate)
    engine = getattr(trainer, "vllm_generation", None)
    if getattr(trainer, "use_vllm", False) and getattr(engine, "sync_weights", None) is not None:
        clock.declare(SYNC)
        engine.sync_weights = clock.timed(SYNC, engine.sync_weights)
    funcs, names = getattr(trainer, "reward_funcs", None), getattr(trainer, "reward_func_names", None)
    if funcs and names:
        for i, (func, name) in enumerate(zip(funcs, names)):
            # a reward model (an nn.Module) or an async reward TRL runs beside the others goes untimed: grpo-studio
            # builds neither (trainer.scoring.rewards), and a wrapper would hide from TRL which kind it is
            if plain_reward(func):
                clock.declare(reward_part(name))
                funcs[i] = clock.timed(reward_part(name), func)
    if getattr(trainer, "_get_per_token_logps_and_entropies", None) is not None:
        clock.declare(LOGPROBS)
        trainer._get_per_token_logps_and_entropies = clock.timed(
            LOGPROBS, trainer._get_per_token_logps_and_entropies, outermost=True
        )
    if getattr(trainer, "compute_loss", None) is not None:
        clock.declare(BACKWARD)
        trainer.compute_loss = clock.timed(BACKWARD, trainer.compute_loss)
        accelerator = getattr(trainer, "accelerator", None)
        if getattr(accelerator, "backward", None) is not None:
            accelerator.backward = clock.timed(BACKWARD, accelerator.backward)
    if getattr(trainer, "_save_checkpoint", None) is not None:
        clock.declare(CHECKPOINT)
        trainer._save_checkpoint = clock.timed(CHECKPOINT, trainer._save_checkpoint)


def plain_reward(func: Any) -> bool:
    """Whether TRL calls ``func`` as a plain synchronous function (trl 1.16.0 grpo_trainer.py:1605-1640), not as a
    reward model or a coroutine it gathers with the other async rewards."""
    import torch

    try:
        from trl.trainer.utils import is_async_callable
    except ImportError:  # an older TRL: a coroutine function is the only async form it knew
        import inspect

        is_async_callable = inspect.iscoroutinefunction
    return callable(func) and not isinstance(func, torch.nn.Module) and not is_async_callable(func)


def time_method(owner: Any, name: str, part: str, clock: StepClock) -> None:
    """Charge ``owner.name``'s calls to ``part`` (the worker's held-out evaluation and writes); nothing when ``owner``
    is None."""
    if owner is not None:
        clock.declare(part)
        setattr(owner, name, clock.timed(part, getattr(owner, name)))


def device_sync(device: Any) -> Callable[[], None] | None:
    """What makes the clock wait for the device's queued work: ``torch.cuda.synchronize`` on CUDA, else None."""
    if getattr(device, "type", str(device)) != "cuda":
        return None
    import torch

    return torch.cuda.synchronize
