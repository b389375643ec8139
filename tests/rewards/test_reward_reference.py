"""Our rewards against the seed script's, case by case: every row of docs/grpo.md's table of differences is run
through both, so the table can't claim a difference the code doesn't make (or miss a value it changed).

The seed functions below are the reference script's own (willccbb's GRPO demo: docs/grpo.md § The reference
recipe (the seed script)), on plain strings instead of chat messages.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from trainer.scoring.rewards import REWARDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "grpo.md"
HEADER = "| reward | completion | answer | seed | ours | why |"


# --- the seed script's rewards, verbatim but for taking a string ---------------------------------------------------
def seed_extract_xml_answer(text: str) -> str:
    answer = text.split("<answer>")[-1]
    answer = answer.split("</answer>")[0]
    return answer.strip()


def seed_correctness(text: str, answer: str) -> float:
    return 2.0 if seed_extract_xml_answer(text) == answer else 0.0


def seed_int(text: str, answer: str) -> float:
    return 0.5 if seed_extract_xml_answer(text).isdigit() else 0.0


def seed_strict_format(text: str, answer: str) -> float:
    pattern = r"^<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\n$"
    return 0.5 if re.match(pattern, text) else 0.0


def seed_soft_format(text: str, answer: str) -> float:
    pattern = r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>"
    return 0.5 if re.match(pattern, text) else 0.0


def seed_xmlcount(text: str, answer: str) -> float:
    count = 0.0
    if text.count("<reasoning>\n") == 1:
        count += 0.125
    if text.count("\n</reasoning>\n") == 1:
        count += 0.125
    if text.count("\n<answer>\n") == 1:
        count += 0.125
        count -= len(text.split("\n</answer>\n")[-1]) * 0.001
    if text.count("\n</answer>") == 1:
        count += 0.125
        count -= (len(text.split("\n</answer>")[-1]) - 1) * 0.001
    return count


SEED = {
    "correctness": seed_correctness,
    "int": seed_int,
    "strict_format": seed_strict_format,
    "soft_format": seed_soft_format,
    "xmlcount": seed_xmlcount,
}


# --- the table -------------------------------------------------------------------------------------------------------
def literal(cell: str) -> str:
    """A completion cell: a Python string literal in backticks, or literals joined by ``+`` and repeated by ``*``
    (``"x" * 1000``); nothing else is evaluated."""

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str | int):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mult):
            left, right = value(node.left), value(node.right)
            return left + right if isinstance(node.op, ast.Add) else left * right
        raise ValueError(f"not a literal: {cell}")

    return value(ast.parse(cell.strip().strip("`"), mode="eval").body)


def table_rows() -> list[tuple[str, str, str, float, float]]:
    """(reward, completion, answer, seed value, our value) for each row of the table in docs/grpo.md."""
    lines = DOC.read_text().splitlines()
    start = lines.index(HEADER) + 2  # past the header and its |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        reward, completion, answer, seed, ours, _why = (c.strip() for c in line.strip("|").split("|"))
        rows.append((reward.strip("`"), literal(completion), literal(answer), float(seed), float(ours)))
    return rows


ROWS = table_rows()


def test_the_table_covers_each_reference_reward():
    assert {r[0] for r in ROWS} == set(SEED)
    assert len(ROWS) >= 15


@pytest.mark.parametrize(("reward", "completion", "answer", "seed", "ours"), ROWS, ids=lambda v: repr(v)[:40])
def test_each_documented_difference_is_what_both_functions_return(reward, completion, answer, seed, ours):
    assert SEED[reward](completion, answer) == pytest.approx(seed, abs=1e-9)
    (got,) = REWARDS[reward](prompts=[None], completions=[completion], answer=[answer])
    assert got == pytest.approx(ours, abs=1e-9)
    assert seed != pytest.approx(ours, abs=1e-9)  # a row is a difference, or it doesn't belong in the table


@pytest.mark.parametrize(
    ("completion", "answer"),
    [
        ("<reasoning>\n3 + 4 = 7\n</reasoning>\n<answer>\n7\n</answer>\n", "7"),
        ("<reasoning>\n3 + 4 = 7\n</reasoning>\n<answer>\n8\n</answer>\n", "7"),
        ("<reasoning>\n3 + 4 = 7\n</reasoning>\n<answer>\n1,0,0,0\n</answer>\n", "1000"),
        ("no format at all", "7"),
    ],
)
def test_outside_the_table_both_agree(completion, answer):
    """The common cases (right, wrong, a forged comma number, no format) score the same in both."""
    for name, seed in SEED.items():
        if name == "soft_format" and "\n" in completion:
            continue  # a row of the table: the seed's soft_format matches no text with a newline in a block
        (ours,) = REWARDS[name](prompts=[None], completions=[completion], answer=[answer])
        assert ours == pytest.approx(seed(completion, answer)), name
