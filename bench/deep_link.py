"""The Monitor's three speed targets (issue 36 item 12), in headless Chromium against `grpo-studio serve`:

    python bench/deep_link.py [--rounds 3] [--runs 12] [--steps 40] [--ref 14e269b] [--no-launch]

- deep link / root page: ``?tab=monitor&run=N`` usable (the run's header and its reward chart drawn with points)
  beside the root page usable (the New run form drawn, Launch pressable); target <= 1.5;
- tab click -> drawn chart: from a click on the Monitor tab of a loaded root page to the (newest) run's reward chart
  drawn with points; target <= 1 s;
- launch -> first chart point: the tiny demo launched from the form, from its worker's first logged step (the step's
  wall time, as the worker stamps it) to that step's point in the browser's reward chart; target <= 2 s.

Each page is opened in the same browser against the same server, alternating, so that whatever else loads the
machine weighs on both alike. With ``--ref REV`` a second server runs the code of git revision REV (a throw-away
worktree) on a database of its own, and every measure alternates between the two: before and after, side by side
in one run. The databases are throw-away ones holding ``--runs`` finished runs stored as the worker stores them (every
metric key of a real run, the held-out curve, sampled completions and log lines); the deep link names the oldest run,
the root page's Monitor shows the newest.

Prints each measure's median seconds (and the ratio deep link / root). Needs Chromium (``$CHROMIUM`` or
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


def start_server(port: int, code: Path = ROOT, home: str | None = None) -> subprocess.Popen:
    """`grpo-studio serve` on ``port`` from the checkout ``code``, on the database of ``home`` (default: the one the
    environment names); returns once it answers."""
    env = {**os.environ, "PYTHONPATH": str(code)} | ({"GRPO_STUDIO_HOME": home} if home else {})
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=code,
        env=env,
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


def time_tab_click(browser, url: str) -> float:
    """Seconds from a click on the Monitor tab of a loaded root page to the newest run's reward chart with points
    (a stored run, or the demo an earlier round launched)."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(url)
    page.wait_for_selector("#launch:not([disabled])", timeout=120_000)
    time.sleep(1.0)  # the page's load events (the pickers filled) are done
    started = time.perf_counter()
    page.get_by_role("tab", name="Monitor").click()
    page.locator("#monitor-progress").filter(has_text="(run ").wait_for(timeout=120_000)
    page.wait_for_function(REWARD_POINTS, timeout=120_000)
    took = time.perf_counter() - started
    page.close()
    return took


def first_step_wall_time(home: str, run_id: int, timeout: float = 600.0) -> float:
    """The wall time the worker stamped on run ``run_id``'s first logged reward, read from its database."""
    from sqlalchemy import create_engine, text

    from storage.db import DEFAULT_DATABASE

    engine = create_engine(f"sqlite:///{Path(home) / DEFAULT_DATABASE}")
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with engine.connect() as connection:
                found = connection.execute(
                    text("SELECT wall_time FROM metrics WHERE run_id = :r AND key = 'reward' ORDER BY step LIMIT 1"),
                    {"r": run_id},
                ).scalar()
            if found is not None:
                return float(found)
            time.sleep(0.2)
    finally:
        engine.dispose()
    raise RuntimeError(f"run {run_id} logged no reward within {timeout:.0f} s")


def time_launch(browser, url: str, home: str, name: str) -> float:
    """Seconds from the tiny demo's first logged step to its point in the reward chart of the page that launched it.
    A revision whose launch does not open the Monitor is followed there in the same tab, as its link did."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(url)
    page.wait_for_selector("#launch:not([disabled])", timeout=120_000)
    for field, value in (("name", name), ("max_steps", "3")):
        box = page.locator(f"#field-{field} input, #field-{field} textarea").first
        box.fill(value)
        box.press("Tab")
    page.click("#launch")
    status = page.locator("#new-run-status").filter(has_text=f"({name})")
    status.wait_for(state="attached", timeout=120_000)  # the launch may have opened the Monitor already: New run hidden
    run_id = int(status.text_content().split("Run ")[1].split()[0])
    try:
        page.locator("#monitor-progress").filter(has_text=f"(run {run_id})").wait_for(timeout=10_000)
    except Exception:  # an older revision: its launch message linked to the Monitor instead
        page.goto(f"{url}?tab=monitor&run={run_id}")
    page.wait_for_function(REWARD_POINTS, timeout=600_000, polling=100)
    seen = time.time()
    first = first_step_wall_time(home, run_id)
    page.locator("#monitor-progress").filter(has_text="completed").wait_for(timeout=600_000)  # the slot is free again
    page.close()
    return seen - first


def git_worktree(rev: str, where: str) -> Path:
    """A throw-away checkout of revision ``rev`` under ``where``, with the built-in model the working tree has."""
    target = Path(where) / "ref"
    subprocess.run(["git", "worktree", "add", "--detach", str(target), rev], cwd=ROOT, check=True, capture_output=True)
    return target


def main(argv: list[str] | None = None) -> None:
    """Store the runs, serve them (and the ``--ref`` revision), then time every measure alternately."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--ref", help="a git revision to measure side by side (before and after)")
    parser.add_argument("--no-launch", action="store_true", help="leave out the launch measure (it trains)")
    opts = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as scratch:
        sides = {"this checkout": ROOT} | ({f"ref {opts.ref}": git_worktree(opts.ref, scratch)} if opts.ref else {})
        servers, urls, homes, oldest = {}, {}, {}, {}
        try:
            for label, code in sides.items():
                home = tempfile.mkdtemp(dir=scratch)
                os.environ["GRPO_STUDIO_HOME"] = home
                os.environ.pop("DATABASE_URL", None)
                from storage.db import reset_engine

                reset_engine()
                oldest[label] = store_runs(opts.runs, opts.steps)[0]
                import socket

                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))
                    port = s.getsockname()[1]
                servers[label] = start_server(port, code, home)
                urls[label], homes[label] = f"http://127.0.0.1:{port}/", home
            measures = {label: {"root": [], "deep link": [], "tab click": [], "launch": []} for label in sides}
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
                )
                for label in sides:
                    time_root(browser, urls[label])  # warm-up: the first load also fills the browser's asset cache
                for round_ in range(opts.rounds):
                    for label in sides:
                        taken = measures[label]
                        taken["root"].append(time_root(browser, urls[label]))
                        taken["deep link"].append(time_deep_link(browser, urls[label], oldest[label], "bench-0"))
                        taken["tab click"].append(time_tab_click(browser, urls[label]))
                        if not opts.no_launch:
                            name = f"bench-launch-{round_}"
                            taken["launch"].append(time_launch(browser, urls[label], homes[label], name))
                browser.close()
        finally:
            for server in servers.values():
                server.terminate()
                server.wait(timeout=30)
            if opts.ref:
                subprocess.run(["git", "worktree", "remove", "--force", str(sides[f"ref {opts.ref}"])], cwd=ROOT)
    for label, taken in measures.items():
        median = {key: statistics.median(values) for key, values in taken.items() if values}
        line = f"{label}: root {median['root']:.2f} s, deep link {median['deep link']:.2f} s, ratio "
        line += f"{median['deep link'] / median['root']:.2f} (target <= 1.5); tab click -> chart {median['tab click']:.2f} s "
        line += "(target <= 1)"
        if "launch" in median:
            line += f"; first step -> its chart point {median['launch']:.2f} s (target <= 2)"
        print(line + "; each of " + str({key: [round(v, 2) for v in values] for key, values in taken.items()}))
    print(f"{opts.runs} runs x {opts.steps} steps; {opts.rounds} rounds; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
