"""Dashboard timings, measured in one run on this machine.

    python bench/dashboard.py

1. launching `grpo-studio serve` to its first HTTP 200 (target <= 5 s);
2. building every monitor chart for a stored run of 10,000 steps x 40 metric keys: the first full read from SQLite,
   and the figure building on its own (target <= 150 ms);
3. an incremental poll that finds one new step (target <= 20 ms);
4. the Runs table and pickers with 1,000 runs x 1,000 steps x 40 keys and 5 dashboards polling: the old per-run reads,
   every run's latest values read each tick, and the run list as it is (latest values kept between ticks), also
   while a run logs steps (target <= 50 ms a tick; bench/runs_list.py, whose flags it takes).

Everything runs against a throw-away data dir, so nothing of yours is touched.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STEPS, KEYS = 10_000, 40


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_to_first_200(home: str) -> float:
    """Seconds from starting `grpo-studio serve` to the first HTTP 200 on /."""
    port = _free_port()
    env = {**os.environ, "GRPO_STUDIO_HOME": home, "PYTHONPATH": str(ROOT)}
    env.pop("DATABASE_URL", None)
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).status == 200:
                    return time.perf_counter() - started
            except OSError:
                time.sleep(0.05)
            if process.poll() is not None:
                raise RuntimeError("grpo-studio serve exited")
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    """Print the three timings."""
    with tempfile.TemporaryDirectory() as home:
        os.environ["GRPO_STUDIO_HOME"] = home
        os.environ.pop("DATABASE_URL", None)
        from app.actions.monitor_state import RunCache
        from app.web.widgets.charts import build_all
        from storage import queries, series
        from storage.db import get_sessionmaker

        startup = [time_to_first_200(home) for _ in range(3)]
        print(
            f"serve → first HTTP 200: median {statistics.median(startup):.2f} s of {[round(s, 2) for s in startup]} (target <= 5 s)"
        )

        keys = [
            "reward",
            "reward_std",
            "kl",
            "loss",
            "grad_norm",
            "learning_rate",
            "entropy",
            "step_time",
            "frac_reward_zero_std",
            "completions/mean_length",
            "completions/max_length",
            "completions/clipped_ratio",
        ]
        keys += [f"clip_ratio/{k}" for k in ("low_mean", "high_mean", "region_mean", "low_min", "high_max")]
        keys += [f"rewards/fn{i}/{s}" for i in range(12) for s in ("mean", "std")][: KEYS - len(keys) - 1] + ["epoch"]
        assert len(keys) == KEYS
        Session = get_sessionmaker()
        with Session.begin() as s:
            run_id = queries.create_run(s, "bench", {"max_completion_length": 200}, STEPS).id
        rows = []
        for step in range(1, STEPS + 1):
            rows += queries.metric_rows(
                run_id, step, {k: (step % 97) / 97 + i for i, k in enumerate(keys)}, float(step)
            )
        with Session.begin() as s:
            queries.add_metric_rows(s, rows)
            series.write_chunks(s, run_id, STEPS + 1)  # the packed blocks the worker's writer keeps (issue 17)

        reads, builds = [], []
        for _ in range(3):
            cache = RunCache(run_id)
            t0 = time.perf_counter()
            with Session.begin() as s:
                cache.poll(s)
            t1 = time.perf_counter()
            build_all({"bench": cache.series})
            builds.append(time.perf_counter() - t1)
            reads.append(t1 - t0)
        print(
            f"all monitor charts for {STEPS:,} steps x {KEYS} keys: figure building {statistics.median(builds) * 1000:.0f} ms "
            f"(target <= 150 ms); first full read from SQLite {statistics.median(reads) * 1000:.0f} ms (once per run per session)"
        )

        polls = []
        for step in range(STEPS + 1, STEPS + 21):
            with Session.begin() as s:
                queries.add_metric_rows(s, queries.metric_rows(run_id, step, {k: 0.5 for k in keys}, float(step)))
            t0 = time.perf_counter()
            with Session.begin() as s:
                found = cache.poll(s)
            polls.append(time.perf_counter() - t0)
            assert found == KEYS
        print(
            f"incremental poll finding 1 new step: median {statistics.median(polls) * 1000:.1f} ms, "
            f"max {max(polls) * 1000:.1f} ms over {len(polls)} polls (target <= 20 ms)"
        )


if __name__ == "__main__":
    main()
    # 4. the run list with a thousand runs, the old ways and the current one side by side (bench/runs_list.py)
    import runs_list

    runs_list.main(sys.argv[1:])
