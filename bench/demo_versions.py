"""The offline demo's time with other code or other libraries, side by side in one invocation.

    python bench/demo_versions.py [--rounds 2] [--rev REV ...] [--overlay SPEC ...]

Each *side* runs ``grpo-studio run tiny-offline`` (the README's demo, 100 steps, held-out evaluation every 10) from
the command to ``run 1 completed``, in a fresh process and a fresh data dir:

- ``HEAD``: this checkout, with the installed libraries;
- ``--rev REV``: the code of a commit (a throw-away ``git worktree``), with the installed libraries: whether the code
  got slower;
- ``--overlay SPEC``: this checkout with a library swapped, e.g. ``transformers==5.17.0+huggingface-hub==1.33.0``
  (Unsloth's pin and the hub it needs; ``pip install --no-deps --target`` into a cache folder, put first on
  ``PYTHONPATH``): whether a library version got slower. ``trl==1.15.0`` fails on a CPU, as it says: its log-probs
  need a Triton kernel (tests/engines/test_trl_compat.py).

A round runs every side once, one after another, in an order rotated each round, so a change in the machine's load
shifts every side alike over the rounds. Printed per side: the median wall time, and where a step's time went (the
worker's ``time/*`` metrics, summed over the 100 steps; a commit older than those timers shows only its wall time),
and the load average around the runs. Run it on quiet cores: each side is about a minute and a half on 2 idle ones.
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

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "grpo-studio" / "bench-overlays"
SHARES = ("generation", "logprobs", "backward", "eval", "writes", "checkpoint", "other")


def overlay_dir(spec: str) -> Path:
    """A folder holding only the packages of ``spec`` (one, or several joined by "+": a library and the version of
    a dependency it needs, say), without their own dependencies; installed once and kept."""
    target = CACHE / spec.replace("=", "-").replace("<", "-").replace(">", "-")
    if not (target / ".complete").is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), *spec.split("+")],
            check=True,
        )
        (target / ".complete").write_text(spec)
    return target


def worktree(rev: str, into: Path) -> Path:
    path = into / f"rev-{rev}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(path), rev], check=True)
    return path


def run_demo(code: Path, pythonpath: list[Path], home: Path) -> dict:
    """One demo from the command to its end, in a fresh data dir: its wall time and step-time shares, or why it
    failed (TRL 1.15 can't train on a CPU, say: its log-probs need a Triton kernel)."""
    home.mkdir(parents=True)
    env = {
        **os.environ,
        "GRPO_STUDIO_HOME": str(home),
        "PYTHONPATH": os.pathsep.join(str(p) for p in [*pythonpath, code]),
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "run", "tiny-offline"], cwd=code, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    if done.returncode != 0 or "run 1 completed" not in done.stdout:
        error = next((line.strip() for line in done.stdout.splitlines() if "error:" in line), done.stderr[-300:])
        return {"failed": error}
    found = {"wall": wall}
    database = next(home.glob("*.db"))
    with sqlite3.connect(database) as db:
        for key, total in db.execute("SELECT key, SUM(value) FROM metrics WHERE key LIKE 'time/%' GROUP BY key"):
            share = key.removeprefix("time/").split("/")[0]  # time/rewards/<name> adds up into "rewards"
            found[share] = found.get(share, 0.0) + total
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rev", action="append", default=[], help="a commit whose code runs the demo")
    parser.add_argument("--overlay", action="append", default=[], help="a library pinned over the installed one")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="demo-versions-") as scratch:
        scratch = Path(scratch)
        sides: dict[str, tuple[Path, list[Path]]] = {"HEAD": (ROOT, [])}
        for rev in args.rev:
            sides[f"code of {rev}"] = (worktree(rev, scratch), [])
        for spec in args.overlay:
            sides[spec] = (ROOT, [overlay_dir(spec)])
        names = list(sides)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        loads = [os.getloadavg()[0]]
        try:
            for round_ in range(args.rounds):
                order = names[round_ % len(names) :] + names[: round_ % len(names)]
                for name in order:
                    code, path = sides[name]
                    found = run_demo(code, path, scratch / f"home-{round_}-{names.index(name)}")
                    results[name].append(found)
                    said = found["failed"] if "failed" in found else f"{found['wall']:.1f} s"
                    print(f"round {round_ + 1}: {name}: {said}", flush=True)
                    loads.append(os.getloadavg()[0])
        finally:
            for rev in args.rev:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(scratch / f"rev-{rev}")])

    print(f"\nload average (1 min) around the runs: {min(loads):.1f}-{max(loads):.1f}; {args.rounds} round(s)")
    columns = ["wall", *SHARES, "rewards"]
    print("| side | " + " | ".join(f"{c} (s)" for c in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name in names:
        if failed := next((r["failed"] for r in results[name] if "failed" in r), None):
            print(f"| {name} | failed: {failed} |")
            continue
        cells = []
        for column in columns:
            values = [r[column] for r in results[name] if column in r]
            cells.append(f"{statistics.median(values):.1f}" if values else "-")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
