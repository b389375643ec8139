"""How many CPU threads the built-in model should use: warm-up steps and demo GRPO steps, 1 thread vs 2.

    python bench/threads.py [--sft-steps 40] [--grpo-steps 6] [--threads 1 2]

Each measurement runs in a fresh process (torch's thread pool is per process), one after the other, and prints the
load average before and after it: on a CPU that other processes use too, a timing means little without it. The GRPO
measurement trains the demo preset on the built-in model of the data dir ($GRPO_STUDIO_HOME), which is built first
if it is not cached (that build is not timed).

Measured on the 2-core development machine (issue 12):
  idle (load average 0.2-0.9): warm-up 60 steps 8.5 s on 1 thread, 6.7 s on 2; demo GRPO 10 steps 2.8 s vs 2.2 s
  busy (load average ~5, other test suites running; the previous built-in model, under cProfile): 6 GRPO steps of
  batch 64, 4.3 s on 1 thread, 70.1 s on 2
The tiny model's matrix products (96 wide) are too small to split well; with the cores busy, a second thread mostly
spin-waits at every product. One thread costs a fifth when the machine is idle and saves 16x when it is not, which is
why trainer.loading.tiny.use_tiny_threads() asks for one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def child(kind: str, threads: int, steps: int) -> float:
    """Seconds for ``steps`` warm-up steps (``sft``) or demo GRPO steps (``grpo``) on ``threads`` threads."""
    import trainer.loading.tiny as tiny

    if kind == "grpo":
        from app.web.widgets.form import tiny_demo
        from trainer.job.worker import build_trainer

        tiny.tiny_model_dir()  # build (untimed) before the thread count under test applies
        tiny.TINY_THREADS = threads  # what load_model sets for the built-in model
        config = dataclasses.replace(tiny_demo(), max_steps=steps, save_steps=10_000)
        with tempfile.TemporaryDirectory() as tmp:
            trainer = build_trainer(config, Path(tmp), [], lambda _: None, disable_tqdm=True)
            started = time.perf_counter()
            trainer.train()
            return time.perf_counter() - started
    tiny.TINY_THREADS = threads  # what build_tiny_model sets for the warm-up
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        tiny.build_tiny_model(Path(tmp), dataclasses.replace(tiny.DEFAULT_SPEC, sft_steps=steps))
        return time.perf_counter() - started


def main() -> None:
    """Run every (kind, threads) measurement in a fresh process; print one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft-steps", type=int, default=40)
    parser.add_argument("--grpo-steps", type=int, default=6)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--child", nargs=3, metavar=("KIND", "THREADS", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, threads, steps = args.child
        print(json.dumps({"seconds": child(kind, int(threads), int(steps))}))
        return
    for kind, steps in (("sft", args.sft_steps), ("grpo", args.grpo_steps)):
        for threads in args.threads:
            before = os.getloadavg()[0]
            out = subprocess.run(
                [sys.executable, __file__, "--child", kind, str(threads), str(steps)],
                capture_output=True,
                text=True,
                check=True,
            )
            seconds = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
            row = {"kind": kind, "steps": steps, "threads": threads, "seconds": round(seconds, 1)}
            row["load_average"] = [round(before, 2), round(os.getloadavg()[0], 2)]
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
