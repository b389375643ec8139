"""What a launcher's warm parent buys: runs started one after another from one launcher, warm and fresh, side by side.

    python bench/warm_start.py [--runs 4] [--rounds 2]

One launcher process per round and mode, on a throw-away data dir, starts ``--runs`` tiny 3-step runs one after
another (each to its end) the way the dashboard does (trainer.supervise.start.start_worker): once as shipped, once
with ``GRPO_STUDIO_WARM_START=0`` (every worker a fresh process). The modes alternate, and each measures the
machine's busy CPU-seconds (/proc/stat) over its launcher's life. Prints, per mode, the seconds from a launch to the
run's first step for the first run and for the later ones (medians), and the ratio of the CPU-seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAUNCHER = """
import json, sys, time
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, run_row, tiny_config, wait_for
from trainer.loading.tiny import tiny_model_dir
from trainer.supervise.start import start_worker
from trainer.supervise import warm_start

tiny_model_dir()
firsts = []
for i in range(int(sys.argv[1])):
    run_id = create_run(tiny_config(name=f"bench-{i}", max_steps=3))
    launched = time.monotonic()
    with get_sessionmaker().begin() as s:
        start_worker(s, queries.get_run(s, run_id))
    wait_for(lambda: run_row(run_id).current_step >= 1, 300, "the first step", interval=0.05)
    firsts.append(time.monotonic() - launched)
    wait_for(lambda: run_row(run_id).status.terminal, 300, "the run's end", interval=0.05)
    if warm_start._parent is not None:  # give the warm parent its import time, as a user's pause between runs does
        wait_for(lambda: warm_start._parent.look() or warm_start._parent.ready or warm_start._parent.gone, 60, "it")
print(json.dumps(firsts))
"""


def busy_seconds() -> float:
    """The machine's busy CPU-seconds since boot (user + nice + system + irq + softirq + steal), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def one_round(runs: int, warm: bool) -> tuple[list[float], float]:
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as home:
        env = {
            **os.environ,
            "GRPO_STUDIO_HOME": home,
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
            "GRPO_STUDIO_WARM_START": "1" if warm else "0",
        }
        env.pop("DATABASE_URL", None)
        before = busy_seconds()
        done = subprocess.run(
            [sys.executable, "-c", LAUNCHER, str(runs)], env=env, capture_output=True, text=True, timeout=1200
        )
        cpu = busy_seconds() - before
        if done.returncode:
            raise SystemExit(done.stdout + done.stderr)
        return json.loads(done.stdout.strip().splitlines()[-1]), cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results = {True: [], False: []}
    for _ in range(args.rounds):
        for warm in (True, False):
            results[warm].append(one_round(args.runs, warm))
    for warm, name in ((True, "warm (as shipped)"), (False, "fresh (GRPO_STUDIO_WARM_START=0)")):
        firsts = [r[0][0] for r in results[warm]]
        later = [x for r in results[warm] for x in r[0][1:]]
        cpu = [r[1] for r in results[warm]]
        print(
            f"{name:34s} launch to first step: first run {statistics.median(firsts):5.1f} s, later runs "
            f"{statistics.median(later):5.1f} s; machine CPU per round {statistics.median(cpu):6.1f} s"
        )
    ratio = sum(r[1] for r in results[True]) / sum(r[1] for r in results[False])
    print(f"CPU-seconds, warm / fresh: {ratio:.2f} ({args.rounds} rounds of {args.runs} runs each)")


if __name__ == "__main__":
    main()
