"""A deep link to the Monitor beside the root page, in headless Chromium against one `grpo-studio serve`.

    python bench/deep_link.py [--rounds 5] [--runs 12] [--steps 40]

Both pages are opened in the same browser against the same server, alternating, so that whatever else loads the
machine weighs on both alike. The database is a throw-away one holding ``--runs`` finished runs stored as the worker
stores them (every metric key of a real run, the held-out curve, sampled completions and log lines); the deep link
names the oldest run, the root page shows the newest.

- root usable: the New run form is drawn and its Launch button can be pressed;
- deep link usable: the Monitor tab is open with the run's header and its reward chart drawn with points.

Prints each page's median seconds and the ratio deep link / root (target <= 1.5). Needs Chromium (``$CHROMIUM`` or
/usr/bin/chromium) and Playwright, as the browser tests do.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KEYS = [
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "kl",
    "loss",
    "grad_norm",
    "learning_rate",
    "entropy",
    "step_time",
    "completions/mean_length",
    "completions/max_length",
    "completions/clipped_ratio",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
] + [
    f"rewards/{name}/{stat}" for name in ("correctness", "int", "strict_format", "xmlcount") for stat in ("mean", "std")
]


def store_runs(runs: int, steps: int) -> list[int]:
    """``runs`` finished runs of ``steps`` steps each, in the database the environment names; returns their ids."""
    from storage import queries, series
    from storage.db import get_sessionmaker
    from storage.models import RunStatus

    Session = get_sessionmaker()
    ids = []
    for index in range(runs):
        with Session.begin() as s:
            run = queries.create_run(s, f"bench-{index}", {"max_completion_length": 64, "eval_steps": 10}, steps)
            queries.mark_running(s, run, 0, "/nonexistent")
            run_id = run.id
        with Session.begin() as s:
            for step in range(1, steps + 1):
                values = {k: (step % 7) / 7 + i * 0.1 for i, k in enumerate(KEYS)}
                if step % 10 == 0 or step == 1:
                    values |= {"heldout/correct": step / steps, "heldout/format": step / steps}
                queries.add_metric_rows(s, queries.metric_rows(run_id, step, values, 1000.0 + step))
                queries.add_sample_rows(
                    s,
                    [
                        dict(
                            run_id=run_id,
                            step=step,
                            group_index=g,
                            prompt="What is 12 + 30?",
                            completion="<reasoning>\n12 + 30 = 42\n</reasoning>\n<answer>\n42\n</answer>\n",
                            rewards={"correctness": 2.0, "xmlcount": 0.5},
                            total_reward=2.5 - i * 0.1,
                            advantage=0.5 - i * 0.3,
                            reference_answer="42",
                        )
                        for g in range(2)
                        for i in range(4)
                    ],
                )
                queries.set_progress(s, run_id, step)
            series.write_chunks(s, run_id, steps)
            for line in range(40):
                queries.add_log(s, run_id, f"step {line}: reward 1.0")
            queries.finish_run(s, queries.get_run(s, run_id), RunStatus.COMPLETED)
        ids.append(run_id)
    return ids


def start_server(port: int) -> subprocess.Popen:
    """`grpo-studio serve` on ``port``, on the database the environment names; returns once it answers."""
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).status == 200:
                return process
        except OSError:
            time.sleep(0.2)
    process.terminate()
    raise RuntimeError("grpo-studio serve did not answer within 120 s")


REWARD_POINTS = """() => {
    const plot = document.querySelector("#chart-reward .js-plotly-plot");
    return (plot && plot._fullData || []).reduce((n, t) => n + (t.y ? t.y.length : 0), 0);
}"""


def time_root(browser, url: str) -> float:
    """Seconds from navigation until the New run form's Launch button is drawn and enabled."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("#launch:not([disabled])", timeout=120_000)
    page.locator("#field-name input, #field-name textarea").first.wait_for(timeout=120_000)
    took = time.perf_counter() - started
    page.close()
    return took


def time_deep_link(browser, url: str, run_id: int, name: str) -> float:
    """Seconds from navigation until the Monitor shows ``run_id``'s header and its reward chart has points."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    started = time.perf_counter()
    page.goto(f"{url}?tab=monitor&run={run_id}")
    page.locator("#monitor-progress").filter(has_text=f"{name} (run {run_id})").wait_for(timeout=120_000)
    page.wait_for_function(REWARD_POINTS, timeout=120_000)
    took = time.perf_counter() - started
    page.close()
    return took


def main(argv: list[str] | None = None) -> None:
    """Store the runs, serve them, then time root and deep link alternately ``--rounds`` times each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--steps", type=int, default=40)
    opts = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as home:
        os.environ["GRPO_STUDIO_HOME"] = home
        os.environ.pop("DATABASE_URL", None)
        ids = store_runs(opts.runs, opts.steps)
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = start_server(port)
        url = f"http://127.0.0.1:{port}/"
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
                )
                time_root(browser, url)  # warm-up: the first page load also fills the browser's cache of the assets
                roots, deep = [], []
                for _ in range(opts.rounds):
                    roots.append(time_root(browser, url))
                    deep.append(time_deep_link(browser, url, ids[0], "bench-0"))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    root, link = statistics.median(roots), statistics.median(deep)
    print(
        f"root page usable: median {root:.2f} s of {[round(t, 2) for t in roots]}; deep link ?tab=monitor&run={ids[0]} "
        f"usable: median {link:.2f} s of {[round(t, 2) for t in deep]}; ratio {link / root:.2f} (target <= 1.5); "
        f"{opts.runs} runs x {opts.steps} steps; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
