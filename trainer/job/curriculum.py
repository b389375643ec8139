"""The optional curriculum (issue 31, item 2; ``RunConfig.curriculum``, off by default): stop sampling training prompts
that every answer of their group solved in ``curriculum_solved_visits`` visits in a row, and sample prompts never
solved yet only ``curriculum_never_keep`` of the times they come up. Both kinds of group teach GRPO nothing (every
advantage is 0); the batch goes to prompts that still disagree.

How it reaches TRL: GRPOTrainer draws prompts through a ``RepeatSampler`` built in ``_get_train_sampler`` (trl 1.16
grpo_trainer.py:1280-1316; the sampler is trl/trainer/utils.py:859-). :func:`install` replaces that method on the
trainer instance with one returning a :class:`CurriculumSampler`, which yields indices in exactly RepeatSampler's
pattern and number (each prompt ``num_generations`` times in a row, each chunk ``repeat_count`` times, as many chunks
an epoch) but picks each chunk lazily from a stream of shuffled passes over the data, asking :class:`Curriculum` about
each prompt when the chunk is drawn. A chunk is always full: when a pass's worth of candidates admits too few prompts,
skipped ones fill it again, so a run never starves.

What was decided is recorded: each chunk's drawn prompts and the skipped ones with the reason. The callback stores
the record of the chunk a step trained on (matched by its prompts: the data loader draws a chunk ahead) as a
``curriculum_steps`` row, so the run's data order can be replayed. Outcomes reach the curriculum from the stored
samples of each step (the callback calls :meth:`Curriculum.observe`), so a decision uses what was known when the chunk
was drawn, a step or two behind training.

A resumed run starts with an empty history (the curriculum keeps no state in checkpoints): it samples every prompt
again until it has seen them solved anew.
"""

from __future__ import annotations

import random
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

SOLVED, NEVER = "solved", "never solved"


@dataclass
class Drawn:
    """One chunk of prompts as drawn: the questions kept and those skipped, each with why."""

    questions: list[str]
    skipped: list[dict[str, str]] = field(default_factory=list)


class Curriculum:
    """Which prompts to skip, from each prompt's outcomes so far (pure: tested without a trainer)."""

    def __init__(self, questions: Sequence[str], solved_visits: int, never_keep: float, seed: int) -> None:
        self.questions = list(questions)
        self.solved_visits, self.never_keep = solved_visits, never_keep
        self.streak: dict[str, int] = defaultdict(int)  # visits in a row solved by every answer of the group
        self.ever_solved: set[str] = set()
        self.seen: set[str] = set()
        self.random = random.Random(seed)  # the never-solved draws: seeded, so a rerun with the same outcomes agrees
        self.pending: deque[Drawn] = deque()

    def observe(self, rows: Sequence[dict[str, Any]]) -> None:
        """Take one step's sample rows (prompt, rewards): a prompt whose answers all passed the correctness reward
        extends its streak, any other outcome ends it. Rows without a correctness reward teach nothing here."""
        key = next((k for row in rows for k in row["rewards"] if "correct" in k.lower()), None)
        if key is None:
            return
        outcomes: dict[str, list[bool]] = defaultdict(list)
        for row in rows:
            value = row["rewards"].get(key)
            outcomes[row["prompt"]].append(value is not None and value > 0)
        for prompt, passed in outcomes.items():
            self.seen.add(prompt)
            if any(passed):
                self.ever_solved.add(prompt)
            self.streak[prompt] = self.streak[prompt] + 1 if all(passed) else 0

    def reason_to_skip(self, question: str) -> str | None:
        """Why ``question`` should not be drawn now, or None to draw it."""
        if self.streak[question] >= self.solved_visits:
            return SOLVED
        if question in self.seen and question not in self.ever_solved and self.random.random() >= self.never_keep:
            return NEVER
        return None

    def draw(self, order: Iterator[int], size: int, budget: int | None = None) -> list[int] | None:
        """The next chunk of ``size`` dataset indices from ``order`` (shuffled indices), skipping what
        :meth:`reason_to_skip` says, looking at most ``budget`` candidates (default: all) and then refilling from the
        skipped; None when ``order`` ran out before a full chunk. The decision is kept in ``pending``."""
        chosen: list[int] = []
        skipped: list[tuple[int, str]] = []
        for looked, index in enumerate(order, start=1):
            reason = self.reason_to_skip(self.questions[index])
            if reason is None:
                chosen.append(index)
            else:
                skipped.append((index, reason))
            if len(chosen) == size or (budget is not None and looked >= budget):
                break
        while len(chosen) < size and skipped:  # the epoch ran out: take skipped prompts back, never a short batch
            chosen.append(skipped.pop(0)[0])
        if len(chosen) < size:
            return None
        self.pending.append(
            Drawn(
                [self.questions[i] for i in chosen], [{"question": self.questions[i], "reason": r} for i, r in skipped]
            )
        )
        return chosen

    def record_for(self, prompts: Sequence[str]) -> Drawn | None:
        """The pending record of the chunk whose prompts are ``prompts`` (one step's samples), removed with every
        older one (the loader drew and dropped them, e.g. at an epoch's end)."""
        wanted = set(prompts)
        for i, drawn in enumerate(self.pending):
            if set(drawn.questions) == wanted:
                for _ in range(i + 1):
                    found = self.pending.popleft()
                return found
        return None


def make_sampler(curriculum: Curriculum, base: Any):
    """A sampler yielding what ``base`` (TRL's RepeatSampler) would, chunk by chunk from ``curriculum``."""
    import torch
    from torch.utils.data import Sampler

    class CurriculumSampler(Sampler):
        def __init__(self) -> None:
            self.base = base
            self.generator = torch.Generator()
            if base.seed is not None:
                self.generator.manual_seed(base.seed)

        def orders(self) -> Iterator[int]:
            """Shuffled passes over the data set, one after another, without end."""
            while True:
                if base.shuffle:
                    yield from torch.randperm(base.num_samples, generator=self.generator).tolist()
                else:
                    yield from range(base.num_samples)

        def __iter__(self):
            # As many chunks as RepeatSampler's epoch has, drawn from a stream of shuffled passes: skipping must not
            # end an epoch early, since the trainer counts a run's epochs from this length, and a short epoch ended
            # a 6-step run at step 4
            order = self.orders()
            for _ in range(base.num_samples // base.batch_size):
                chunk = curriculum.draw(order, base.batch_size, budget=base.num_samples)
                for _ in range(base.repeat_count):
                    for index in chunk:
                        yield from [index] * base.mini_repeat_count

        def __len__(self) -> int:
            return len(base)

    return CurriculumSampler()


def unavailable(trainer: Any, config: Any) -> str | None:
    """Why a run with ``config.curriculum`` on trains without it, or None when it can have it."""
    if config.num_processes > 1 or (config.executor == "slurm" and config.slurm_nodes > 1):
        # each process draws its own prompts with the same seed (RepeatSampler); only the main one sees outcomes
        return "curriculum: off in a run of several processes (each draws its prompts alike; only one sees outcomes)"
    if not hasattr(trainer, "_get_train_sampler") or "question" not in getattr(
        trainer.train_dataset, "column_names", ()
    ):
        return "curriculum: off, this data set has no question column to follow prompts by"
    return None


def install(trainer: Any, config: Any) -> Curriculum | None:
    """Put the curriculum into ``trainer``'s prompt sampling when ``config.curriculum`` is on and possible (see
    :func:`unavailable`); returns it, else None."""
    if not config.curriculum or unavailable(trainer, config):
        return None
    dataset = trainer.train_dataset
    curriculum = Curriculum(
        dataset["question"], config.curriculum_solved_visits, config.curriculum_never_keep, config.seed
    )
    original = trainer._get_train_sampler

    def curriculum_sampler(dataset=None):
        return make_sampler(curriculum, original(dataset))

    trainer._get_train_sampler = curriculum_sampler
    return curriculum
