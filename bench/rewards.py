"""Reward timings, measured in one run on this machine.

    python bench/rewards.py

1. scoring one group of 16 code completions against 10 unit tests each in the sandbox (target: under 5 s);
2. throughput of the text rewards (the reference five + math_correctness) in completions per second.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    """Print both timings."""
    from trainer.rewards import REWARDS

    solution = "```python\ndef add(a, b):\n    return a + b\n```"
    wrong = "```python\ndef add(a, b):\n    return a - b\n```"
    tests = [f"assert add({i}, {i + 1}) == {2 * i + 1}" for i in range(10)]
    completions = [solution, wrong] * 8
    reward = REWARDS["code_tests"]
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        scores = reward(prompts=[None] * 16, completions=completions, tests=[tests] * 16)
        timings.append(time.perf_counter() - started)
    assert scores == [1.0, 0.0] * 8
    print(
        f"code_tests: a group of 16 completions x 10 tests in {statistics.median(timings):.2f} s "
        f"(median of 3: {[round(t, 2) for t in timings]}; target < 5 s)"
    )

    texts = [
        "<reasoning>\n12 + 19 = 31\n</reasoning>\n<answer>\n31\n</answer>\n",
        "<reasoning>thinking\nmore</reasoning> <answer>$1,000</answer> trailing",
        "no tags at all, 42",
        "<answer>\\frac{1}{2}</answer>",
    ] * 250
    answers = ["31", "1000", "42", "0.5"] * 250
    for name in ("correctness", "int", "strict_format", "soft_format", "xmlcount", "math_correctness"):
        func = REWARDS[name]
        started = time.perf_counter()
        func(prompts=[None] * len(texts), completions=texts, answer=answers)
        seconds = time.perf_counter() - started
        print(f"{name:>16}: {len(texts) / seconds:,.0f} completions/s")


if __name__ == "__main__":
    main()
