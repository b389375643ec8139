"""Reward timings, measured in one run on this machine.

    python bench/rewards.py

1. scoring one group of 16 code completions against 10 unit tests each (target: under 5 s), side by side: in the
   bubblewrap sandbox (what code_tests does) and with the same judge but no isolation (what
   --allow-unisolated-code gives), so the cost of isolation itself shows;
2. throughput of the text rewards (the reference five + math_correctness) in completions per second.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    """Print both timings."""
    from trainer.scoring.rewards import REWARDS

    solution = "```python\ndef add(a, b):\n    return a + b\n```"
    wrong = "```python\ndef add(a, b):\n    return a - b\n```"
    tests = [f"assert add({i}, {i + 1}) == {2 * i + 1}" for i in range(10)]
    completions = [solution, wrong] * 8
    reward = REWARDS["code_tests"]
    figures = {}
    for label, isolated in (("bubblewrap sandbox", True), ("no isolation", False)):
        timings = []
        with _isolation(isolated):
            for _ in range(3):
                started = time.perf_counter()
                scores = reward(prompts=[None] * 16, completions=completions, tests=[tests] * 16)
                timings.append(time.perf_counter() - started)
        assert scores == [1.0, 0.0] * 8
        figures[label] = timings
    print("code_tests: a group of 16 completions x 10 tests (median of 3 runs; target < 5 s)")
    for label, timings in figures.items():
        median = statistics.median(timings)
        print(
            f"{label:>20}: {median:.2f} s, {median / 16 * 1000:.0f} ms per completion "
            f"(runs: {[round(t, 2) for t in timings]})"
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


@contextlib.contextmanager
def _isolation(isolated: bool):
    """Run code_tests as usual, or as --allow-unisolated-code does where no sandbox can be built."""
    from trainer.scoring import sandbox

    if isolated:
        yield
        return
    saved = (sandbox._probed, os.environ.get(sandbox.ALLOW_UNISOLATED_ENV))
    sandbox._probed = (time.monotonic(), "unisolated for the comparison")
    os.environ[sandbox.ALLOW_UNISOLATED_ENV] = "1"
    sandbox.log.disabled = True  # its warning about running unisolated is the point here, not news
    try:
        yield
    finally:
        sandbox.log.disabled = False
        sandbox._probed = saved[0]
        if saved[1] is None:
            os.environ.pop(sandbox.ALLOW_UNISOLATED_ENV)
        else:
            os.environ[sandbox.ALLOW_UNISOLATED_ENV] = saved[1]


if __name__ == "__main__":
    main()
