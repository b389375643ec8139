"""Training data: GSM8K from the hub, local files with a column mapping, and the offline ``builtin:arithmetic`` task.

Every source comes out in one shape: ``question``, ``answer`` (the reference answer, the column rewards read) and
``prompt`` (chat messages: the system prompt, then the question). ``datasets`` is imported inside the functions, so
importing this module stays light.

What a ``dataset_name`` names (a built-in set, GSM8K, a local file, a hub id) is decided by trainer.config.names, for
loading here and for the data set's rules (trainer.review.data), with the one rule this module's loader applies
too (a local file has no splits). It reads the config through :class:`DataSettings`, the few fields it needs.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainer.config.examples import parse_examples
from trainer.config.names import (
    GSM8K_NAMES,
    file_split_problem,
    hub_id_problem,
    looks_like_path,
    protected_file_problem,
)
from trainer.loading.datafiles import DataFileError, check_value, read_rows, summarize
from trainer.loading.hub import hub_or_cache

if TYPE_CHECKING:
    from datasets import Dataset

# The arithmetic task: a + b and a - b (a >= b) with operands up to this value. Small enough for a tiny model to learn
# in minutes on a CPU, large enough (two-digit carries) that it doesn't learn it perfectly in a short warm-up.
ARITHMETIC_MAX_OPERAND = 30
ARITHMETIC_HELDOUT = 200  # problems held out of training, fixed by ARITHMETIC_SEED
ARITHMETIC_SEED = 1234
# builtin:arithmetic3, the calculator demo's task: three-digit a + b and a - b (a >= b), too hard for the built-in
# model to work out alone in one line, easy with a calculator. Too many pairs to list (some 1.2 million), so a fixed
# draw of distinct problems, the first ARITHMETIC3_HELDOUT of them held out (disjoint: the draw has no repeats).
ARITHMETIC3_PROBLEMS = 5000
ARITHMETIC3_HELDOUT = 200
ARITHMETIC3_SEED = 4321


class DataError(ValueError):
    """A data set that can't be loaded as asked (missing file or column, unknown split)."""


class DataSettings(Protocol):
    """The settings the loaders read; a RunConfig has them all."""

    dataset_name: str
    dataset_split: str
    question_column: str
    answer_column: str
    max_train_samples: int
    heldout_fraction: float
    system_prompt: str
    few_shot_examples: str


@dataclass(frozen=True)
class Problem:
    """One question with its reference answer (and, for code tasks, the unit tests its answer must pass)."""

    question: str
    answer: str
    tests: tuple[str, ...] | None = None


def arithmetic_problems(split: str = "train") -> list[Problem]:
    """The ``builtin:arithmetic`` problems of ``split`` ("train", or "test" for the held-out set), in a fixed order."""
    problems = [
        Problem(f"What is {a} {op} {b}?", str(a + b if op == "+" else a - b))
        for a in range(ARITHMETIC_MAX_OPERAND + 1)
        for b in range(ARITHMETIC_MAX_OPERAND + 1)
        for op in ("+", "-")
        if op == "+" or a >= b
    ]
    random.Random(ARITHMETIC_SEED).shuffle(problems)
    if split in ("test", "heldout", "validation"):
        return problems[:ARITHMETIC_HELDOUT]
    if split == "train":
        return problems[ARITHMETIC_HELDOUT:]
    raise DataError(f"builtin:arithmetic has splits train and test, not {split!r}")


def arithmetic3_problems(split: str = "train") -> list[Problem]:
    """The ``builtin:arithmetic3`` problems of ``split`` ("train", or "test" for the held-out set), in a fixed order:
    three-digit sums and differences (the result of a difference never negative)."""
    rng = random.Random(ARITHMETIC3_SEED)
    seen: set[tuple[int, str, int]] = set()
    problems = []
    while len(problems) < ARITHMETIC3_PROBLEMS:
        a, b, op = rng.randint(100, 999), rng.randint(100, 999), rng.choice("+-")
        if op == "-" and a < b:
            a, b = b, a
        if (a, op, b) in seen:
            continue
        seen.add((a, op, b))
        problems.append(Problem(f"What is {a} {op} {b}?", str(a + b if op == "+" else a - b)))
    if split in ("test", "heldout", "validation"):
        return problems[:ARITHMETIC3_HELDOUT]
    if split == "train":
        return problems[ARITHMETIC3_HELDOUT:]
    raise DataError(f"builtin:arithmetic3 has splits train and test, not {split!r}")


def arithmetic_solution(problem: Problem, forget_carry: bool = False) -> str:
    """A worked answer in the reference format, used to warm the built-in model up: column by column, units first,
    then tens with the carry (or borrow), then the result. "12 + 19" is worked as "2 + 9 = 11", "1 + 1 + 1 = 3",
    "12 + 19 = 31"; "32 - 19" as "12 - 9 = 3", "3 - 1 - 1 = 1", "32 - 19 = 13"; two one-digit numbers in one line.

    Why columns rather than one line ("12 + 19 = 31"): each line is a one-digit fact shared by many problems, so what
    GRPO teaches on the training problems carries over to held-out ones. With the one-line form the built-in model
    learned each sum on its own (82 % right on training problems, 54 % held out) and GRPO gains on training problems
    did not transfer (issue 12).

    ``forget_carry`` writes the slip a hurried pupil makes: the tens line without the carry or borrow, so the result
    is off by ten ("1 + 1 = 2", "12 + 19 = 21"). Problems without a carry are worked the same either way.
    """
    expression = problem.question.removeprefix("What is ").removesuffix("?")
    a_text, op, b_text = expression.split()
    a, b = int(a_text), int(b_text)
    lines, result = [], int(problem.answer)
    if a >= 10 or b >= 10:
        (a_tens, a_units), (b_tens, b_units) = divmod(a, 10), divmod(b, 10)
        if op == "+":
            carry = a_units + b_units >= 10
            lines.append(f"{a_units} + {b_units} = {a_units + b_units}")
            tens = f"{a_tens} + {b_tens}", a_tens + b_tens
            sign, step = " + 1", 1
        else:
            carry = a_units < b_units
            units = a_units + 10 if carry else a_units
            lines.append(f"{units} - {b_units} = {units - b_units}")
            tens = f"{a_tens} - {b_tens}", a_tens - b_tens
            sign, step = " - 1", -1
        if carry and not forget_carry:
            lines.append(f"{tens[0]}{sign} = {tens[1] + step}")
        else:
            lines.append(f"{tens[0]} = {tens[1]}")
            if carry:
                result -= step * 10
    lines.append(f"{expression} = {result}")
    reasoning = "\n".join(lines)
    return f"<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{result}\n</answer>"


def gsm8k_reference(answer: str) -> str:
    """The reference answer of a GSM8K solution: the text after "####", thousands separators removed ("1,000" ->
    "1000") by the rewards' comma rule; any other comma stays ("2,5" is not 25, as the correctness reward reads it)."""
    from trainer.scoring.rewards import without_thousands

    return without_thousands(answer.split("####")[-1].strip())


def make_prompt(question: str, system_prompt: str, examples: str = "") -> list[dict[str, str]]:
    """Chat messages for one question: the system prompt (when not empty), the worked examples as earlier turns of
    the conversation (``examples``: RunConfig.few_shot_examples, read by :func:`parse_examples`), then the question."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for asked, answered in parse_examples(examples):
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    return messages + [{"role": "user", "content": question}]


def load_problems(config: DataSettings, split: str | None = None, limit: int | None = None) -> list[Problem]:
    """The questions and reference answers of the config's data set and split (default: the training split); with
    ``limit``, a local file is read no further than that many rows (the preview)."""
    split = split or config.dataset_split
    name = config.dataset_name
    if name == "builtin:arithmetic":
        return arithmetic_problems(split)
    if name == "builtin:arithmetic3":
        return arithmetic3_problems(split)
    if name == "builtin:word-problems":
        from trainer.loading.word_problems import word_problem_split

        try:
            return [Problem(r["question"], gsm8k_reference(r["answer"])) for r in word_problem_split(split)]
        except ValueError as exc:
            raise DataError(str(exc)) from None
    if name == "builtin:code":
        # a dozen problems is too few to hold any out: every split is the whole set
        from trainer.scoring.code_tasks import CODE_PROBLEMS

        return [Problem(p["question"], p["answer"], tuple(p["tests"])) for p in CODE_PROBLEMS]
    if name in GSM8K_NAMES:
        from datasets import load_dataset

        with hub_or_cache(name, "dataset"):  # a hub out of reach: the cache, or one sentence within seconds
            rows = load_dataset("openai/gsm8k", "main", split=split)
        return [Problem(r["question"], gsm8k_reference(r["answer"])) for r in rows]
    if looks_like_path(name):
        if problem := protected_file_problem(name, "dataset"):
            raise DataError(problem)
        if problem := file_split_problem(name, split):
            raise DataError(problem)
        return _file_problems(Path(name).expanduser(), config.question_column, config.answer_column, limit)
    if problem := hub_id_problem(name, "dataset", owner_required=True):
        raise DataError(problem)  # never a packaged builder's name, never a folder of the working directory
    from datasets import load_dataset

    with hub_or_cache(name, "dataset"):
        rows = load_dataset(name, split=split)
    return _map_columns(rows, config.question_column, config.answer_column, name)


def split_heldout(problems: list[Problem], fraction: float) -> tuple[list[Problem], list[Problem]]:
    """``problems`` as (kept for training, held out): a question is held out when the hash of its text falls in the
    first ``fraction`` of the hash range, so the same rows are held out whatever the order, seed or row count."""
    if not fraction:
        return problems, []
    train, heldout = [], []
    for p in problems:
        position = int.from_bytes(hashlib.sha256(p.question.encode()).digest()[:8], "big") / 2**64
        (heldout if position < fraction else train).append(p)
    return train, heldout


def build_dataset(config: DataSettings, split: str | None = None) -> Dataset:
    """The training data set: columns ``prompt`` (chat messages), ``question`` and ``answer``; without the rows
    ``heldout_fraction`` keeps out."""
    from datasets import Dataset

    problems, _ = split_heldout(load_problems(config, split), config.heldout_fraction)
    if config.max_train_samples:
        problems = problems[: config.max_train_samples]
    if not problems:
        raise DataError(f"data set {config.dataset_name!r} has no rows")
    with_tests = any(p.tests for p in problems)
    rows = []
    for p in problems:
        row = {
            "prompt": make_prompt(p.question, config.system_prompt, config.few_shot_examples),
            "question": p.question,
            "answer": p.answer,
        }
        if with_tests:
            row["tests"] = list(p.tests or [])
        rows.append(row)
    return Dataset.from_list(rows)


def _file_problems(path: Path, question_column: str, answer_column: str, limit: int | None) -> list[Problem]:
    """A local file's problems; the head is checked first (columns, empty values) so a wrong mapping fails fast, and
    every row after it the same way (an empty or nested question on row 50,000 is named, not trained on as "")."""
    try:
        summarize(path, question_column, answer_column)
        problems = []
        for number, row in enumerate(read_rows(path, limit), 1):
            question, answer = row.get(question_column), row.get(answer_column)
            check_value(path, number, question_column, question)
            check_value(path, number, answer_column, answer)
            problems.append(Problem(str(question), str(answer).strip()))
        return problems
    except DataFileError as exc:
        raise DataError(str(exc)) from None


def _map_columns(rows: Any, question_column: str, answer_column: str, name: str) -> list[Problem]:
    columns = list(rows.column_names)
    missing = [c for c in (question_column, answer_column) if c not in columns]
    if missing:
        raise DataError(
            f"data set {name!r} has no column {', '.join(map(repr, missing))}; its columns are {', '.join(columns)} "
            "(set question_column / answer_column)"
        )
    return [Problem(str(r[question_column]), str(r[answer_column]).strip()) for r in rows]
