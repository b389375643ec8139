"""The monitor's first full chart read of a long run, the old way beside the new, on one throw-away database.

    python bench/first_chart.py [--steps 10000] [--keys 40]

The run is stored as the worker stores it: metric rows, and (new) the packed copy of every finished block of
steps the database writer keeps (storage/series.py). Old: every metric row read one by one (``metrics_since``),
then an array per key, as the monitor's cache did. New: :meth:`app.actions.monitor_state.RunCache.poll`, which reads the
packed blocks and the rows after them. Both must give the same points; the target for the new read is <= 0.2 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> None:
    """Store the long run, then time both reads three times each, alternating."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=40)
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as home:
        os.environ["GRPO_STUDIO_HOME"] = home
        os.environ.pop("DATABASE_URL", None)
        import numpy as np

        from app.actions.monitor_state import RunCache
        from storage import queries, series
        from storage.db import get_sessionmaker

        Session = get_sessionmaker()
        keys = [f"key{i}" for i in range(opts.keys)]
        with Session.begin() as s:
            run_id = queries.create_run(s, "bench", {}, opts.steps).id
        for start in range(1, opts.steps + 1, 100):  # a writer's batches, with the packing it does after each
            with Session.begin() as s:
                for step in range(start, min(start + 100, opts.steps + 1)):
                    values = {k: (step % 97) / 97 + i for i, k in enumerate(keys)}
                    queries.add_metric_rows(s, queries.metric_rows(run_id, step, values, float(step)))
                series.write_chunks(s, run_id, min(start + 99, opts.steps))

        def old_read() -> dict:
            with Session.begin() as s:
                return {k: np.asarray(v, dtype=float) for k, v in queries.metrics_since(s, run_id).items()}

        def new_read() -> dict:
            cache = RunCache(run_id)
            with Session.begin() as s:
                cache.poll(s)
            return cache.series

        old_times, new_times = [], []
        for _ in range(3):
            for read, times in ((old_read, old_times), (new_read, new_times)):
                started = time.perf_counter()
                result = read()
                times.append(time.perf_counter() - started)
                assert sorted(result) == sorted(keys) and all(len(a) == opts.steps for a in result.values())
        old, new = old_read(), new_read()
        assert all(np.array_equal(old[k], new[k]) for k in keys), "the two reads differ"
        print(
            f"first full read of {opts.steps:,} steps x {opts.keys} keys ({opts.steps * opts.keys:,} points), median of "
            f"3: old (row by row) {statistics.median(old_times) * 1000:.0f} ms, new (packed blocks) "
            f"{statistics.median(new_times) * 1000:.0f} ms, {statistics.median(old_times) / statistics.median(new_times):.1f}x "
            f"faster (target <= 200 ms); load average {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
