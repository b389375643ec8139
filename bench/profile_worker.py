"""Where a grpo-studio training step's time goes: the worker trained in this process under cProfile.

    python bench/profile_worker.py [--steps 20] [--top 25]

Trains the tiny offline config (as bench/overhead.py does) with :func:`trainer.job.worker.run_worker`, profiling the
main thread, and prints the functions with the most cumulative time among grpo-studio's own per-step code (the
callback, the database writer's queue, the sample rows) beside TRL's step, plus the database writer thread's CPU time
per step (``time.thread_time`` inside that thread; cProfile does not see other threads).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OURS = ("trainer/job/", "storage/", "sqlalchemy/", "threading.py")


def main() -> None:
    """Train under the profiler and print the per-step costs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/profile.db"
        from storage import queries
        from storage.db import get_sessionmaker
        from trainer.config import RunConfig
        from trainer.job import db_writer
        from trainer.job.worker import run_worker
        from trainer.loading.tiny import tiny_model_dir

        tiny_model_dir()
        config, _ = RunConfig.load(ROOT / "examples" / "tiny-offline.yaml")
        config.max_steps, config.save_steps = opts.steps, opts.steps * 10
        config.eval_steps = 0  # as in bench/overhead.py: the step's own cost, without held-out evaluation
        with get_sessionmaker().begin() as s:
            run_id = queries.create_run(s, "profile", config.to_dict(), config.max_steps).id
        writers: list = []
        original_init = db_writer.DbWriter.__init__

        def keep(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            writers.append(self)

        db_writer.DbWriter.__init__ = keep
        profile = cProfile.Profile()
        profile.enable()
        status = run_worker(run_id)
        profile.disable()
        print(f"run {status}; database writer thread: {writers[0].cpu_seconds * 1000 / opts.steps:.2f} ms CPU per step")
        print("cumulative time per step in the main thread (TRL's step for scale, then grpo-studio's own code):")
        stats = pstats.Stats(profile)
        rows = []
        for (filename, line, name), (_cc, calls, _tt, cumulative, _callers) in stats.stats.items():
            if any(part in filename for part in OURS) or name in ("training_step", "_inner_training_loop"):
                rows.append((cumulative, calls, f"{Path(filename).name}:{line}({name})"))
        for cumulative, calls, where in sorted(rows, reverse=True)[: opts.top]:
            print(f"{cumulative * 1000 / opts.steps:9.2f} ms/step  {calls:7d} calls  {where}")


if __name__ == "__main__":
    main()
