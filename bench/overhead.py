"""Overhead of grpo-studio's worker over a bare GRPOTrainer script, measured side by side in one invocation.

    python bench/overhead.py [--steps 40] [--rounds 3]

Both sides train the same builtin:tiny config (examples/tiny-offline.yaml, shortened) in a fresh process each, one
process at a time, alternating which side goes first so that machine noise hits both alike. Time per step is TRL's own
``train_runtime`` / steps on each side: the training loop with whatever runs inside it (for grpo-studio, the
metric/sample callback and its database writer), excluding process start and model loading, which are the same
code on both sides. Target: ratio <= 1.03.

The studio side uses a throw-away database; the built-in model comes from the usual cache ($GRPO_STUDIO_HOME).
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
sys.path.insert(0, str(ROOT))


def main() -> None:
    """Run the comparison and print per-step times and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()

    from trainer.config import RunConfig
    from trainer.loading.tiny import tiny_model_dir

    tiny_model_dir()  # build once up front, outside either measurement
    config, _ = RunConfig.load(ROOT / "examples" / "tiny-offline.yaml")
    config.max_steps = opts.steps
    config.save_steps = opts.steps * 10  # no checkpoint inside the measured loop on either side
    with tempfile.TemporaryDirectory() as tmp:
        config_path = Path(tmp) / "bench.yaml"
        config.save(config_path)
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/bench.db", "PYTHONPATH": str(ROOT)}
        bare, studio, outside_bare, outside_studio = [], [], [], []
        for round_ in range(opts.rounds):
            # alternate which side goes first, so a machine that slows down (or speeds up) within a round
            # doesn't always favour the same side
            if round_ % 2:
                studio_round = _studio(config, env)
                bare_round = _bare(config_path, Path(tmp) / f"bare{round_}", env)
            else:
                bare_round = _bare(config_path, Path(tmp) / f"bare{round_}", env)
                studio_round = _studio(config, env)
            bare.append(bare_round[0])
            studio.append(studio_round[0])
            outside_bare.append(bare_round[1])
            outside_studio.append(studio_round[1])
            print(
                f"round {round_ + 1}: bare {bare[-1] * 1000:.1f} ms/step, grpo-studio {studio[-1] * 1000:.1f} ms/step"
            )
    b, s = statistics.median(bare), statistics.median(studio)
    paired = sorted(x / y for x, y in zip(studio, bare))
    print(
        f"median over {opts.rounds} rounds of {opts.steps} steps: bare GRPOTrainer {b * 1000:.1f} ms/step, "
        f"grpo-studio worker {s * 1000:.1f} ms/step, ratio {s / b:.3f} (target <= 1.03)\n"
        f"per-round ratios, sorted: {', '.join(f'{r:.3f}' for r in paired)} (median {statistics.median(paired):.3f})\n"
        f"time per step outside TRL's training step (optimizer, callbacks, logging; less noisy): bare "
        f"{statistics.median(outside_bare) * 1000:.1f} ms, grpo-studio {statistics.median(outside_studio) * 1000:.1f} ms, "
        f"so grpo-studio adds {(statistics.median(outside_studio) - statistics.median(outside_bare)) * 1000:.1f} ms "
        f"= {(statistics.median(outside_studio) - statistics.median(outside_bare)) / b:.1%} of a step"
    )


def _bare(config_path: Path, output_dir: Path, env: dict) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bare_grpo.py"), str(config_path), str(output_dir)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["train_runtime"] / result["steps"], (result["train_runtime"] - result["step_time"]) / result["steps"]


def _studio(config, env: dict) -> tuple[float, float]:

    from sqlalchemy.orm import sessionmaker

    from storage import queries
    from storage.db import make_engine
    from storage.models import RunStatus

    engine = make_engine(env["DATABASE_URL"])
    with sessionmaker(engine).begin() as s:
        run_id = queries.create_run(s, "bench", config.to_dict(), config.max_steps).id
    subprocess.run(
        [sys.executable, "-m", "trainer.job.worker", str(run_id)], env=env, cwd=ROOT, check=True, capture_output=True
    )
    with sessionmaker(engine).begin() as s:
        run = queries.get_run(s, run_id)
        assert run.status is RunStatus.COMPLETED, run.error
        runtime = queries.last_metric(s, run_id, "train_runtime")
        step_time = sum(p.value for p in queries.metric_series(s, run_id, "step_time"))
        steps = run.current_step
    engine.dispose()
    return runtime / steps, (runtime - step_time) / steps


if __name__ == "__main__":
    main()
