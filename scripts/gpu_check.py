"""GPU check: a short GRPO run on each available model path, side by side.

    python scripts/gpu_check.py [--model Qwen/Qwen2.5-0.5B-Instruct | /path/to/local/model] [--steps 20]

For every path this machine can take (plain transformers + PEFT always; Unsloth + vLLM when Unsloth is installed;
TRL + vLLM colocate when vLLM is installed), trains the same short run in a fresh process and prints time per step,
generated tokens per second, the training's peak GPU memory and, separately, what vLLM reserved up front (its
weights and KV cache take a fixed share of the GPU whatever the run needs, so adding it to the training peak would
hide what training itself costs). A run whose recorded path is not the one asked for (say, a plain run in the
Unsloth row) is reported as such, not measured under the wrong label.

The default model is small, public and of an architecture Unsloth supports; ``--model`` also takes a local directory
(a machine without hub access can carry one). The built-in tiny model always takes the plain path. Uses a
throw-away data dir. On a machine without a GPU it says so and exits 1.
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

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
# Each row: the config's backend setting, whether it generates with vLLM, and how the recorded path must begin
# (trainer.loading.backend.Backend.describe) for the row to be labelled truthfully.
PATHS = {
    "plain": ("plain", False, "plain transformers + PEFT"),
    "unsloth": ("unsloth", True, "Unsloth"),
    "trl+vllm": ("trl", True, "TRL + vLLM colocate"),
}
GIB = 2**30


def available_paths(has_module=lambda name: importlib.util.find_spec(name) is not None) -> list[str]:
    """The rows this machine can measure: plain always, Unsloth with unsloth installed, TRL + vLLM with vllm."""
    return ["plain"] + (["unsloth"] if has_module("unsloth") else []) + (["trl+vllm"] if has_module("vllm") else [])


def label_problem(path: str, backend: str | None) -> str | None:
    """Why a run cannot stand in the ``path`` row (it took another path), or None."""
    expected = PATHS[path][2]
    if backend and backend.startswith(expected):
        return None
    return f"asked for the {path} path but the run took: {backend or 'no recorded path'}"


def parser() -> argparse.ArgumentParser:
    """The command line (also read by the tests)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=DEFAULT_MODEL, help="hub id or local directory (default %(default)s)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--path", choices=sorted(PATHS), help=argparse.SUPPRESS)  # internal: measure one path, print JSON
    return p


def _count_vllm_reservation(record: dict) -> None:
    """Wrap vllm.LLM's constructor (TRL's colocate engine and Unsloth's both build one: trl 1.16
    generation/vllm_generation.py:347, unsloth_zoo 2026.10.9 vllm_utils.py:5320) to record the GPU memory it takes:
    device-wide (``device``, also what an engine-core process holds) and through this process's torch allocator
    (``torch``, which the training peak would otherwise include)."""
    import torch
    import vllm

    original = vllm.LLM.__init__

    def counting_init(self, *args, **kwargs):
        free_before, allocated_before = torch.cuda.mem_get_info()[0], torch.cuda.memory_allocated()
        original(self, *args, **kwargs)
        record["device"] += free_before - torch.cuda.mem_get_info()[0]
        record["torch"] += torch.cuda.memory_allocated() - allocated_before

    vllm.LLM.__init__ = counting_init


def measure(path: str, model: str, steps: int) -> dict:
    """Train one short run on ``path`` in this process; return its figures."""
    backend_setting, use_vllm, _ = PATHS[path]
    if path == "unsloth":
        import unsloth  # noqa: F401  first, as the worker does: it patches trl/transformers/peft on import
    import torch

    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.job.worker import run_worker
    from trainer.presets import tiny_demo

    reservation = {"device": 0, "torch": 0}
    if use_vllm and importlib.util.find_spec("vllm"):
        _count_vllm_reservation(reservation)
    config = tiny_demo()
    config.name, config.model_name_or_path, config.backend = f"gpu-check-{path}", model, backend_setting
    config.max_steps, config.save_steps, config.use_vllm = steps, steps * 10, use_vllm
    if model != "builtin:tiny":
        config.lora_target_modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, config.name, config.to_dict(), steps).id
    torch.cuda.reset_peak_memory_stats()
    status = run_worker(run_id)
    with get_sessionmaker().begin() as s:
        run = queries.get_run(s, run_id)
        # skip the two warm-up steps when there are more (a shorter run keeps its last step: no division by zero)
        step_times = [p.value for p in queries.metric_series(s, run_id, "step_time")]
        lengths = [p.value for p in queries.metric_series(s, run_id, "completions/mean_length")]
        step_times, lengths = step_times[2:] or step_times[-1:], lengths[2:] or lengths[-1:]
        error, backend = run.error, run.backend
    if status.value != "completed":
        return {"path": path, "error": (error or status.value).strip().splitlines()[-1], "backend": backend}
    problem = label_problem(path, backend)
    if problem:
        return {"path": path, "error": problem, "backend": backend}
    if not step_times or not lengths:
        return {"path": path, "error": "the run logged no step times", "backend": backend}
    per_step = sum(step_times) / len(step_times)
    completions = config.per_device_train_batch_size * config.gradient_accumulation_steps
    tokens = sum(lengths) / len(lengths) * completions
    return {
        "path": path,
        "backend": backend,
        "seconds_per_step": per_step,
        "tokens_per_second": tokens / per_step,
        "train_gib": (torch.cuda.max_memory_allocated() - reservation["torch"]) / GIB,
        "vllm_gib": reservation["device"] / GIB if use_vllm else None,
    }


def table(results: list[dict]) -> str:
    """The rows as printed: one per path, failures with their reason."""
    lines = [f"{'path':<9} {'s/step':>8} {'tokens/s':>10} {'train GiB':>10} {'vLLM GiB':>9}  recorded path"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['path']:<9} failed: {r['error']}")
            continue
        vllm = "-" if r.get("vllm_gib") is None else f"{r['vllm_gib']:.2f}"
        lines.append(
            f"{r['path']:<9} {r['seconds_per_step']:>8.3f} {r['tokens_per_second']:>10.0f} "
            f"{r['train_gib']:>10.2f} {vllm:>9}  {r['backend']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure each available path in its own process and print them side by side."""
    args = parser().parse_args(argv)
    if args.path:
        print("@@" + json.dumps(measure(args.path, args.model, args.steps)))
        return 0

    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU visible: nothing to check")
        return 1
    paths = available_paths()
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
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
