"""The rules of the reward settings: known reward names or custom ``file.py:function`` references (imported and
dry-run when allowed), one weight per function, a sandbox for ``code_tests``; and the warnings about a mix that can't
vary within a group on the run's data (GRPO then has no signal). The registry itself is trainer.scoring.rewards."""

from __future__ import annotations

import re

from trainer.scoring.custom_rewards import custom_reward_errors_in_child
from trainer.scoring.rewards import FORMAT_ONLY, REWARDS, WHOLE_NUMBER, normalize_answer
from trainer.scoring.sandbox import code_tests_refusal

# A custom reward: "path/to/file.py:function" or "package.module:function".
CUSTOM_REWARD = re.compile(r"^[^:]+(\.py)?:[A-Za-z_]\w*$")


def reward_problems(reward_funcs: list[str], reward_weights: list[float], import_custom: bool) -> list[str]:
    """Known reward names or custom ``file.py:function`` references (imported and dry-run with ``import_custom``;
    offered in the message only then), one weight per function, and a sandbox for ``code_tests``. Each problem names
    its setting first, so the form marks that field. The custom ones are imported in a child process, never in this
    one (trainer.scoring.custom_rewards.custom_reward_errors_in_child)."""
    problems = []
    custom = []
    if not reward_funcs:
        problems.append("reward_funcs is empty: choose at least one reward function")
    for name in reward_funcs:
        if name in REWARDS:
            continue
        if CUSTOM_REWARD.match(name):
            custom += [name] if import_custom else []
            continue
        own = " or give path/to/file.py:function" if import_custom else ""
        problems.append(
            f"reward_funcs: unknown reward function {name!r}: choose from {', '.join(sorted(REWARDS))}{own}"
        )
    problems.extend(custom_reward_errors_in_child(custom))
    if reward_weights and len(reward_weights) != len(reward_funcs):
        problems.append(
            f"reward_weights: {len(reward_weights)} reward weights for {len(reward_funcs)} reward functions: "
            "give one weight per function, or none for all 1.0"
        )
    # code_tests without isolation here, unless the operator accepted the risk
    if "code_tests" in reward_funcs and (refusal := code_tests_refusal()):
        problems.append(f"reward_funcs: {refusal}")
    return problems


def reward_mix_warnings(
    reward_funcs: list[str], weights: list[float], sample_answers: list, has_tests: bool
) -> list[str]:
    """Warnings (not errors) about a reward selection that can't vary within a group on this data, which gives GRPO
    no signal: every answer of a group scores the same, std 0, advantage 0.

    ``sample_answers`` are a few reference answers of the data set; ``has_tests`` says whether it has a tests column.
    """
    active = [name for name, w in zip(reward_funcs, weights) if w != 0]
    warnings = []
    if not active:
        return ["every reward weight is 0: the total reward is constant and nothing is learned"]
    if set(active) <= FORMAT_ONLY:
        warnings.append(
            f"only format rewards ({', '.join(active)}): once the model follows the format, every answer in a group "
            "scores the same (reward std 0) and learning stops; add correctness or math_correctness"
        )
    if (
        active == ["int"]
        and sample_answers
        and all(WHOLE_NUMBER.fullmatch(normalize_answer(str(a))) for a in sample_answers)
    ):
        warnings.append(
            "only int on a data set whose answers are all whole numbers: a model that always answers with "
            "one gets the same reward on every completion"
        )
    if "code_tests" in active and not has_tests:
        warnings.append("code_tests is selected but the data set has no tests column: it applies to no sample")
    if {"correctness", "math_correctness"} & set(active) and sample_answers and not any(sample_answers):
        warnings.append("correctness is selected but the data set's answers are empty: it applies to no sample")
    return warnings
