"""``python -m trainer.probe CONFIG [CONFIG...] [--prompts N] [--json OUT]``: probe each config file in turn, print
each report, and write them to OUT as a JSON list, rewritten after each probe (so a failure leaves the reports before
it); exit 0, or 3 when a verdict is that the run would learn nothing (the dashboard's probe job)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from trainer.probe.job import WASTED_EXIT


def main(argv: list[str] | None = None) -> int:
    """Probe, print, write; returns the exit code."""
    from trainer.config import ConfigError
    from trainer.probe.sampling import DEFAULT_PROMPTS, run_probe
    from trainer.review import load_and_validate

    parser = argparse.ArgumentParser(prog="python -m trainer.probe")
    parser.add_argument("config", nargs="+")
    parser.add_argument("--prompts", type=int, default=DEFAULT_PROMPTS)
    parser.add_argument("--json", help="write the reports here, as a JSON list")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    reports = []
    for path in args.config:  # in turn: a config that fails leaves the reports before it, and its place says which
        try:
            config, notes = load_and_validate(path)
        except (ConfigError, OSError) as exc:
            print(f"grpo-studio probe: {path}: {exc}", file=sys.stderr)
            return 2
        print("".join(f"note: {note}\n" for note in notes), end="", file=sys.stderr)
        reports.append(run_probe(config, args.prompts, log=lambda line: print(line, file=sys.stderr)))
        if args.json:  # whole or not at all: a kill mid-write leaves the last list
            partial = Path(f"{args.json}.partial")
            partial.write_text(json.dumps([report.to_dict() for report in reports]))
            os.replace(partial, args.json)
        print(reports[-1].to_text())
    return WASTED_EXIT if any(report.verdict == "wasted" for report in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
