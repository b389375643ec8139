"""How long building the built-in model takes here (target: within ~3 minutes on 2 cores).

    python bench/tiny_build.py

Builds ``builtin:tiny`` from scratch into a throw-away directory (the cache under the data dir is not touched) and
prints the wall time and the machine's load average beside it: on a shared machine the second number explains the
first. Timings live here rather than in a test, where a loaded machine would fail a correct build.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    """Build once and print the timing."""
    from trainer.loading.tiny import DEFAULT_SPEC, build_tiny_model

    with tempfile.TemporaryDirectory() as target:
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        build_tiny_model(Path(target) / "tiny", DEFAULT_SPEC)
        seconds = time.perf_counter() - started
    print(
        f"builtin:tiny built in {seconds:.0f} s (target <= 180 s on 2 cores); "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )


if __name__ == "__main__":
    main()
