"""The reference rewards on literal strings, each seed defect fixed, chat and plain completions alike."""

from __future__ import annotations

import pytest

from trainer import review
from trainer.scoring.custom_rewards import load_custom_reward
from trainer.scoring.rewards import (
    REWARDS,
    correctness_reward,
    extract_answer,
    int_reward,
    normalize_answer,
    soft_format_reward,
    strict_format_reward,
    xmlcount_reward,
)

GOOD = "<reasoning>\n3 + 4 = 7\n</reasoning>\n<answer>\n7\n</answer>\n"


def chat(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def score(func, texts, **kwargs):
    return func(prompts=[None] * len(texts), completions=texts, **kwargs)


def test_registry_names():
    assert {
        "correctness",
        "int",
        "strict_format",
        "soft_format",
        "xmlcount",
        "math_correctness",
        "length_penalty",
    } <= set(REWARDS)


def test_each_registered_name_scores_by_its_own_rule():
    """Each name a config uses is wired to the rule it names: four completions that tell the rules apart give each
    reward its own row of scores, so a swapped or mis-wired entry fails here, not only a missing one."""
    texts = [
        GOOD,  # right and in the strict format
        "<reasoning>a</reasoning> <answer>7.5</answer>",  # soft format only, wrong, not whole
        "<reasoning>\nx\n</reasoning>\n<answer>\n7\n</answer>\nmore",  # right, trailing text: not strict
        "7",  # no tags: no answer, though math-verify reads the bare text
    ]
    got = {name: score(func, texts, answer=["7"] * 4) for name, func in REWARDS.items()}
    assert got == {
        "correctness": [2.0, 0.0, 2.0, 0.0],
        "math_correctness": [2.0, 0.0, 2.0, 2.0],
        "int": [0.5, 0.0, 0.5, 0.0],
        "strict_format": [0.5, 0.0, 0.0, 0.0],
        "soft_format": [0.5, 0.5, 0.5, 0.0],
        "xmlcount": [0.5, 0.0, pytest.approx(0.496), 0.0],
        "length_penalty": [0.0, 0.0, 0.0, 0.0],  # all within the 200-token budget
        "code_tests": [None] * 4,  # no tests column: applies to no sample
    }


@pytest.mark.parametrize("got", ["1,0,0,0", "10,00", "100,0", "1,00,0", "1000,000"])
def test_a_comma_that_groups_no_thousands_is_not_a_number(got):
    """Issue 24: stripping every comma made "1,0,0,0" and "10,00" equal 1000 (2.0). A comma is a thousands
    separator (groups of three) or not part of a number."""
    texts = [f"<answer>{got}</answer>"]
    assert score(correctness_reward, texts, answer=["1000"]) == [0.0]
    assert score(REWARDS["math_correctness"], texts, answer=["1000"]) == [0.0]
    assert score(int_reward, texts) == [0.0]
    assert normalize_answer(got) == got  # only stripped and lower-cased, like any text


def test_a_decimal_comma_is_not_a_number():
    texts = ["<answer>2,5</answer>"]
    assert score(correctness_reward, texts, answer=["25"]) == [0.0]
    assert score(REWARDS["math_correctness"], texts, answer=["25"]) == [0.0]  # math-verify alone reads 2.5
    assert score(REWARDS["math_correctness"], texts, answer=["2.5"]) == [0.0]
    assert score(correctness_reward, texts, answer=["2,5"]) == [2.0]  # the same text is still the same answer


@pytest.mark.parametrize(("got", "reference"), [("1,000", "1000"), ("1000", "1,000"), ("-1,234,567.50", "-1234567.5")])
def test_thousands_separators_still_count(got, reference):
    texts = [f"<answer>{got}</answer>"]
    assert score(correctness_reward, texts, answer=[reference]) == [2.0]
    assert score(REWARDS["math_correctness"], texts, answer=[reference]) == [2.0]


def test_math_correctness_reads_thousands_inside_text():
    assert score(REWARDS["math_correctness"], ["so \\boxed{1,000}"], answer=["1000"]) == [2.0]


def test_perfect_answer_scores_the_reference_values():
    assert score(correctness_reward, [GOOD], answer=["7"]) == [2.0]
    assert score(int_reward, [GOOD]) == [0.5]
    assert score(strict_format_reward, [GOOD]) == [0.5]
    assert score(soft_format_reward, [GOOD]) == [0.5]
    assert score(xmlcount_reward, [GOOD]) == [0.5]


def test_chat_completions_score_like_plain_strings():
    for func in (int_reward, strict_format_reward, soft_format_reward, xmlcount_reward):
        assert score(func, [chat(GOOD)]) == score(func, [GOOD])
    assert score(correctness_reward, [chat(GOOD)], answer=["7"]) == [2.0]


@pytest.mark.parametrize("got", ["1,000", "$1000", "1000.0", " 1000 ", "1000."])
def test_equivalent_number_forms_are_correct(got):
    assert score(correctness_reward, [f"<answer>{got}</answer>"], answer=["1000"]) == [2.0]


def test_no_answer_tag_has_no_answer():
    assert extract_answer("7") is None
    assert score(correctness_reward, ["7"], answer=["7"]) == [0.0]
    assert score(int_reward, ["7"]) == [0.0]


def test_missing_reference_is_not_applicable():
    assert score(correctness_reward, [GOOD], answer=[None]) == [None]
    assert score(correctness_reward, [GOOD]) == [None]


def test_int_accepts_negatives_and_rejects_unicode_digits_and_decimals():
    assert score(
        int_reward, ["<answer>-3</answer>", "<answer>²</answer>", "<answer>2.5</answer>", "<answer>١٢</answer>"]
    ) == [0.5, 0.0, 0.0, 0.0]


def test_soft_format_matches_multiline_reasoning():
    text = "<reasoning>line one\nline two</reasoning>  <answer>4</answer>"
    assert score(soft_format_reward, [text]) == [0.5]
    assert score(strict_format_reward, [text]) == [0.0]


def test_strict_format_tolerates_a_stripped_final_newline():
    assert score(strict_format_reward, [GOOD.rstrip("\n")]) == [0.5]
    assert score(strict_format_reward, [GOOD + "extra"]) == [0.0]


def test_repeated_tags_use_the_last_answer_and_lose_xmlcount():
    text = "<reasoning>\nx\n</reasoning>\n<answer>\n1\n</answer>\n<answer>\n2\n</answer>"
    assert extract_answer(text) == "2"
    assert score(xmlcount_reward, [text]) == [0.25]


def test_xmlcount_penalises_trailing_text_with_a_cap():
    assert score(xmlcount_reward, [GOOD.rstrip("\n") + "\n" + "x" * 100]) == [pytest.approx(0.4)]
    huge = GOOD.rstrip("\n") + "\n" + "x" * 100_000
    assert score(xmlcount_reward, [huge]) == [0.0]


def test_empty_completion_scores_zero_everywhere():
    for func in (int_reward, strict_format_reward, soft_format_reward, xmlcount_reward):
        assert score(func, [""]) == [0.0]
    assert score(correctness_reward, [""], answer=["1"]) == [0.0]


def test_normalize_answer():
    assert (
        normalize_answer("-0.50") == "-0.5"
        and normalize_answer("$18") == "18"
        and normalize_answer("Paris ") == "paris"
    )


def test_math_correctness_understands_equivalent_forms():
    func = REWARDS["math_correctness"]
    assert score(func, ["<answer>\\frac{1}{2}</answer>", "<answer>0.3</answer>"], answer=["0.5", "0.5"]) == [2.0, 0.0]


def test_length_penalty_counts_tokens_past_the_budget():
    from trainer.scoring.rewards import get_length_penalty

    penalty = get_length_penalty(max_tokens=10, per_token=0.01, cap=0.5)
    assert penalty(prompts=[None] * 3, completions=["a", "b", "c"], completion_ids=[[0] * 5, [0] * 30, [0] * 500]) == [
        0.0,
        pytest.approx(-0.2),
        -0.5,
    ]


def test_a_runs_length_penalty_takes_its_token_budget_from_the_config():
    from trainer.config import RunConfig
    from trainer.scoring.rewards import get_rewards

    ids = [[0] * 5, [0] * 60]
    (penalty,) = get_rewards(RunConfig(reward_funcs=["length_penalty"], length_penalty_max_tokens=10))
    assert penalty(prompts=[None] * 2, completions=["a", "b"], completion_ids=ids) == [0.0, pytest.approx(-0.1)]
    (default,) = get_rewards(RunConfig(reward_funcs=["length_penalty"]))  # budget 200: both are within it
    assert default(prompts=[None] * 2, completions=["a", "b"], completion_ids=ids) == [0.0, 0.0]


def test_a_runs_rewards_are_named_by_their_config_names_in_config_order(tmp_path):
    """TRL logs rewards/<__name__>/mean: the names must be the ones the user chose (a custom one by its function)."""
    from trainer.config import RunConfig
    from trainer.scoring.rewards import get_rewards

    mine = tmp_path / "mine.py"
    mine.write_text(
        "def short(prompts, completions, **kw):\n    return [1.0 if len(c) < 20 else 0.0 for c in completions]\n"
    )
    rewards = get_rewards(RunConfig(reward_funcs=["xmlcount", f"{mine}:short", "correctness"]))
    assert [r.__name__ for r in rewards] == ["xmlcount", "short", "correctness"]
    assert [r(prompts=[None], completions=[GOOD], answer=["7"]) for r in rewards] == [[0.5], [0.0], [2.0]]


def test_custom_reward_is_imported_and_dry_run(tmp_path):
    good = tmp_path / "mine.py"
    good.write_text(
        "def short(prompts, completions, **kw):\n    return [1.0 if len(c) < 20 else 0.0 for c in completions]\n"
    )
    assert load_custom_reward(f"{good}:short")(prompts=[None], completions=["hi"]) == [1.0]
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def one(prompts, completions, **kw):\n    return [1.0]\n\ndef text(prompts, completions, **kw):\n    return ['a', 'b']\n"
    )
    with pytest.raises(ValueError, match="one score per completion"):
        load_custom_reward(f"{bad}:one")
    with pytest.raises(ValueError, match="a float or None per completion"):
        load_custom_reward(f"{bad}:text")
    with pytest.raises(ValueError, match="has no function missing"):
        load_custom_reward(f"{bad}:missing")
    with pytest.raises(ValueError, match="no such file"):
        load_custom_reward(f"{tmp_path}/nothere.py:f")


def test_strict_format_rejects_a_repeated_answer_block():
    text = "<reasoning>\n18 + 9 = 7\n</reasoning>\n<answer>\n22\n</answer>x<answer>\n<answer>\n</answer>"
    assert score(strict_format_reward, [text]) == [0.0]


def test_reward_mix_warnings():
    from trainer.review.rewards import reward_mix_warnings

    assert reward_mix_warnings(["correctness", "xmlcount"], [1.0, 1.0], ["4"], False) == []
    format_only, only_int = reward_mix_warnings(["int"], [1.0], ["4", "12"], False)
    assert "format rewards" in format_only and "whole numbers" in only_int
    assert "no tests column" in reward_mix_warnings(["code_tests"], [1.0], ["x"], False)[0]
    assert "every reward weight is 0" in reward_mix_warnings(["correctness"], [0.0], ["4"], False)[0]


def test_each_rewards_kind_is_declared_once_and_read_by_the_warning_and_the_probe():
    """Issue 60.2: a reward's kind lives in its one declaration (trainer.scoring.rewards.DECLARED), and the sets the
    review and the probe read are derived from it: the "only format rewards" warning fires for a mix of every
    format-only reward and for each alone, never once another reward is in the mix, and a reward that pays part of
    the format is a format reward."""
    from trainer.probe import report
    from trainer.review.rewards import reward_mix_warnings
    from trainer.scoring.rewards import DECLARED, FORMAT_ONLY, PARTIAL_CREDIT

    def warned(names: list[str]) -> bool:
        found = reward_mix_warnings(names, [1.0] * len(names), ["7"], has_tests=True)
        return any(w.startswith("only format rewards") for w in found)

    format_only = [name for name, reward in DECLARED.items() if reward.format_only]
    assert set(DECLARED) == set(REWARDS) and set(format_only) == FORMAT_ONLY
    assert warned(format_only) and all(warned([name]) for name in format_only)
    assert [name for name in DECLARED if name not in FORMAT_ONLY and warned([*format_only, name])] == []
    assert PARTIAL_CREDIT and set(PARTIAL_CREDIT) <= FORMAT_ONLY
    assert report.PARTIAL_CREDIT is PARTIAL_CREDIT  # the probe's advice names the declared ones


def test_config_warns_about_a_format_only_mix_on_arithmetic():
    from trainer.config import RunConfig

    warnings = review.warnings(RunConfig(dataset_name="builtin:arithmetic", reward_funcs=["int"]))
    assert any("whole numbers" in w for w in warnings)
    assert review.warnings(RunConfig(model_name_or_path="builtin:tiny", dataset_name="builtin:arithmetic")) == []


def test_nested_tags_take_the_innermost_complete_answer():
    text = "<reasoning>\n<answer>3</answer> no, wait\n</reasoning>\n<answer>\n<answer>4</answer>\n</answer>"
    assert extract_answer(text) == "4"  # the last complete block; a stray outer tag is not an answer
    assert score(strict_format_reward, [text]) == [0.0]


def test_decimals_and_negatives_compare_by_value():
    texts = ["<answer>18.50</answer>", "<answer>-0.5</answer>", "<answer>+7</answer>", "<answer>١٢</answer>"]
    assert score(correctness_reward, texts, answer=["18.5", "-.5", "7", "12"]) == [2.0, 2.0, 2.0, 0.0]


@pytest.mark.timeout(60)  # a hang guard against a regex that backtracks without end
def test_a_100_kb_completion_is_scored_sanely():

    huge = "<reasoning>\n" + "think " * 17_000 + "\n</reasoning>\n<answer>\n42\n</answer>"
    assert len(huge) > 100_000
    results = {
        f.__name__: score(f, [huge], answer=["42"])
        for f in (correctness_reward, int_reward, strict_format_reward, soft_format_reward, xmlcount_reward)
    }
    assert results == {
        "correctness_reward": [2.0],
        "int_reward": [0.5],
        "strict_format_reward": [0.5],
        "soft_format_reward": [0.5],
        "xmlcount_reward": [0.5],
    }


def test_rewards_without_a_reference_or_tests_do_not_apply():
    assert REWARDS["math_correctness"](prompts=[None], completions=["<answer>1</answer>"], answer=["not math ??"]) == [
        None
    ]
    assert REWARDS["code_tests"](prompts=[None], completions=["```python\nx=1\n```"], tests=[[]]) == [None]
