"""What an idle dashboard costs: CPU-seconds of `grpo-studio serve` with no page open, side by side in one run.

    python bench/idle_server.py [--seconds 60] [--rounds 3]

Two servers on one throw-away data dir, started together and measured over the same windows: one as shipped (its
queue paced by app.web.server.pace_queue), one with Gradio's own pace (a look for new events every 1 ms, for progress
every 10 ms). Prints each window's CPU-seconds per server and the ratio of their sums.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard import _free_port  # noqa: E402

GRADIOS_PACE = "import app.web.server as s; s.pace_queue = lambda demo: demo; s.serve(port={port})"
AS_SHIPPED = "import app.web.server as s; s.serve(port={port})"


def cpu_seconds(pid: int) -> float:
    """User and system CPU-seconds of process ``pid`` so far (/proc/PID/stat, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(code: str, home: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {**os.environ, "GRPO_STUDIO_HOME": home, "PYTHONPATH": str(ROOT)}
    env.pop("DATABASE_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-c", code.format(port=port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, f"http://127.0.0.1:{port}/"


def wait_up(url: str, process: subprocess.Popen) -> None:
    for _ in range(600):
        if process.poll() is not None:
            raise SystemExit(f"a server exited with {process.returncode} before answering")
        try:
            if urllib.request.urlopen(url, timeout=1).status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer in a minute")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each measured window")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        servers = {"as shipped": start(AS_SHIPPED, home), "Gradio's pace": start(GRADIOS_PACE, home)}
        try:
            for process, url in servers.values():
                wait_up(url, process)
            time.sleep(5)  # past the first scheduler passes and the start-up's own work
            totals = dict.fromkeys(servers, 0.0)
            for round_ in range(1, args.rounds + 1):
                before = {name: cpu_seconds(p.pid) for name, (p, _) in servers.items()}
                time.sleep(args.seconds)
                used = {name: cpu_seconds(p.pid) - before[name] for name, (p, _) in servers.items()}
                for name, value in used.items():
                    totals[name] += value
                print(f"round {round_}: " + ", ".join(f"{n} {v:.2f} CPU-s" for n, v in used.items()), flush=True)
            shipped, gradios = totals["as shipped"], totals["Gradio's pace"]
            print(
                f"idle, no page open, {args.rounds} x {args.seconds:.0f} s: as shipped {shipped:.2f} CPU-s, "
                f"Gradio's pace {gradios:.2f} CPU-s, ratio {shipped / max(gradios, 1e-9):.2f}"
            )
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(timeout=30)


if __name__ == "__main__":
    main()
