"""What the worker adds to TRL's training loop, as one TrainerCallback: every logged metric and the completions table
(prompt, completion, each reward's score, advantage, reference answer) go to the database through the
:class:`~trainer.job.db_writer.DbWriter`, progress is kept on the run row, and a stop request (SIGTERM, Ctrl-C) ends
training at the next step boundary with a checkpoint, so a resume loses nothing.

Only the main process of a multi-process run writes to the database; every process takes part in the stop decision,
because all must stop at the same step. transformers and torch are imported inside the functions that need them: the
worker imports unsloth (when it takes that path) before anything imports transformers.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

from storage import queries
from trainer.insight.collapse import alphabet, text_signs
from trainer.job.db_writer import DatabaseMoved
from trainer.tools.turns import completion_turns, tool_error_rate

if TYPE_CHECKING:
    from trainer.config import RunConfig
    from trainer.job.db_writer import DbWriter
    from trainer.job.stop import StopRequest
    from trainer.scoring.rewards import RewardFunc

log = logging.getLogger(__name__)

TASK_ROWS = 2000  # the training rows read for the base's alphabet (:func:`task_texts`): enough for every digit


# --- stop requests and processes ------------------------------------------------------------------------------------
def stop_everywhere(requested: bool) -> bool:
    """Whether any process of a multi-process run was asked to stop (all must stop at the same step, or the others
    wait forever in their next collective operation). Single-process: just ``requested``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return requested
    import torch

    flag = torch.tensor([1.0 if requested else 0.0])
    if dist.get_backend() == "nccl":
        flag = flag.cuda()
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def is_main_process() -> bool:
    """True in a single-process run and in rank 0 of an ``accelerate launch``: the only one that writes to the DB."""
    return int(os.environ.get("RANK", "0")) == 0


# --- the TRL callback -----------------------------------------------------------------------------------------------
def make_callback(run_id: int, writer: DbWriter | None, stop: StopRequest, config: RunConfig) -> Any:
    """A TrainerCallback that stores every logged metric and the completions table, keeps progress on the run row,
    and ends training at the step boundary after a stop request. With ``writer`` None (the non-main processes of a
    multi-process run) it only takes part in the stop decision."""
    from transformers import TrainerCallback

    weights = config.weights()
    group_size = config.num_generations
    with_tools = config.uses_tools()  # its samples keep their turns (trainer.tools.turns)
    if writer is not None:
        from trainer.job.tracker_alerts import trackio_forwarder

        forwarder = trackio_forwarder(list(config.report_to or []), config.max_completion_length)
    else:
        forwarder = None

    class StudioCallback(TrainerCallback):
        trainer: Any = None  # set once the trainer exists; the completions table lives on it
        last_sample_step = -1
        tokens: Any = None  # a TokenCapture (trainer.job.token_capture) once training began, for a writing process
        curriculum: Any = None  # a Curriculum (trainer.job.curriculum) when the run has one
        alerts = forwarder  # the run's alerts to trackio (trainer.job.tracker_alerts), or None
        # the base's alphabet (trainer.insight.collapse): the characters of the task (the training data's prompts
        # and reference answers, :func:`task_texts`) and of the first sampled step's answers, which the base wrote (a
        # fresh adapter is zero); after a resume, the first step this process sampled
        known: frozenset[str] | None = None

        def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
            from trainer.job.checkpoints import follow_config_after_resume

            changed = follow_config_after_resume(args, state, optimizer, lr_scheduler)
            if writer and self.trainer is not None:  # installed by the worker's build_trainer
                self.tokens = getattr(self.trainer, "grpo_studio_tokens", None)
            if writer:
                writer.progress(state.global_step, state.max_steps)
                if changed is not None:
                    writer.log(f"learning rate from the checkpoint replaced by this run's {changed:g}")
            if forwarder is not None:
                forwarder.notes = fork_notes(run_id)

        def on_train_end(self, args, state, control, **kwargs):
            if forwarder is not None:
                forwarder.judge()  # the steps since the last judgement: a sign of the last steps is sent too

        def on_step_end(self, args, state, control, **kwargs):
            if writer:
                writer.progress(state.global_step)
                if writer.moved:
                    raise DatabaseMoved(writer.moved)
            if stop_everywhere(stop.requested):
                stop.event.set()
                control.should_training_stop = True
                control.should_save = True  # a checkpoint at the stop step, so a resume loses nothing
            return control

        def on_log(self, args, state, control, logs=None, **kwargs):
            if writer is None or not state.is_world_process_zero or not logs:
                return
            writer.metrics(queries.metric_rows(run_id, state.global_step, logs, time.time()))
            rows = []
            if state.global_step != self.last_sample_step:
                rows = sample_rows(self.trainer, run_id, state.global_step, weights, group_size, with_tools)
                if rows:
                    writer.samples(rows)
                    if self.tokens is not None:
                        writer.rows("sample_tokens", self.tokens.rows(rows, run_id, state.global_step))
                    if self.curriculum is not None:
                        self.curriculum.observe(rows)
                        drawn = self.curriculum.record_for([row["prompt"] for row in rows])
                        if drawn is not None:
                            record = {"run_id": run_id, "step": state.global_step, "drawn": drawn.questions}
                            writer.rows("curriculum_steps", [record | {"skipped": drawn.skipped}])
                    completions = [row["completion"] for row in rows]
                    if self.known is None:
                        task = task_texts(getattr(self.trainer, "train_dataset", None))
                        self.known = alphabet(task + [row["prompt"] for row in rows] + completions)
                    shares = zero_std_shares(rows) | (tool_error_rate(rows) if with_tools else {})
                    shares |= text_signs(completions, self.known)
                    writer.metrics(queries.metric_rows(run_id, state.global_step, shares, time.time()))
                    self.last_sample_step = state.global_step
            if forwarder is not None:
                forwarder.observe(state.global_step, logs, rows)
            if control.should_save:
                # The trainer logs, then saves a checkpoint. Commit this step's rows first: a kill right after the
                # checkpoint must not lose them, because a resume starts after the checkpoint and never re-logs them.
                writer.flush()

    return StudioCallback()


def fork_notes(run_id: int) -> list:
    """The note of a fork that changed its parent's rewards (trainer.insight.forks), for the run's tracker; [] when the
    rows can't be read (a note is not worth failing for)."""
    from storage.db import get_sessionmaker
    from trainer.insight.forks import fork_notes as read_notes

    try:
        with get_sessionmaker().begin() as session:
            return read_notes(session, queries.get_run(session, run_id))
    except Exception as exc:  # noqa: BLE001 - the database may be away for a while (trainer/job/db_writer.py)
        log.warning("the fork's note for the tracker not read: %s", exc)
        return []


def sample_rows(
    trainer: Any, run_id: int, step: int, weights: list[float], group_size: int, with_turns: bool = False
) -> list[dict]:
    """The completions table of the latest generation batch, from GRPOTrainer's ``_logs`` buffer; ``with_turns`` (a
    run with tools): each row also keeps its completion turn by turn (trainer.tools.turns), and ``completion`` stays
    the text of its messages, which the rest of the worker reads."""
    buffer = getattr(trainer, "_logs", None)
    if not buffer or not buffer.get("prompt"):
        return []
    prompts, completions = list(buffer["prompt"]), list(buffer["completion"])
    rewards = {name: list(values) for name, values in buffer["rewards"].items()}
    advantages = list(buffer["advantages"])
    answers = list(buffer.get("extra", {}).get("answer", []))
    rows = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions)):
        scores = {name: _finite_or_none(values[i]) for name, values in rewards.items() if i < len(values)}
        applied = [(w, s) for w, s in zip(weights, scores.values()) if s is not None]
        rows.append(
            {
                "run_id": run_id,
                "step": step,
                "group_index": i // group_size,
                "prompt": message_text(prompt, last_user=True),
                "completion": message_text(completion),
                "rewards": scores,
                "total_reward": sum(w * s for w, s in applied) if applied else None,
                "advantage": _finite_or_none(advantages[i]) if i < len(advantages) else None,
                "reference_answer": str(answers[i]) if i < len(answers) and answers[i] is not None else None,
                "turns": completion_turns(completion) if with_turns else None,
            }
        )
    return rows


def zero_std_shares(rows: list[dict]) -> dict[str, float]:
    """Of the step's groups, the share whose answers all scored the same *high* and the share all the same *low*:
    TRL's ``frac_reward_zero_std`` counts both, but they call for opposite fixes (prompts already solved vs never
    solved). High and low are judged against the middle of the step's range of total rewards; when every answer of
    the step scored alike, a positive total counts as high."""
    groups: dict[int, list[float]] = {}
    for row in rows:
        if row["total_reward"] is not None:
            groups.setdefault(row["group_index"], []).append(row["total_reward"])
    if not groups:
        return {}
    totals = [t for values in groups.values() for t in values]
    middle = (min(totals) + max(totals)) / 2 if max(totals) > min(totals) else 0.0
    flat = [values[0] for values in groups.values() if max(values) - min(values) < 1e-9]
    high = sum(1 for value in flat if value > middle)
    return {"zero_std/all_high": high / len(groups), "zero_std/all_low": (len(flat) - high) / len(groups)}


def _finite_or_none(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None


def task_texts(dataset: Any, limit: int = TASK_ROWS) -> list[str]:
    """The text of the first ``limit`` rows of a run's training data: each prompt whole (system prompt and worked
    examples included) and its reference answer where the data has one; [] for data that can't be read by rows (a
    stream). Part of the base's alphabet: the first step's answers alone are too few to hold it (a run of 2 prompts
    x 4 answers wrote no 4, 5, 8 or - at step 1, then 4-9 % of its healthy characters read as unusual)."""
    try:
        rows = dataset.select(range(min(limit, len(dataset))))
        prompts, columns = rows["prompt"], rows.column_names
    except (AttributeError, TypeError, KeyError):
        return []
    answers = [str(answer) for answer in rows["answer"]] if "answer" in columns else []
    return [message_text(prompt) for prompt in prompts] + answers


def message_text(item: Any, last_user: bool = False) -> str:
    """A prompt or completion as text: as is when it is text, else its messages' contents (``last_user``: only the
    last user message of a chat prompt, which is what differs between prompts)."""
    if isinstance(item, str):
        return item
    messages = [m for m in item if isinstance(m, dict)]
    if last_user:
        users = [m for m in messages if m.get("role") == "user"]
        messages = users[-1:] or messages
    return "\n".join(str(m.get("content", "")) for m in messages)


def with_reference_answers(reward: RewardFunc) -> RewardFunc:
    """``reward`` that also hands the batch's reference answers to TRL's completions table (``log_extra``), where
    :func:`sample_rows` reads them, so the stored samples carry them. Give it to one reward of a run only."""

    def logging_reward(prompts, completions, **kwargs) -> list[float | None]:
        if "log_extra" in kwargs and "answer" in kwargs:
            kwargs["log_extra"]("answer", list(kwargs["answer"]))
        return reward(prompts=prompts, completions=completions, **kwargs)

    logging_reward.__name__ = logging_reward.__qualname__ = reward.__name__  # TRL logs rewards/<__name__>/mean
    return logging_reward
