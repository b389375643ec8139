"""GPU check: a short GRPO run on each available model path, side by side.

    python scripts/gpu_check.py [--model builtin:tiny] [--steps 20]

For every path this machine can take (plain transformers + PEFT always; Unsloth + vLLM when the `gpu` extra is
installed), trains the same short run in a fresh process and prints time per step, generated tokens per second and
peak GPU memory. Uses a throw-away data dir (the built-in model is built there when chosen). On a machine without a
GPU it says so and exits 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measure(path: str, model: str, steps: int) -> dict:
    """Train one short run on ``path`` in this process; return its figures."""
    import torch

    from app.form import tiny_demo
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.worker import run_worker

    config = tiny_demo()
    config.name, config.model_name_or_path, config.backend = f"gpu-check-{path}", model, path
    config.max_steps, config.save_steps, config.use_vllm = steps, steps * 10, path == "unsloth"
    if model != "builtin:tiny":
        config.lora_target_modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, config.name, config.to_dict(), steps).id
    torch.cuda.reset_peak_memory_stats()
    status = run_worker(run_id)
    with get_sessionmaker().begin() as s:
        run = queries.get_run(s, run_id)
        step_times = [p.value for p in queries.metric_series(s, run_id, "step_time")][2:]  # skip warm-up steps
        lengths = [p.value for p in queries.metric_series(s, run_id, "completions/mean_length")][2:]
        error, backend = run.error, run.backend
    if status.value != "completed":
        return {"path": path, "error": (error or status.value).strip().splitlines()[-1], "backend": backend}
    per_step = sum(step_times) / len(step_times)
    completions = config.per_device_train_batch_size * config.gradient_accumulation_steps
    tokens = sum(lengths) / len(lengths) * completions
    return {
        "path": path,
        "backend": backend,
        "seconds_per_step": per_step,
        "tokens_per_second": tokens / per_step,
        "peak_gpu_gib": torch.cuda.max_memory_allocated() / 2**30,
    }


def main() -> int:
    """Measure each available path in its own process and print them side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:tiny")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--path", help=argparse.SUPPRESS)  # internal: measure one path and print JSON
    args = parser.parse_args()
    if args.path:
        print("@@" + json.dumps(measure(args.path, args.model, args.steps)))
        return 0

    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU visible: nothing to check")
        return 1
    paths = ["plain"] + (["unsloth"] if importlib.util.find_spec("unsloth") else [])
    print(f"GPU: {torch.cuda.get_device_name(0)}; model {args.model}; {args.steps} steps; paths: {', '.join(paths)}")
    results = []
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "GRPO_STUDIO_HOME": home, "PYTHONPATH": str(ROOT)}
        env.pop("DATABASE_URL", None)
        for path in paths:
            out = subprocess.run(
                [sys.executable, __file__, "--path", path, "--model", args.model, "--steps", str(args.steps)],
                env=env,
                capture_output=True,
                text=True,
            )
            line = next((x for x in out.stdout.splitlines() if x.startswith("@@")), None)
            results.append(json.loads(line[2:]) if line else {"path": path, "error": out.stderr.strip()[-300:]})
    print(f"{'path':<10} {'s/step':>8} {'tokens/s':>10} {'peak GiB':>9}  backend")
    for r in results:
        if "error" in r:
            print(f"{r['path']:<10} failed: {r['error']}")
        else:
            print(
                f"{r['path']:<10} {r['seconds_per_step']:>8.3f} {r['tokens_per_second']:>10.0f} "
                f"{r['peak_gpu_gib']:>9.2f}  {r['backend']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
