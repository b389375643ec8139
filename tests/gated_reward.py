"""A reward that waits at a gate: each call on a real comparison blocks until the file ``compare-gate-open`` exists in
the data directory (``$GRPO_STUDIO_HOME``, which a served dashboard shares with its test), then scores 0.0. A
browser test holds Compare's "Sample both" in its base side's scoring with it, to read the page while it runs and
to cancel it there, whatever the machine's speed; tests/test_browser_page_says.py opens the gate.

The loader's dry run (two sample completions answering "4") passes at once; every wait ends after 120 s, so a test
that fails before opening the gate leaves no call blocked for longer."""

import os
import time
from pathlib import Path

GATE = "compare-gate-open"
LONGEST_S = 120.0


def gate() -> Path:
    """The file whose existence opens the gate."""
    return Path(os.environ.get("GRPO_STUDIO_HOME") or Path.home() / ".grpo-studio") / GATE


def gated(prompts, completions, answer=None, **kwargs):
    """0.0 for every completion, once the gate is open (at once on the loader's dry run)."""
    if list(answer or []) != ["4"] * len(completions):
        deadline = time.monotonic() + LONGEST_S
        while not gate().exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    return [0.0] * len(completions)
