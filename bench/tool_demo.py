"""The calculator demo's figures (issue 42): ``grpo-studio run tiny-calculator`` on three seeds, each in a fresh data
directory, as a newcomer runs it; per seed the wall time of the whole command (a build of the model included, when
the shipped one doesn't fit the installed code), the held-out greedy correctness at step 0 and at the end (the
worker's own ``heldout/correct``, 100 problems, answers that call the calculator), the share of those greedy answers
that call it (``heldout/tool_calls``) and TRL's ``tools/call_frequency`` (calls per sampled completion) at the first
and last logged steps, and whether the issue's bar (+30 points within 10 minutes) was met.

    PYTHONPATH=. python bench/tool_demo.py [--seeds 42 43 44] [--set max_steps=40]

The load average is printed beside the figures: on a shared machine the wall time says as much about the neighbours
as about the demo.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PRESET = Path(__file__).resolve().parents[1] / "trainer" / "presets" / "tiny-calculator.yaml"
BAR_POINTS = 30.0
BAR_SECONDS = 600.0


def run_seed(seed: int, changes: dict, home: Path) -> dict:
    """Run the preset at ``seed`` (with ``changes``) in the data directory ``home``; its figures."""
    config = yaml.safe_load(PRESET.read_text())
    config.update(changes, seed=seed, name=f"tiny-calculator-seed{seed}")
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "GRPO_STUDIO_HOME": str(home)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "run", str(path)], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"seed {seed}: the run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return {"seed": seed, "seconds": seconds, **read_figures(home)}


def read_figures(home: Path) -> dict:
    """The run's held-out and tool figures, read from the data directory's database in a child process (the
    database's engine is made once per process, for the directory it first sees)."""
    code = (
        "import json\n"
        "from storage import queries\n"
        "from storage.db import get_sessionmaker\n"
        "with get_sessionmaker().begin() as s:\n"
        "    run = queries.list_runs(s)[0]\n"
        "    out = {k: [(p.step, p.value) for p in queries.metric_series(s, run.id, k)]\n"
        "           for k in ('heldout/correct', 'heldout/tool_calls', 'tools/call_frequency')}\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "GRPO_STUDIO_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    import json

    series = json.loads(out.stdout.strip().splitlines()[-1])
    return {key.replace("/", "_"): values for key, values in series.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--set", action="append", default=[], help="key=value changed in the preset (YAML value)")
    args = parser.parse_args(argv)
    changes = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}
    print(f"preset {PRESET.name}, changes {changes or 'none'}, load average at start {os.getloadavg()}")
    met = 0
    for seed in args.seeds:
        with tempfile.TemporaryDirectory(prefix="tool-demo-") as home:
            figures = run_seed(seed, changes, Path(home))
        correct, rate, calls = (
            figures["heldout_correct"],
            figures["heldout_tool_calls"],
            figures["tools_call_frequency"],
        )
        gain = 100 * (correct[-1][1] - correct[0][1])
        ok = gain >= BAR_POINTS and figures["seconds"] <= BAR_SECONDS
        met += ok
        print(
            f"seed {seed}: {figures['seconds']:.0f} s; held-out greedy correct {100 * correct[0][1]:.0f}% (step 0) -> "
            f"{100 * correct[-1][1]:.0f}% (step {correct[-1][0]}), {gain:+.0f} points; greedy answers calling the "
            f"calculator {100 * rate[0][1]:.0f}% -> {100 * rate[-1][1]:.0f}%; tools/call_frequency "
            f"{calls[0][1]:.2f} (step {calls[0][0]}) -> {calls[-1][1]:.2f} (step {calls[-1][0]}); "
            f"bar {'met' if ok else 'not met'}; load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        print(f"  held-out curve: {[(s, round(100 * v)) for s, v in correct]}", flush=True)
    print(f"bar (+{BAR_POINTS:.0f} points within {BAR_SECONDS / 60:.0f} min) met on {met} of {len(args.seeds)} seeds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
