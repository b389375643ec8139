"""The per-member cost of the sweep machinery (issue 41) beside a plain run of the same config, in one invocation.

    python bench/sweep_overhead.py [--steps 20] [--members 2]

First a plain run of the demo's config (examples/tiny-offline.yaml, shortened, no checkpoint and no held-out
evaluation) is created with the launch action and trained by a scheduler loop here, as the dashboard's would (a pass
every 2 s); then a sweep of ``--members`` members of the same config (a grid over ``seed`` alone, so every member
does the work the plain run did) is created with the sweep action and trained by the same loop, which also tends it
and reads its table each pass, as a dashboard with the Sweeps view open would.

What the sweep adds, timed here in this process: its creation (reading the block, checking the base and every
member's config; the probe is off, it is a rule of its own with its cost printed by ``grpo-studio probe``), every
``tend()`` pass (judging each running member that logged a step, the finish check), and every table read. The
per-member sum of these in CPU time (this thread's: what the machinery takes from the machine; its wall time on a
shared machine also counts the waits for a CPU, printed beside it), over the plain run's training time (its worker's
start to its end, from the run row), is the figure: target <= 2 %. Beside it, each member's training time over the plain run's, which is the same work and
shows the noise of this shared machine rather than the machinery (the machinery runs in this process, not in the
worker).

The database is a throw-away SQLite file; the built-in model comes from the usual cache ($GRPO_STUDIO_HOME).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PASS_SECONDS = 2.0  # the dashboard's scheduler pass (trainer.supervise.schedule.SCHEDULE_SECONDS)


def main() -> None:
    """Train the plain run, then the sweep, and print what the sweep machinery cost per member."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--members", type=int, default=2)
    opts = parser.parse_args()

    import yaml

    from trainer.config import RunConfig
    from trainer.loading.tiny import tiny_model_dir

    tiny_model_dir()  # built once up front, outside both measurements
    config, _ = RunConfig.load(ROOT / "examples" / "tiny-offline.yaml")
    config.max_steps, config.save_steps, config.eval_steps = opts.steps, opts.steps * 10, 0
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/bench.db"
        os.environ["PYTHONPATH"] = str(ROOT)
        from app import actions
        from storage.db import get_sessionmaker, reset_engine
        from trainer.config.access import Access

        reset_engine()
        text = yaml.safe_dump(config.to_dict())
        started = time.perf_counter()
        plain = actions.launch(text, Access())
        launch_s = time.perf_counter() - started
        follow([plain.run_id])
        plain_s = trained_seconds(plain.run_id)
        print(
            f"plain run: created in {launch_s * 1000:.1f} ms, trained {opts.steps} steps in {plain_s:.1f} s", flush=True
        )

        block = {"objective": "reward", "prune": {"probe": False}}
        seeds = ",".join(str(config.seed + i) for i in range(opts.members))
        started, cpu = time.perf_counter(), time.thread_time()
        swept = actions.sweep(yaml.safe_dump({**config.to_dict(), "sweep": block}), Access(), f"seed={seeds}")
        create_s, create_cpu = time.perf_counter() - started, time.thread_time() - cpu
        ids = [m.run_id for m in swept.members]
        (tend_s, tend_cpu), (read_s, read_cpu), passes = follow(ids, sweep_id=swept.sweep_id)
        with get_sessionmaker().begin() as session:
            from storage import sweeps as sweep_rows

            state = sweep_rows.get_sweep(session, swept.sweep_id).state
        members_s = [trained_seconds(i) for i in ids]

    per_member = (create_s + tend_s + read_s) / opts.members
    per_member_cpu = (create_cpu + tend_cpu + read_cpu) / opts.members
    print(
        f"sweep of {opts.members} members: created in {create_s * 1000:.1f} ms; {passes} passes: tend {tend_s * 1000:.1f}"
        f" ms in all ({tend_s / passes * 1000:.2f} ms a pass), table reads {read_s * 1000:.1f} ms in all "
        f"({read_s / passes * 1000:.2f} ms a read); sweep {state}"
    )
    print(
        f"per member: creation {create_s / opts.members * 1000:.1f} ms + tending {tend_s / opts.members * 1000:.1f} ms"
        f" + table reads {read_s / opts.members * 1000:.1f} ms = {per_member * 1000:.1f} ms"
    )
    print(f"members trained in {', '.join(f'{s:.1f}' for s in members_s)} s beside the plain run's {plain_s:.1f} s "
          f"(ratio {statistics.median(members_s) / plain_s:.3f}: the same work, this machine's noise)")  # fmt: skip
    print(
        f"CPU time of the machinery per member: creation {create_cpu / opts.members * 1000:.1f} ms + tending "
        f"{tend_cpu / opts.members * 1000:.1f} ms + table reads {read_cpu / opts.members * 1000:.1f} ms = "
        f"{per_member_cpu * 1000:.1f} ms"
    )
    print(f"machinery per member / plain run: {per_member_cpu / plain_s:.2%} of CPU time (target <= 2 %); "
          f"{per_member / plain_s:.2%} in wall time, waits for a CPU on this shared machine included")  # fmt: skip
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


def follow(run_ids: list[int], sweep_id: int | None = None) -> tuple[tuple[float, float], tuple[float, float], int]:
    """The dashboard's scheduler loop here until every run has ended: a pass every 2 s, and for a sweep a timed
    ``tend()`` and a timed table read after each. Returns ((tend wall, CPU seconds), (read wall, CPU), passes)."""
    from app import actions
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.supervise import schedule
    from trainer.sweeps.tending import tend as tend_pass

    judged: dict[int, int] = {}
    tend, read = [0.0, 0.0], [0.0, 0.0]  # wall and CPU (this thread's) seconds
    passes = 0
    while True:
        with get_sessionmaker().begin() as session:
            schedule.schedule(session, 1)
            done = all(queries.get_run(session, i).status.terminal for i in run_ids)
        if sweep_id is not None:  # after the members end too: that pass finishes the sweep
            with timed(tend), get_sessionmaker().begin() as session:
                tend_pass(session, judged)
            with timed(read):
                actions.sweep_detail(sweep_id)
            passes += 1
        if done:
            return (tend[0], tend[1]), (read[0], read[1]), passes
        time.sleep(PASS_SECONDS)


@contextmanager
def timed(total: list[float]):
    """Add the block's wall seconds to ``total[0]`` and this thread's CPU seconds to ``total[1]``."""
    started, cpu = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        total[0] += time.perf_counter() - started
        total[1] += time.thread_time() - cpu


def trained_seconds(run_id: int) -> float:
    """The run's worker time, its start to its end (the run row's stamps)."""
    from storage import queries
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, run_id)
        if str(run.status) != "completed":
            raise SystemExit(f"run {run_id} ended {run.status}: {run.error}")
        return (run.finished_at - run.started_at).total_seconds()


if __name__ == "__main__":
    main()
