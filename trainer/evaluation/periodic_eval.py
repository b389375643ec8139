"""Held-out evaluation while a run trains (``eval_steps``): the learning curve on problems the run never trains on.

Every ``eval_steps`` steps, at the step training starts from (step 0: the base model, before the first update; a
fork's or a resume's checkpoint step: the model it continues) and at the last step, the worker
scores a fixed subset of held-out problems with greedy answers: correctness, strict-format rate, mean completion
length and the mean of each of the run's rewards. The numbers are stored as ordinary metrics of that step under
``heldout/…`` keys (``heldout/correct``, ``heldout/format``, ``heldout/mean_length``, ``heldout/rewards/<name>``), so
the dashboard charts them like anything TRL logs.

Design decisions:

- The problems are the ones ``grpo-studio eval`` uses (:func:`trainer.evaluation.evaluate.heldout_for`, the one
  definition in trainer.loading.heldout: the rows ``heldout_fraction`` keeps out of training, else another split
  with every training question removed), the first ``eval_problems`` of them (the config's), the same at every step so the points
  of the curve compare. Where they came from is written to the run's log.
- Evaluating must not change training: the random state (torch, CPU and CUDA) is put back afterwards, since the
  sampling helper reseeds, and the model goes back to training mode. A run with ``eval_steps`` trains exactly as the
  same run without it (tests/training/test_periodic_eval.py checks the rewards step by step).
- A failed evaluation never fails the run: it is logged once and evaluation is turned off for the rest of the run.
- Only a single-process run or rank 0 evaluates; under DeepSpeed ZeRO-3 the weights are sharded across processes and
  one process cannot generate alone, so evaluation is skipped there with a note.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from storage.queries import HELDOUT_EVERY
from trainer.config import RunConfig

log = logging.getLogger(__name__)

# The config's default eval_problems (declared once, on RunConfig): enough for a 1-point resolution; ~2 s of greedy
# answers from the built-in model on one thread, 65-90 s from SmolLM2-135M on 2 loaded cores.
EVAL_PROBLEMS = RunConfig.__dataclass_fields__["eval_problems"].default


def heldout_metrics(
    config: RunConfig, model, tokenizer, problems, per_problem: list[bool] | None = None
) -> dict[str, float]:
    """Greedy correctness, format rate, mean length and each reward's mean on ``problems``, as ``heldout/…`` keys
    (``per_problem``, when given, gets each problem's greedy correctness)."""
    from trainer.evaluation.evaluate import side_metrics

    side = side_metrics(config, model, tokenizer, problems, samples=0, seed=0, per_problem=per_problem)
    metrics = {
        "heldout/correct": side["correct"],
        "heldout/format": side["format"],
        "heldout/mean_length": side["mean_length"],
    }
    if side["tool_calls"] is not None:  # a run with tools: the share of greedy answers that call one
        metrics["heldout/tool_calls"] = side["tool_calls"]
    for name, value in side["rewards"].items():
        if value is not None:
            metrics[f"heldout/rewards/{name.rsplit(':', 1)[-1]}"] = value
    return metrics


def make_heldout_callback(
    config: RunConfig,
    store: Callable[[int, dict[str, float]], None],
    log_line: Callable[[str], None],
    store_results: Callable[[int, list[dict]], None] | None = None,
):
    """A TrainerCallback that scores held-out problems at the step training starts from (0, or a fork's or resume's
    checkpoint step), every ``config.eval_steps`` steps and at the last step, handing ``store(step, metrics)`` the result (and ``store_results(step, rows)`` each problem's, rows of
    storage.models.HeldOutResult without the run id); None when ``eval_steps`` is 0 or this run cannot evaluate
    (the reason goes to ``log_line``). Set its ``trainer`` attribute once the trainer exists."""
    from transformers import TrainerCallback

    from trainer.evaluation.evaluate import EvaluationError, heldout_for

    if not config.eval_steps:
        return None
    if config.deepspeed_stage == 3:
        log_line("eval_steps: no held-out evaluation under DeepSpeed ZeRO-3 (one process cannot generate alone)")
        return None
    try:
        held = heldout_for(config, config.eval_problems)
    except EvaluationError as exc:
        log_line(f"eval_steps: no held-out evaluation: {exc}")
        return None
    problems = held.problems
    log_line(f"{HELDOUT_EVERY}{config.eval_steps} steps on {held.describe()}")  # the Monitor's start phases read it

    class HeldOutCallback(TrainerCallback):
        trainer: Any = None
        off = False

        def evaluate(self, step: int) -> None:
            if self.off or self.trainer is None:
                return
            started = time.perf_counter()
            correct: list[bool] = []
            try:
                with _kept_random_state(), _kept_mode(self.trainer.model):
                    metrics = heldout_metrics(
                        config, self.trainer.model, self.trainer.processing_class, problems, correct
                    )
            except Exception as exc:  # noqa: BLE001 - evaluation is a view on training, never a reason to stop it
                self.off = True
                log.exception("held-out evaluation failed")
                log_line(f"held-out evaluation failed at step {step} and is off for this run: {exc}")
                return
            metrics["heldout/seconds"] = time.perf_counter() - started
            store(step, metrics)
            if store_results is not None:
                rows = [
                    {"step": step, "problem": i, "question": p.question, "correct": 1.0 if ok else 0.0}
                    for i, (p, ok) in enumerate(zip(problems, correct))
                ]
                store_results(step, rows)

        def on_train_begin(self, args, state, control, **kwargs):
            # step 0, the base; or the checkpoint a fork or a resume starts from: a fork's own rows begin after it,
            # and without this point its curve began eval_steps later, under rewards its parent never had (issue 57)
            self.evaluate(state.global_step)

        def on_step_end(self, args, state, control, **kwargs):
            step = state.global_step
            if step % config.eval_steps == 0 or step == state.max_steps:
                self.evaluate(step)

    return HeldOutCallback()


@contextlib.contextmanager
def _kept_random_state() -> Iterator[None]:
    """Put torch's CPU and CUDA random state back on exit (the sampling helper reseeds)."""
    import torch

    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


@contextlib.contextmanager
def _kept_mode(model) -> Iterator[None]:
    """Put the model back in the mode it was in (generation switches it to eval mode)."""
    training = model.training
    try:
        yield
    finally:
        model.train(training)
