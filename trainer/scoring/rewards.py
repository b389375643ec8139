"""Reward functions, in one registry keyed by the names run configs use (``reward_funcs``).

Every reward has TRL's signature ``f(prompts, completions, **columns) -> list[float | None]``: ``completions`` are
plain strings or chat messages (a list with one assistant message each), the reference answer arrives as the data
set column ``answer``. ``None`` means "not applicable to this sample" (TRL skips it), never a silent 0.

The reference five come from the seed script, with its defects fixed to do what each rule means:

- ``soft_format`` matches across lines (the seed's ``.`` without DOTALL never matched multi-line reasoning);
- ``int`` accepts "-3" and "1,000" and rejects "²" (``str.isdigit`` did the opposite);
- answers are compared after normalising "1,000"/"1000", "$18"/"18", "18.0"/"18", " 18 "/"18"; a comma counts only
  as a thousands separator (groups of three), so "1,0,0,0", "10,00" and "2,5" are not the number 1000 or 25 (issue 24);
- a completion without an ``<answer>`` tag has no answer (the seed "extracted" its whole text); with several
  blocks the last complete one counts, with nested tags the innermost;
- ``strict_format`` accepts the final newline missing, since chat templates often strip it;
- ``strict_format``'s blocks may not contain another format tag (a repeated answer block no longer "matches");
- ``xmlcount``'s trailing-text penalty is capped at 0.5, so a 100 kB ramble can't outweigh everything else;
- ``int`` and ``correctness`` read ASCII digits only: "١٢" is not 12 (a model writing Arabic-Indic digits is
  not answering in the format the reference uses).

docs/grpo.md's table lists every case where a reward scores differently from the seed script, with both values;
tests/rewards/test_reward_reference.py runs the seed's functions on those cases and checks the table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from trainer.scoring.custom_rewards import RewardFunc, load_custom_reward


class RewardSettings(Protocol):
    """The settings a run's rewards are built from; a RunConfig has them all. A protocol rather than RunConfig itself:
    the config's review imports this registry, so the registry names no config module (no two folders import each
    other, docs/architecture.md)."""

    reward_funcs: list[str]
    length_penalty_max_tokens: int


# The innermost complete block: "<answer><answer>4</answer>" answers "4", not "<answer>4".
_ANSWER = re.compile(r"<answer>((?:(?!<answer>).)*?)</answer>", re.DOTALL)
# Block contents may not contain a format tag: otherwise ".*?" stretches across a repeated tag and "matches".
_BODY = r"(?:(?!</?(?:reasoning|answer)>).)*?"
_STRICT = re.compile(rf"<reasoning>\n{_BODY}\n</reasoning>\n<answer>\n{_BODY}\n</answer>\n?", re.DOTALL)
_SOFT = re.compile(r"\s*<reasoning>.*?</reasoning>\s*<answer>.*?</answer>", re.DOTALL)
WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)")
# Commas in a number are thousands separators or nothing: "1,000" and "-12,345.5" are numbers, while "2,5" (a decimal
# comma), "10,00" and "1,0,0,0" (a list) are not. Stripping every comma made all of those "equal" 1000 or 25.
_THOUSANDS = re.compile(r"[+-]?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]*)?")
# A lone number written with commas, grouped right or not; and a thousands-grouped number inside longer text.
_COMMA_NUMBER = re.compile(r"[+-]?[0-9][0-9,]*,[0-9,]*(\.[0-9]*)?")
_GROUPED = re.compile(r"(?<![0-9,.])[0-9]{1,3}(?:,[0-9]{3})+(?![0-9,])")


# --- text helpers ---------------------------------------------------------------------------------------------------
def completion_text(completion: Any) -> str:
    """The text of a completion, whether a plain string or chat messages (the assistant turns joined)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    return "".join(str(m.get("content") or "") for m in completion if isinstance(m, dict))


def extract_answer(text: str) -> str | None:
    """The content of the last ``<answer>…</answer>`` block, stripped; None when there is none."""
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


def normalize_answer(text: str) -> str:
    """Canonical form for comparing answers: "$1,000.0 " -> "1000"; non-numbers (among them "2,5" and "1,0,0,0":
    a comma is only a thousands separator) are only stripped and lower-cased."""
    s = text.strip().rstrip(".").strip()
    number = s.lstrip("$").strip()
    if "," in number:
        if not _THOUSANDS.fullmatch(number):
            return s.lower()  # "2,5", "1,0,0,0": not a number, so only equal to the same text
        number = number.replace(",", "")
    if _NUMBER.fullmatch(number):
        try:
            value = Decimal(number)
        except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
            return s
        value = value.normalize()
        text_value = format(value, "f")
        return "0" if text_value in ("-0", "+0") else text_value
    return s.lower()


def _reference(answer: Any) -> str | None:
    if answer is None:
        return None
    text = str(answer).strip()
    if "####" in text:  # a raw GSM8K answer column: the reference is after "####"
        text = text.split("####")[-1].strip()
    return text or None


# --- the reference five ---------------------------------------------------------------------------------------------
def correctness_reward(prompts, completions, answer=None, **kwargs) -> list[float | None]:
    """2.0 when the ``<answer>`` equals the reference after normalisation, else 0.0; None without a reference.

    Example: "<answer>\\n$1,000\\n</answer>" with answer "1000" -> 2.0.
    """
    answers = answer if answer is not None else [None] * len(completions)
    out: list[float | None] = []
    for completion, ref in zip(completions, answers):
        ref = _reference(ref)
        if ref is None:
            out.append(None)
            continue
        got = extract_answer(completion_text(completion))
        out.append(2.0 if got is not None and normalize_answer(got) == normalize_answer(ref) else 0.0)
    return out


def int_reward(prompts, completions, **kwargs) -> list[float | None]:
    """0.5 when the extracted answer is a whole number (ASCII digits, sign and thousands commas allowed), else 0.0.

    Example: "<answer>-3</answer>" -> 0.5; "<answer>²</answer>" -> 0.0.
    """
    out: list[float | None] = []
    for completion in completions:
        got = extract_answer(completion_text(completion))
        normal = normalize_answer(got) if got is not None else ""
        out.append(0.5 if WHOLE_NUMBER.fullmatch(normal) else 0.0)
    return out


def strict_format_reward(prompts, completions, **kwargs) -> list[float | None]:
    """0.5 when the whole completion is exactly ``<reasoning>\\n…\\n</reasoning>\\n<answer>\\n…\\n</answer>`` (final
    newline optional), else 0.0.

    Example: "<reasoning>\\n2+2\\n</reasoning>\\n<answer>\\n4\\n</answer>" -> 0.5.
    """
    return [0.5 if _STRICT.fullmatch(completion_text(c)) else 0.0 for c in completions]


def soft_format_reward(prompts, completions, **kwargs) -> list[float | None]:
    """0.5 when the completion opens with a reasoning block followed by an answer block, whitespace tolerant.

    Example: "<reasoning>a\\nb</reasoning> <answer>4</answer>" -> 0.5.
    """
    return [0.5 if _SOFT.match(completion_text(c)) else 0.0 for c in completions]


def xmlcount_score(text: str) -> float:
    """0.125 per tag that appears exactly once in its place, minus 0.001 per character after ``</answer>`` (at most
    0.5 off). Range -0.5 to 0.5."""
    score = 0.0
    if text.count("<reasoning>\n") == 1:
        score += 0.125
    if text.count("\n</reasoning>\n") == 1:
        score += 0.125
    if text.count("\n<answer>\n") == 1:
        score += 0.125
    if text.count("\n</answer>") == 1:
        score += 0.125
        trailing = text.split("\n</answer>")[-1].strip()  # whitespace after the tag is not text
        score -= min(len(trailing) * 0.001, 0.5)
    return score


def xmlcount_reward(prompts, completions, **kwargs) -> list[float | None]:
    """Partial credit for the format's four tags (see :func:`xmlcount_score`).

    Example: "<reasoning>\\nx\\n</reasoning>\\n<answer>\\n1\\n</answer>" -> 0.5.
    """
    return [xmlcount_score(completion_text(c)) for c in completions]


# --- more rewards ---------------------------------------------------------------------------------------------------
def math_correctness_reward(prompts, completions, answer=None, **kwargs) -> list[float | None]:
    """2.0 when math-verify finds the ``<answer>`` (or a ``\\boxed{}``) equal to the reference, else 0.0.

    Fractions, LaTeX and equivalent forms count as equal ("1/2" vs "0.5"). When the reference itself can't be
    parsed, the reward does not apply to that sample (None) rather than punishing every answer.
    Example: "<answer>\\frac{1}{2}</answer>" with answer "0.5" -> 2.0.
    """
    from math_verify import parse, verify

    answers = answer if answer is not None else [None] * len(completions)
    out: list[float | None] = []
    for completion, ref in zip(completions, answers):
        ref = _math_text(_reference(ref))
        gold = parse(ref) if ref else []
        if not gold:
            out.append(None)
            continue
        text = completion_text(completion)
        got = extract_answer(text)
        pred_text = _math_text(got if got is not None else text)
        pred = parse(pred_text) if pred_text else []
        out.append(2.0 if pred and verify(gold, pred) else 0.0)
    return out


def without_thousands(text: str) -> str:
    """``text`` with each thousands-grouped number written plain ("1,000 apples" -> "1000 apples"); any other comma
    ("2,5", "1,0,0,0", "a, b") stays: the comma rule the rewards compare answers by (see ``_THOUSANDS``)."""
    return _GROUPED.sub(lambda m: m.group(0).replace(",", ""), text)


def _math_text(text: str | None) -> str | None:
    """``text`` for math-verify: thousands separators removed ("1,000" -> "1000"); None for a lone number with any
    other comma ("2,5", "1,0,0,0"), which is not a number here. math-verify alone reads "2,5" as 2.5 and "1,0,0,0"
    as 1.0; other commas (a set, an interval) are left to it."""
    if text is None:
        return None
    bare = text.strip().lstrip("$").strip().rstrip(".")
    if _COMMA_NUMBER.fullmatch(bare) and not _THOUSANDS.fullmatch(bare):
        return None
    return without_thousands(text)


def get_length_penalty(max_tokens: int = 200, per_token: float = 0.002, cap: float = 1.0) -> RewardFunc:
    """A reward of ``-per_token`` for each completion token past ``max_tokens``, floored at ``-cap``.

    The default cap (1.0) is half the correctness reward, so a long right answer still beats a short wrong one.
    Example (max_tokens=10): a 60-token completion -> -0.1.
    """

    def length_penalty_reward(prompts, completions, completion_ids=None, **kwargs) -> list[float | None]:
        if completion_ids is not None:
            lengths = [len(ids) for ids in completion_ids]
        else:  # no token ids (e.g. a dry run): about four characters per token
            lengths = [len(completion_text(c)) // 4 for c in completions]
        return [-min(max(n - max_tokens, 0) * per_token, cap) for n in lengths]

    return length_penalty_reward


_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(text: str) -> str | None:
    """The code of a completion: the last fenced block, else the ``<answer>`` content, else None."""
    blocks = _FENCE.findall(text)
    if blocks:
        return blocks[-1]
    answer = extract_answer(text)
    return answer if answer else None


def get_code_tests_reward(limits=None, workers: int | None = None) -> RewardFunc:
    """Fraction of a sample's unit tests (data set column ``tests``) its code passes; no code, a syntax error, a
    timeout or a crash score 0.0; None where a sample has no tests. Always within [0, 1].

    Each completion runs in its own sandbox (:mod:`trainer.scoring.sandbox`), which only returns the values its functions
    compute; the tests are judged here (:mod:`trainer.scoring.judge`), so the code can't claim results. A group's completions
    run in parallel. Raises SandboxUnavailable where code can't be isolated and the operator hasn't accepted that
    (validation refuses such a config first). Example: code passing 3 of 4 tests -> 0.75.
    """

    def code_tests_reward(prompts, completions, tests=None, **kwargs) -> list[float | None]:
        import json

        from trainer.scoring.sandbox import Limits, run_many

        n = len(completions)
        if tests is None:
            return [None] * n
        out: list[float | None] = [None] * n
        jobs, where = [], []
        for i, (completion, case) in enumerate(zip(completions, tests)):
            if isinstance(case, str):
                case = json.loads(case)
            if not case:
                continue
            code = extract_code(completion_text(completion))
            if code is None:
                out[i] = 0.0
                continue
            jobs.append((code, list(case)))
            where.append(i)
        for i, verdict in zip(where, run_many(jobs, limits or Limits(), workers)):
            out[i] = verdict.score
        return out

    return code_tests_reward


@dataclass(frozen=True)
class Reward:
    """One reward as configs name it, declared once with its kind: the function (a parameterised one with its
    defaults, for validation, the form's list and direct calls), how a run builds its own from its config, and what
    it pays for. Every list of rewards of a kind is derived from these declarations, so a new reward has its kind
    in one place (the review's "only format rewards" warning, the probe's advice and the alerts' read it)."""

    func: RewardFunc
    # it scores the answer's form only (tags, an integer, the length), never whether the answer is right: a mix of
    # these alone stops varying within a group once the model follows the format
    format_only: bool = False
    # it pays for part of the format, so answers that all miss the whole format still score differently
    partial_credit: bool = False
    # how a run builds its own from its config's values (None: ``func`` as it is)
    factory: Callable[[RewardSettings], RewardFunc] | None = None


# The names run configs use, each declared once (a run builds a parameterised one from its config, see get_rewards).
DECLARED: dict[str, Reward] = {
    "correctness": Reward(correctness_reward),
    "math_correctness": Reward(math_correctness_reward),
    "int": Reward(int_reward, format_only=True),
    "strict_format": Reward(strict_format_reward, format_only=True),
    "soft_format": Reward(soft_format_reward, format_only=True, partial_credit=True),
    "xmlcount": Reward(xmlcount_reward, format_only=True, partial_credit=True),
    "length_penalty": Reward(
        get_length_penalty(),
        format_only=True,
        factory=lambda config: get_length_penalty(max_tokens=config.length_penalty_max_tokens),
    ),
    "code_tests": Reward(get_code_tests_reward()),
}
REWARDS: dict[str, RewardFunc] = {name: reward.func for name, reward in DECLARED.items()}
REWARD_FACTORIES: dict[str, Callable[[RewardSettings], RewardFunc]] = {
    name: reward.factory for name, reward in DECLARED.items() if reward.factory is not None
}
FORMAT_ONLY: frozenset[str] = frozenset(name for name, reward in DECLARED.items() if reward.format_only)
PARTIAL_CREDIT: tuple[str, ...] = tuple(name for name, reward in DECLARED.items() if reward.partial_credit)


def resolve_reward(name: str) -> RewardFunc:
    """The reward function for a config name, with its default parameters: a registry key or a custom
    ``file.py:function``."""
    return REWARDS[name] if name in REWARDS else load_custom_reward(name)


def get_rewards(config: RewardSettings) -> list[RewardFunc]:
    """The run's reward functions in the order of ``config.reward_funcs``, parameterised ones built from the config's
    values (``length_penalty``'s token budget), each named by its config name: TRL logs ``rewards/<__name__>/mean``
    and keys the completions table by it, so the dashboard shows the names the user chose."""
    rewards = []
    for name in config.reward_funcs:
        factory = REWARD_FACTORIES.get(name)
        rewards.append(_named(factory(config) if factory else resolve_reward(name), name.rsplit(":", 1)[-1]))
    return rewards


def _named(func: RewardFunc, name: str) -> RewardFunc:
    def reward(prompts, completions, **kwargs) -> list[float | None]:
        return func(prompts=prompts, completions=completions, **kwargs)

    reward.__name__ = reward.__qualname__ = name
    reward.__doc__ = func.__doc__
    return reward
