"""Where a finished run's step time went, by part: the ``time/`` keys the worker logs at every step
(trainer/job/step_times.py), summed over the run and as shares of their total, beside the span between the first
and the last step's stored ``wall_time`` (which the parts after step 1 add up to).

    DATABASE_URL=sqlite:///path/to/grpo-studio.db python bench/step_shares.py [RUN_ID]

RUN_ID defaults to the newest run. Prints one line a part, the largest first, then the totals; steps with held-out
evaluation or a checkpoint are counted as they came, so the shares are the run's, not a typical step's.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    """Print the shares of the run named on the command line (or the newest)."""
    from storage import queries
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as s:
        run_id = int(sys.argv[1]) if len(sys.argv) > 1 else max(run.id for run in queries.list_runs(s))
        points = queries.metrics_since(s, run_id)
    parts = {key: rows for key, rows in points.items() if key.startswith("time/")}
    if not parts:
        raise SystemExit(f"run {run_id} logged no time/ keys (a run from before issue 57.8?)")
    totals = {key: sum(value for _, value, _ in rows) for key, rows in parts.items()}
    whole = sum(totals.values())
    steps = sorted({step for rows in parts.values() for step, _, _ in rows})
    print(f"run {run_id}: {len(steps)} steps, {whole:.1f} s in the timed steps")
    for key, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {key:<28} {seconds:8.2f} s  {seconds / whole:6.1%}")
    stamps = {step: wall for step, _, wall in points.get("reward", [])}
    if len(stamps) > 1:
        after_first = sum(value for rows in parts.values() for step, value, _ in rows if step > steps[0])
        span = stamps[steps[-1]] - stamps[steps[0]]
        print(f"steps {steps[1]}-{steps[-1]}: parts {after_first:.2f} s, wall_time span {span:.2f} s")


if __name__ == "__main__":
    main()
