"""Time from `grpo-studio run` to the demo's first logged step, split by phase, beside ``import trl`` in a fresh
interpreter (the floor any TRL-based tool pays) as a ratio; with ``--ref``, an older revision's total beside it.

    python bench/first_step.py [--ref REV] [--runs 1] [--detach]

Runs ``python -m app.cli run`` on examples/tiny-offline.yaml (shortened to 2 steps) in a fresh data dir and takes
the first step's time as the wall time its metrics were logged at. The split comes from the worker's
"trainer ready" log line (data set, model, TRL import and prompt check, trainer construction) and TRL's own
``step_time`` of step 1; what is left is start-up: the interpreter, imports, the config checks, the run row.
``--detach`` measures ``run --detach`` instead, the detached worker the dashboard's Launch button starts. ``--ref``
unpacks that revision (``git archive``) and measures it the same way, alternating with the working tree; an
older revision without the log line gets its total only.

Each run starts from an empty data dir, as a newcomer's first run does: the built-in model ships prebuilt, so nothing
is built. An older revision (``--ref``), which built it on first use, finds the shipped files linked into its cache
instead, so both sides measure the same work.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PHASES = ("data set", "model", "TRL import and prompt check", "trainer construction")
READY = re.compile(r"trainer ready in ([\d.]+) s: " + ", ".join(rf"{p} ([\d.]+) s" for p in PHASES))


def measure(code: Path, config: Path, models: Path | None, home: Path, detach: bool) -> dict[str, float]:
    """One launch of ``code``'s CLI in the empty data dir ``home`` (``models`` linked in as its model cache, for an
    older revision): the total to the first step and whatever split its worker logged."""
    home.mkdir()
    if models is not None:
        (home / "models").symlink_to(models)
    env = {**os.environ, "GRPO_STUDIO_HOME": str(home), "PYTHONPATH": str(code)}
    env.pop("DATABASE_URL", None)
    command = [sys.executable, "-m", "app.cli", "run", str(config)] + (["--detach"] if detach else [])
    launched = time.time()
    subprocess.run(command, cwd=code, env=env, check=True, capture_output=True)
    database = home / "grpo-studio.db"
    while True:  # a detached worker is still training: wait for its run to end
        with sqlite3.connect(database) as db:
            status = db.execute("SELECT status FROM runs").fetchone()[0]
        if status not in ("queued", "running"):
            break
        time.sleep(0.5)
    with sqlite3.connect(database) as db:
        assert status == "completed", db.execute("SELECT error FROM runs").fetchone()[0]
        first = db.execute("SELECT min(wall_time) FROM metrics WHERE step = 1").fetchone()[0]
        step_time = db.execute("SELECT value FROM metrics WHERE step = 1 AND key = 'step_time'").fetchone()[0]
        log = " ".join(row[0] for row in db.execute("SELECT message FROM run_logs"))
        evaluation = db.execute("SELECT value FROM metrics WHERE step = 0 AND key = 'heldout/seconds'").fetchone()
    figures = {
        "total": first - launched,
        "first step (TRL step_time)": step_time,
        "before the first step": first - launched - step_time,  # TRL's step itself is not ours, and the noisiest
    }
    ready = READY.search(log)
    if ready:
        phases = dict(zip(PHASES, map(float, ready.groups()[1:])))
        figures |= phases
        figures["start-up, imports, config checks"] = first - launched - step_time - float(ready.group(1))
    if evaluation:  # the demo scores the base model on held-out problems before step 1 (its curve's first point)
        figures["held-out evaluation at step 0"] = evaluation[0]
        if "start-up, imports, config checks" in figures:
            figures["start-up, imports, config checks"] -= evaluation[0]
    return figures


def import_seconds(module: str) -> float:
    """Wall time of ``python -c "import MODULE"`` (interpreter start included)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    """Measure, and print the medians side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", help="an older revision to measure beside the working tree, e.g. main")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--detach", action="store_true", help="measure `run --detach` (the dashboard's Launch)")
    opts = parser.parse_args()

    from trainer.config import RunConfig
    from trainer.loading.tiny import DEFAULT_SPEC, SHIPPED

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "models"  # for an older revision: the shipped model where it looked for its build
        cache.mkdir()
        (cache / DEFAULT_SPEC.cache_name).symlink_to(SHIPPED)
        config, _ = RunConfig.load(ROOT / "examples" / "tiny-offline.yaml")
        config.max_steps, config.save_steps = 2, 100
        config_path = Path(tmp) / "demo.yaml"
        config.save(config_path)
        trees = {"now": ROOT}
        if opts.ref:
            old = Path(tmp) / "ref"
            old.mkdir()
            archive = subprocess.run(["git", "archive", opts.ref], cwd=ROOT, check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            trees = {opts.ref: old, "now": ROOT}
        results: dict[str, list[dict]] = {name: [] for name in trees}
        for run in range(opts.runs):
            for name, code in trees.items() if run % 2 == 0 else reversed(trees.items()):
                home = Path(tmp) / f"home-{len(results[name])}-{name.replace('/', '_')}"
                results[name].append(measure(code, config_path, None if code == ROOT else cache, home, opts.detach))
                results[name][-1]["import trl (fresh interpreter)"] = import_seconds("trl")
    rows = list(dict.fromkeys(key for runs in results.values() for figures in runs for key in figures))
    how = "run --detach" if opts.detach else "run"
    print(f"`grpo-studio {how}` -> first logged step of the demo, median of {opts.runs} (seconds)")
    print(f"{'':36}" + "".join(f"{name:>12}" for name in results))
    for row in rows:
        cells = [[f[row] for f in runs if row in f] for runs in results.values()]
        print(f"{row:36}" + "".join(f"{statistics.median(c):12.2f}" if c else f"{'-':>12}" for c in cells))
    for name, runs in results.items():
        ratio = statistics.median(f["total"] / f["import trl (fresh interpreter)"] for f in runs)
        print(f"{name}: first step / import trl = {ratio:.2f} (the same run's two figures, median of {len(runs)})")
    print(f"load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
