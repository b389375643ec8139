"""What an open, idle dashboard page costs the browser: Chromium's CPU-seconds with the page open and nothing
happening on it, the dashboard as shipped beside one without app/web/status_timer.js, in one run.

    python bench/idle_page.py [--seconds 20] [--rounds 3]

Two servers on two throw-away data dirs, no run in either. Each round opens the root page of each in turn, in one
headless Chromium, waits for the form and two seconds more, then counts the CPU-seconds of all Chromium's processes
over ``--seconds`` and closes the page; then the same for about:blank, the floor. Prints each window's figures, each
side's median and their ratio. Needs Chromium and Playwright, as the browser tests do.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from idle_server import cpu_seconds, start, wait_up  # noqa: E402

AS_SHIPPED = "import app.web.server as s; s.serve(port={port})"
WITHOUT = "import app.web.page_script as p; p.SCRIPT = b''; import app.web.server as s; s.serve(port={port})"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu"]


def chromium_cpu(root_pid: int) -> float:
    """CPU-seconds so far of Chromium's processes: ``root_pid`` (Playwright's driver) and everything under it."""
    import psutil

    total = 0.0
    for process in [psutil.Process(root_pid), *psutil.Process(root_pid).children(recursive=True)]:
        try:
            total += cpu_seconds(process.pid)
        except OSError:  # gone meanwhile
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each measured window")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import os

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        servers = {"as shipped": start(AS_SHIPPED, one), "without the timer": start(WITHOUT, two)}
        try:
            for process, url in servers.values():
                wait_up(url, process)
            used: dict[str, list[float]] = {name: [] for name in [*servers, "about:blank"]}
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"), args=FLAGS)
                for round_ in range(1, args.rounds + 1):
                    for name in used:
                        page = browser.new_page(viewport={"width": 1400, "height": 1800})
                        if name == "about:blank":
                            page.goto("about:blank")
                        else:
                            page.goto(servers[name][1])
                            page.wait_for_selector("#launch", state="attached")
                        time.sleep(2)
                        before = chromium_cpu(os.getpid())
                        time.sleep(args.seconds)
                        used[name].append(chromium_cpu(os.getpid()) - before)
                        page.close()
                        print(f"round {round_}: {name}: {used[name][-1]:.2f} CPU-s in {args.seconds:.0f} s", flush=True)
                browser.close()
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(timeout=30)
    medians = {name: statistics.median(values) for name, values in used.items()}
    for name, value in medians.items():
        print(
            f"median {name}: {value:.2f} CPU-s per {args.seconds:.0f} s ({value / args.seconds * 100:.1f} % of a core)"
        )
    print(f"ratio as shipped / without the timer: {medians['as shipped'] / medians['without the timer']:.2f}")


if __name__ == "__main__":
    main()
