"""``builtin:word-problems``: GSM8K's format, generated offline, easy enough for a 135M-parameter model.

GSM8K (openai/gsm8k) is grade-school word problems whose ``answer`` field is a worked solution ending in
``#### <number>``; the reference recipe trains on it. A model of 135M parameters gets nearly none of GSM8K right,
and the machine it trains on may have no hub, so this set keeps GSM8K's shape (a question in words, an answer whose
reference is the text after ``####``, read by the same :func:`trainer.loading.data.gsm8k_reference`) with one
operation on small numbers: "Sam has 5 marbles. He finds 3 more marbles. How many marbles does Sam have now?".

The problems are drawn from a fixed seed, without repeated questions; the first :data:`HELDOUT` of the draw are the
"test" split, disjoint from "train" by construction. :data:`EXAMPLES` are two worked problems in the reference
recipe's XML format, written for the prompt's worked examples (RunConfig.few_shot_examples); their questions are not
in either split.
"""

from __future__ import annotations

import random

PROBLEMS = 2000
HELDOUT = 200
SEED = 2026

NAMES = ("Sam", "Mia", "Leo", "Ava", "Ben", "Zoe", "Max", "Lily", "Noah", "Emma", "Omar", "Nina")
THINGS = ("apples", "marbles", "books", "stickers", "cookies", "pencils", "shells", "stamps", "cards", "balloons")


def _add(rng: random.Random, name: str, things: str) -> tuple[str, str, int]:
    a, b = rng.randint(2, 20), rng.randint(2, 20)
    question = rng.choice(
        (
            f"{name} has {a} {things}. {name} gets {b} more {things}. How many {things} does {name} have now?",
            f"There are {a} {things} in a box. {name} puts in {b} more. How many {things} are in the box now?",
            f"{name} collects {a} {things} on Monday and {b} {things} on Tuesday. How many {things} does {name} "
            "collect in total?",
        )
    )
    return question, f"{name} has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} {things}.", a + b


def _subtract(rng: random.Random, name: str, things: str) -> tuple[str, str, int]:
    a = rng.randint(5, 30)
    b = rng.randint(1, a - 1)
    question = rng.choice(
        (
            f"{name} had {a} {things} and gave {b} of them to a friend. How many {things} does {name} have left?",
            f"A shelf holds {a} {things}. {name} takes {b} of them. How many {things} are still on the shelf?",
            f"{name} has {a} {things} and loses {b}. How many {things} does {name} have now?",
        )
    )
    return question, f"{a} - {b} = <<{a}-{b}={a - b}>>{a - b} {things} are left.", a - b


def _multiply(rng: random.Random, name: str, things: str) -> tuple[str, str, int]:
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    question = f"{name} buys {a} bags with {b} {things} in each bag. How many {things} does {name} buy?"
    return question, f"{a} bags of {b} {things} make {a} * {b} = <<{a}*{b}={a * b}>>{a * b} {things}.", a * b


def _divide(rng: random.Random, name: str, things: str) -> tuple[str, str, int]:
    b, each = rng.randint(2, 6), rng.randint(2, 9)
    a = b * each
    question = f"{name} shares {a} {things} equally among {b} friends. How many {things} does each friend get?"
    return question, f"Each friend gets {a} / {b} = <<{a}/{b}={each}>>{each} {things}.", each


KINDS = (_add, _subtract, _multiply, _divide)


def word_problem_rows() -> list[dict[str, str]]:
    """Every problem as a GSM8K row: ``question`` and ``answer`` (the worked line, then ``#### <number>``), held-out
    rows first."""
    rng = random.Random(SEED)
    seen: set[str] = set()
    rows = []
    while len(rows) < PROBLEMS:
        kind = rng.choice(KINDS)
        question, work, result = kind(rng, rng.choice(NAMES), rng.choice(THINGS))
        if question in seen:
            continue
        seen.add(question)
        rows.append({"question": question, "answer": f"{work}\n#### {result}"})
    return rows


def word_problem_split(split: str) -> list[dict[str, str]]:
    """The rows of ``split``: "test" (also "validation", "heldout"), the first :data:`HELDOUT`, or "train", the rest;
    raises ValueError for another split."""
    rows = word_problem_rows()
    if split in ("test", "heldout", "validation"):
        return rows[:HELDOUT]
    if split == "train":
        return rows[HELDOUT:]
    raise ValueError(f"builtin:word-problems has splits train and test, not {split!r}")


# Two worked problems in the reference recipe's format, one adding and one taking away; a preset shows them to the
# model as earlier turns of the chat (few_shot_examples) so that a small instruct model writes the tags sometimes.
EXAMPLES = (
    "Q: Tom has 3 apples and buys 4 more apples. How many apples does Tom have now?\n"
    "A: <reasoning>\nTom has 3 apples and buys 4 more, so he has 3 + 4 = 7 apples.\n</reasoning>\n<answer>\n7\n"
    "</answer>\n"
    "Q: A box holds 10 pens. Kim takes 6 of them. How many pens are left in the box?\n"
    "A: <reasoning>\nThe box had 10 pens and Kim took 6, so 10 - 6 = 4 pens are left.\n</reasoning>\n<answer>\n4\n"
    "</answer>"
)
