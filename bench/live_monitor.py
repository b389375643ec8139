"""What a live Monitor costs the browser: Chromium's CPU-seconds while the Monitor follows a run that logs a step a
second, and for a load of the root page, this checkout beside a git revision, in one run.

    python bench/live_monitor.py --ref REV [--rounds 3] [--seconds 30]

Each side serves a throw-away database of its own holding one running run; this process writes a step into both
every second (every metric key of a real run, eight sampled completions, a log line), as a worker would, so both
pages follow the same live run with no training beside them. One page at a time is open in one headless Chromium at
``?tab=monitor&run=1``, alternating sides, and the CPU-seconds of Chromium's processes over ``--seconds`` (after the
page has drawn its charts) are summed per side; then each round loads the root page once per side, in a fresh
page, and counts Chromium's CPU-seconds from the request until the form is drawn and two seconds more. Prints each
window's figures, each side's median and their ratio.
Needs Chromium and Playwright, as the browser tests do.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard import _free_port  # noqa: E402
from deep_link import KEYS, REWARD_POINTS, git_worktree, start_server  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu"]


def live_run(home: str):
    """A running run (its worker this process) in ``home``'s database, with nothing logged yet; returns the
    database's URL and a session factory for it."""
    from sqlalchemy.orm import sessionmaker

    from storage import queries
    from storage.db import make_engine

    url = f"sqlite:///{home}/grpo-studio.db"
    factory = sessionmaker(make_engine(url), expire_on_commit=False)
    with factory.begin() as s:
        run = queries.create_run(s, "live", {"max_completion_length": 64, "eval_steps": 10}, 100_000)
        queries.mark_running(s, run, os.getpid(), home)
    return url, factory


def write_step(factory, step: int) -> None:
    """Log step ``step`` of run 1 through the session factory ``factory``, as the worker logs one."""
    from storage import queries

    with factory.begin() as s:
        values = {k: (step % 7) / 7 + i * 0.1 for i, k in enumerate(KEYS)}
        if step % 10 == 0:
            values |= {"heldout/correct": min(step / 100, 1.0), "heldout/format": 1.0}
        queries.add_metric_rows(s, queries.metric_rows(1, step, values, time.time()))
        rows = [
            dict(
                run_id=1,
                step=step,
                group_index=g,
                prompt=f"What is {step} + {g}?",
                completion=f"<reasoning>\n{step} + {g} = {step + g}\n</reasoning>\n<answer>\n{step + g}\n</answer>\n",
                rewards={"correctness": 2.0, "xmlcount": 0.5},
                total_reward=2.5 - i * 0.1,
                advantage=0.5 - i * 0.3,
                reference_answer=str(step + g),
            )
            for g in range(2)
            for i in range(4)
        ]
        queries.add_sample_rows(s, rows)
        queries.set_progress(s, 1, step)
        queries.add_log(s, 1, f"step {step}: reward 1.0")


def chromium_cpu(root_pid: int) -> float:
    """CPU-seconds so far of the Chromium process ``root_pid`` and its live descendants."""
    import psutil

    total = 0.0
    root = psutil.Process(root_pid)
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", required=True, help="a git revision to measure beside this checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    opts = parser.parse_args(argv)
    import psutil
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as scratch:
        sides = {"this checkout": ROOT, f"ref {opts.ref}": git_worktree(opts.ref, scratch)}
        servers, pages, factories = {}, {}, {}
        stop = threading.Event()
        try:
            for label, code in sides.items():
                home = tempfile.mkdtemp(dir=scratch)
                url, factories[label] = live_run(home)
                port = _free_port()
                os.environ["DATABASE_URL"] = url
                servers[label] = start_server(port, code, home)
                pages[label] = f"http://127.0.0.1:{port}/?tab=monitor&run=1"

            def steps() -> None:
                step = 1
                while not stop.is_set():
                    for factory in factories.values():
                        write_step(factory, step)
                    step += 1
                    stop.wait(1.0)

            threading.Thread(target=steps, daemon=True).start()
            used = {label: [] for label in sides}
            loads = {label: [] for label in sides}
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
                root = min(
                    (c for c in psutil.Process().children(recursive=True) if "chrom" in c.name()), key=lambda c: c.pid
                ).pid
                for round_ in range(1, opts.rounds + 1):
                    for label in sides:
                        page = browser.new_page(viewport={"width": 1440, "height": 900})
                        page.goto(pages[label])
                        deadline = time.monotonic() + 60
                        while page.evaluate(REWARD_POINTS) == 0 and time.monotonic() < deadline:
                            time.sleep(0.5)
                        time.sleep(3)  # past the page's load and first draw
                        before = chromium_cpu(root)
                        time.sleep(opts.seconds)
                        used[label].append(chromium_cpu(root) - before)
                        page.close()
                        print(f"round {round_}, {label}: {used[label][-1]:.2f} CPU-s", flush=True)
                for round_ in range(1, opts.rounds + 1):
                    for label in sides:
                        time.sleep(2)  # the last page's renderer gone (its CPU would leave the sum)
                        page = browser.new_page(viewport={"width": 1440, "height": 900})
                        before = chromium_cpu(root)
                        page.goto(pages[label].split("?")[0])
                        page.wait_for_selector("#launch", state="visible")
                        time.sleep(2)
                        loads[label].append(chromium_cpu(root) - before)
                        page.close()
                        print(f"root page load {round_}, {label}: {loads[label][-1]:.2f} CPU-s", flush=True)
                browser.close()
        finally:
            stop.set()
            for server in servers.values():
                server.terminate()
                server.wait(timeout=30)
            subprocess.run(["git", "worktree", "remove", "--force", str(sides[f"ref {opts.ref}"])], cwd=ROOT)
    for what, taken in (("on a live Monitor, per window", used), ("for a root page load", loads)):
        median = {label: statistics.median(values) for label, values in taken.items()}
        here, there = median["this checkout"], median[f"ref {opts.ref}"]
        print(
            f"Chromium {what}, median of {opts.rounds}: this checkout {here:.2f} CPU-s, ref {opts.ref} {there:.2f} "
            f"CPU-s, ratio {here / max(there, 1e-9):.2f}"
        )


if __name__ == "__main__":
    main()
