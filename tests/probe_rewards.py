"""Rewards for the probe tests (tests/test_probe.py): one the built-in model can never earn, one that returns NaN."""

import math


def _text(completion) -> str:
    return completion if isinstance(completion, str) else completion[0]["content"]


def unearnable(prompts, completions, **kwargs):
    """1.0 for a completion that says the magic word "xyzzy", which the built-in model never writes: 0.0 for all."""
    return [1.0 if "xyzzy" in _text(c) else 0.0 for c in completions]


def sometimes_nan(prompts, completions, **kwargs):
    """NaN for every fourth completion, else its length in characters / 100 (a custom reward gone wrong)."""
    return [math.nan if i % 4 == 0 else len(_text(c)) / 100 for i, c in enumerate(completions)]
