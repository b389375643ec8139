"""Overhead of grpo-studio's worker over a bare GRPOTrainer script, measured side by side in one invocation.

    python bench/overhead.py [--steps 40] [--rounds 5]

Both sides train the same builtin:tiny config (examples/tiny-offline.yaml, shortened, no checkpoint and no held-out
evaluation inside the measured steps) in a fresh process each, one process at a time, alternating which side goes
first so that machine noise hits both alike. Time per step is TRL's own
``train_runtime`` / steps on each side: the training loop with whatever runs inside it (for grpo-studio, the
metric/sample callback and its database writer), excluding process start and model loading, which are the same
code on both sides.

The verdict is the median of the per-round ratios (grpo-studio / bare, each round's two runs back to back), target
<= 1.03; every ratio is printed with the spread, because on a shared 2-core machine one round can be off by 20 %. Beside
it: the database writer thread's own CPU time per step (it runs while TRL computes), each process's time in the garbage
collector, and the load average before and after.

The studio side uses a throw-away database; the built-in model comes from the usual cache ($GRPO_STUDIO_HOME).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gc_timer  # noqa: E402

# The worker's own entry point, with the GC timer of bench/gc_timer.py installed first.
STUDIO_MAIN = (
    "import sys, runpy; sys.path.insert(0, 'bench'); import gc_timer; gc_timer.install(); "
    "sys.argv = ['worker', sys.argv[1]]; runpy.run_module('trainer.job.worker', run_name='__main__')"
)


@dataclass
class Side:
    """One process's figures: seconds per step, of which outside TRL's training step; GC seconds; writer CPU s."""

    per_step: float
    outside: float
    gc_seconds: float
    writer_cpu: float = 0.0


def main() -> None:
    """Run the comparison and print per-step times and their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--eval-steps",
        type=int,
        default=0,
        help="held-out evaluation every N steps on the worker's side (what it costs)",
    )
    opts = parser.parse_args()

    from trainer.config import RunConfig
    from trainer.loading.tiny import tiny_model_dir

    tiny_model_dir()  # build once up front, outside either measurement
    config, _ = RunConfig.load(ROOT / "examples" / "tiny-offline.yaml")
    config.max_steps = opts.steps
    config.save_steps = opts.steps * 10  # no checkpoint inside the measured loop on either side
    # nor held-out evaluation (unless --eval-steps): the demo's eval_steps (100 greedy answers every 10 steps) is work
    # the user asked for, which the bare script does not do; counted, it would be charged to the worker's watching
    config.eval_steps = opts.eval_steps
    load_before = os.getloadavg()
    bare: list[Side] = []
    studio: list[Side] = []
    with tempfile.TemporaryDirectory() as tmp:
        config_path = Path(tmp) / "bench.yaml"
        config.save(config_path)
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/bench.db", "PYTHONPATH": str(ROOT)}
        for round_ in range(opts.rounds):
            # alternate which side goes first, so a machine that slows down (or speeds up) within a round
            # doesn't always favour the same side
            for side in ("studio", "bare") if round_ % 2 else ("bare", "studio"):
                if side == "bare":
                    bare.append(_bare(config_path, Path(tmp) / f"bare{round_}", env))
                else:
                    studio.append(_studio(config, env))
            print(
                f"round {round_ + 1}: bare {bare[-1].per_step * 1000:.1f} ms/step, grpo-studio "
                f"{studio[-1].per_step * 1000:.1f} ms/step, ratio {studio[-1].per_step / bare[-1].per_step:.3f}",
                flush=True,
            )
    ratios = [s.per_step / b.per_step for s, b in zip(studio, bare)]
    verdict = statistics.median(ratios)
    b_step = statistics.median(x.per_step for x in bare)
    s_step = statistics.median(x.per_step for x in studio)
    writer = statistics.median(x.writer_cpu for x in studio) / opts.steps
    outside = statistics.median(x.outside for x in studio) - statistics.median(x.outside for x in bare)
    print(
        f"per-round ratios grpo-studio / bare, in round order: {', '.join(f'{r:.3f}' for r in ratios)}\n"
        f"median per-round ratio {verdict:.3f} (target <= 1.03: {'met' if verdict <= 1.03 else 'NOT met'}); spread "
        f"{min(ratios):.3f} .. {max(ratios):.3f}\n"
        f"median ms/step over {opts.rounds} rounds of {opts.steps} steps: bare GRPOTrainer {b_step * 1000:.1f}, "
        f"grpo-studio worker {s_step * 1000:.1f}\n"
        f"database writer thread CPU: {writer * 1000:.2f} ms per step ({writer / b_step:.2%} of a bare step)\n"
        f"time outside TRL's training step (optimizer, callbacks, logging): grpo-studio adds {outside * 1000:.1f} ms "
        f"= {outside / b_step:.1%} of a step\n"
        f"garbage collector per process (whole run, loading included), median: bare "
        f"{statistics.median(x.gc_seconds for x in bare):.2f} s, grpo-studio "
        f"{statistics.median(x.gc_seconds for x in studio):.2f} s\n"
        f"held-out evaluation on the worker's side: {f'every {opts.eval_steps} steps' if opts.eval_steps else 'none'}\n"
        f"load average (1/5/15 min) before {_load(load_before)}, after {_load(os.getloadavg())} on {os.cpu_count()} CPUs"
    )


def _load(avg: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.1f}" for x in avg)


def _bare(config_path: Path, output_dir: Path, env: dict) -> Side:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bare_grpo.py"), str(config_path), str(output_dir)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    steps = result["steps"]
    return Side(
        result["train_runtime"] / steps,
        (result["train_runtime"] - result["step_time"]) / steps,
        gc_timer.parse(out.stderr)["seconds"],
    )


def _studio(config, env: dict) -> Side:
    from sqlalchemy.orm import sessionmaker

    from storage import queries
    from storage.db import make_engine
    from storage.models import RunStatus

    engine = make_engine(env["DATABASE_URL"])
    with sessionmaker(engine).begin() as s:
        run_id = queries.create_run(s, "bench", config.to_dict(), config.max_steps).id
    out = subprocess.run(
        [sys.executable, "-c", STUDIO_MAIN, str(run_id)], env=env, cwd=ROOT, check=True, capture_output=True, text=True
    )
    with sessionmaker(engine).begin() as s:
        run = queries.get_run(s, run_id)
        assert run.status is RunStatus.COMPLETED, run.error
        runtime = queries.last_metric(s, run_id, "train_runtime")
        step_time = sum(p.value for p in queries.metric_series(s, run_id, "step_time"))
        steps = run.current_step
    engine.dispose()
    writer = re.findall(r"database writer: ([\d.]+) s of CPU time", out.stderr)
    return Side(
        runtime / steps, (runtime - step_time) / steps, gc_timer.parse(out.stderr)["seconds"], float(writer[-1])
    )


if __name__ == "__main__":
    main()
