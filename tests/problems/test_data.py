"""Data sets: the built-in arithmetic task, GSM8K answer parsing, local files with column mapping."""

from __future__ import annotations

import json
import re

import pytest

from trainer.config import RunConfig
from trainer.loading.data import (
    DataError,
    Problem,
    arithmetic_problems,
    arithmetic_solution,
    build_dataset,
    gsm8k_reference,
    load_problems,
    make_prompt,
)
from trainer.scoring.rewards import correctness_reward, extract_answer, strict_format_reward


def test_arithmetic_splits_are_fixed_and_disjoint():
    train, test = arithmetic_problems("train"), arithmetic_problems("test")
    assert len(test) == 200 and len(train) > 1000
    assert not {p.question for p in train} & {p.question for p in test}
    assert arithmetic_problems("test") == test  # same seed, same order


def test_arithmetic_answers_are_right():
    for p in arithmetic_problems("test"):
        a, op, b = p.question.removeprefix("What is ").removesuffix("?").split()
        assert int(p.answer) == (int(a) + int(b) if op == "+" else int(a) - int(b))


def test_worked_solution_is_in_the_reference_format():
    p = arithmetic_problems("train")[0]
    expression = p.question.removeprefix("What is ").removesuffix("?")
    solution = arithmetic_solution(p)
    assert solution.startswith("<reasoning>\n") and solution.endswith(
        f"\n{expression} = {p.answer}\n</reasoning>\n<answer>\n{p.answer}\n</answer>"
    )


@pytest.mark.parametrize(
    "question, answer, lines",
    [
        ("What is 12 + 19?", "31", ["2 + 9 = 11", "1 + 1 + 1 = 3", "12 + 19 = 31"]),
        ("What is 14 + 5?", "19", ["4 + 5 = 9", "1 + 0 = 1", "14 + 5 = 19"]),
        ("What is 32 - 19?", "13", ["12 - 9 = 3", "3 - 1 - 1 = 1", "32 - 19 = 13"]),
        ("What is 9 + 8?", "17", ["9 + 8 = 17"]),
    ],
)
def test_worked_solution_goes_column_by_column(question, answer, lines):
    reasoning = "\n".join(lines)
    solution = f"<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{answer}\n</answer>"
    assert arithmetic_solution(Problem(question, answer)) == solution


def test_a_forgotten_carry_is_off_by_ten_and_only_where_there_is_a_carry():
    slip = arithmetic_solution(Problem("What is 12 + 19?", "31"), forget_carry=True)
    assert slip == "<reasoning>\n2 + 9 = 11\n1 + 1 = 2\n12 + 19 = 21\n</reasoning>\n<answer>\n21\n</answer>"
    borrow = arithmetic_solution(Problem("What is 32 - 19?", "13"), forget_carry=True)
    assert borrow.endswith("\n3 - 1 = 2\n32 - 19 = 23\n</reasoning>\n<answer>\n23\n</answer>")
    for p in arithmetic_problems("train") + arithmetic_problems("test"):
        right, slipped = arithmetic_solution(p), arithmetic_solution(p, forget_carry=True)
        assert correctness_reward([None], [right], answer=[p.answer]) == [2.0]
        assert strict_format_reward([None], [right]) == [0.5]
        if slipped != right:
            assert abs(int(extract_answer(slipped)) - int(p.answer)) == 10


def test_gsm8k_reference_is_after_the_marker_without_commas():
    assert gsm8k_reference("She pays 3 * 400 = <<3*400=1200>>1200.\n#### 1,200") == "1200"


def test_gsm8k_reference_keeps_a_comma_that_is_no_thousands_separator():
    """Issue 34: stripping every comma made "#### 2,5" the reference 25, against the rewards' comma rule (2,5 is no
    number there); thousands separators still go."""
    assert gsm8k_reference("#### 2,5") == "2,5"
    assert gsm8k_reference("#### 1,234,567") == "1234567" and gsm8k_reference("#### -12,345.5") == "-12345.5"


def test_prompts_are_chat_messages_system_then_question():
    config = RunConfig(dataset_name="builtin:arithmetic", max_train_samples=5)
    ds = build_dataset(config)
    assert len(ds) == 5 and set(ds.column_names) == {"prompt", "question", "answer"}
    assert ds[0]["prompt"] == make_prompt(ds[0]["question"], config.system_prompt)
    assert [m["role"] for m in ds[0]["prompt"]] == ["system", "user"]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_local_file_with_column_mapping(tmp_path, suffix):
    import pandas as pd

    frame = pd.DataFrame({"q": ["What is 1 + 1?", "What is 2 + 5?"], "ref": ["2", "7"], "other": [1, 2]})
    path = tmp_path / f"data{suffix}"
    {
        ".jsonl": lambda: frame.to_json(path, orient="records", lines=True),
        ".csv": lambda: frame.to_csv(path, index=False),
        ".parquet": lambda: frame.to_parquet(path),
    }[suffix]()
    ds = build_dataset(RunConfig(dataset_name=str(path), question_column="q", answer_column="ref"))
    assert ds["question"] == ["What is 1 + 1?", "What is 2 + 5?"] and ds["answer"] == ["2", "7"]


def test_missing_column_names_the_columns_there_are(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"problem": "x", "solution": "1"}) + "\n")
    with pytest.raises(DataError, match="has no column 'question'.*its columns are problem, solution"):
        build_dataset(RunConfig(dataset_name=str(path)))


def test_the_loaders_never_import_the_config_review():
    """trainer.config's review imports the loaders (the data set, model and held-out rules look at them); an import
    back would be a cycle. trainer.loading.data takes what a name names and one rule (a local file has no splits,
    refused at load as at validation) from trainer.config.names, in the config's ground; it reads the config itself
    through its DataSettings protocol."""
    import ast
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys, trainer.loading.data, trainer.loading.backend, trainer.job.trl_args; "
        "print(sorted(m for m in sys.modules if m.startswith('trainer.config')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = ast.literal_eval(out.stdout.strip())
    assert not [m for m in loaded if m.startswith("trainer.review")]
    ground = ("examples", "fields", "file", "keys", "names", "rules", "run_config", "values")
    assert set(loaded) <= {"trainer.config", *(f"trainer.config.{name}" for name in ground)}
    tree = ast.parse((ROOT / "trainer" / "loading" / "data.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert {m for m in imported if m.startswith("trainer.config")} == {
        "trainer.config.names",
        "trainer.config.examples",
    }


def test_prompt_truncation_cuts_only_long_questions_from_the_left():
    """truncate_prompts (TRL without max_prompt_length): a data set that fits comes back as it was; otherwise the
    too-long rows lose the start of their question until they fit, the system prompt and short rows untouched."""
    from trainer.job.trl_args import _prompt_tokens, truncate_prompts
    from trainer.loading.tiny import build_tokenizer

    tokenizer = build_tokenizer()  # the built-in model's tokenizer, trained in a second; no model needed
    config = RunConfig(dataset_name="builtin:arithmetic", max_train_samples=20)
    dataset = build_dataset(config)
    dataset = dataset.map(
        lambda row, i: {
            "prompt": row["prompt"][:-1] + [{"role": "user", "content": "x " * 40 * (i % 2) + row["question"]}]
        },
        with_indices=True,
    )
    lengths = _prompt_tokens(tokenizer, list(dataset["prompt"]))
    limit = min(lengths[i] for i in range(1, 20, 2)) - 5  # every padded row is too long, no plain one is
    assert max(lengths[0::2]) <= limit
    assert truncate_prompts(dataset, tokenizer, max(lengths)) == (dataset, 0)

    cut, count = truncate_prompts(dataset, tokenizer, limit)
    assert count == 10
    assert max(_prompt_tokens(tokenizer, list(cut["prompt"]))) <= limit
    for before, after in zip(dataset["prompt"], cut["prompt"]):
        assert after[0] == before[0]  # the system prompt stays whole
        assert before[-1]["content"].endswith(after[-1]["content"].strip())
    assert cut["prompt"][0] == dataset["prompt"][0] and cut["prompt"][1] != dataset["prompt"][1]


def test_a_limit_the_rest_of_the_prompt_alone_fills_is_refused_not_cut_to_an_empty_question():
    """Worked examples (few_shot_examples) make the fixed part of a prompt long: when it alone fills
    max_prompt_length, cutting the question can't fit the prompt, and the run is refused saying so."""
    import dataclasses

    from trainer.job.trl_args import _prompt_tokens, truncate_prompts
    from trainer.loading.data import make_prompt
    from trainer.loading.tiny import build_tokenizer
    from trainer.loading.word_problems import EXAMPLES

    tokenizer = build_tokenizer()
    config = dataclasses.replace(
        RunConfig(dataset_name="builtin:arithmetic", max_train_samples=4), few_shot_examples=EXAMPLES
    )
    dataset = build_dataset(config)
    (fixed,) = _prompt_tokens(tokenizer, [make_prompt("", config.system_prompt, EXAMPLES)])
    with pytest.raises(ValueError, match=f"leaves no room for a question: .* alone take {fixed} tokens"):
        truncate_prompts(dataset, tokenizer, fixed - 1)
    cut, count = truncate_prompts(dataset, tokenizer, fixed + 3)  # room for a few tokens of each question
    assert count == 4 and all(len(p) == 6 for p in cut["prompt"])  # system, two worked examples, the question


def test_a_local_files_test_split_is_refused_not_ignored(tmp_path):
    """Issue 34: ``dataset_split: test`` on a local file was ignored, so the rows its ``split`` column marks test
    were trained on. A file has no splits: asking for one is refused in one sentence, before and at load."""
    import dataclasses

    from tests.helpers import tiny_config
    from trainer import review

    path = tmp_path / "mixed.jsonl"
    rows = [{"question": f"q{i}", "answer": str(i), "split": "test" if i % 2 else "train"} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = dataclasses.replace(tiny_config(), dataset_name=str(path), dataset_split="test")
    expected = f"dataset_split 'test': {path} is a local file, which has no splits"
    with pytest.raises(DataError, match=re.escape(expected)):
        load_problems(config)
    assert [p for p in review.problems(config, check_rewards=False) if p.startswith(expected)]
    assert len(load_problems(dataclasses.replace(config, dataset_split="train"))) == 6  # every row, as documented
