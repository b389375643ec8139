"""A sweep's probes in one child process beside one child per member, in one invocation.

    python bench/sweep_probes.py [--rounds 2]

The four members of the 2 x 2 grid the sweep tests use (top_p 1.0, 0.01 x learning_rate 1e-5, 5e-3 on the tests'
tiny config), probed as the dashboard did before (``probe_in_child`` once a member: a child process each, each
importing torch and transformers) and as it does now (``probe_each_in_child``: one child, the members in turn),
alternately, ``--rounds`` times. Prints each time and the ratio one child / one a member; the verdicts of both ways
must be the same. The built-in model comes from the usual cache ($GRPO_STUDIO_HOME).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main() -> None:
    from helpers import tiny_config

    from trainer.probe.job import probe_each_in_child, probe_in_child

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    configs = [
        tiny_config(name=f"probe-{top_p}-{rate}", top_p=top_p, learning_rate=rate)
        for top_p in (1.0, 0.01)
        for rate in (1e-5, 5e-3)
    ]
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    for round_ in range(1, args.rounds + 1):
        started = time.perf_counter()
        each = [probe_in_child(config).verdict for config in configs]
        apart = time.perf_counter() - started
        started = time.perf_counter()
        together = [report.verdict for report in probe_each_in_child(configs)]
        one = time.perf_counter() - started
        assert each == together, (each, together)
        print(
            f"round {round_}: a child per member {apart:.1f} s, one child {one:.1f} s, ratio {one / apart:.2f} "
            f"(verdicts {', '.join(together)})"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
