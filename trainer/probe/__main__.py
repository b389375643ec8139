"""``python -m trainer.probe CONFIG [--prompts N] [--json OUT]``: probe a config file, print the report, write it as
JSON to OUT; exit 0, or 3 when the verdict is that the run would learn nothing (the dashboard's probe job)."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from trainer.probe.job import WASTED_EXIT


def main(argv: list[str] | None = None) -> int:
    """Probe, print, write; returns the exit code."""
    from trainer.config import ConfigError
    from trainer.config.review import load_and_validate
    from trainer.probe.sampling import DEFAULT_PROMPTS, run_probe

    parser = argparse.ArgumentParser(prog="python -m trainer.probe")
    parser.add_argument("config")
    parser.add_argument("--prompts", type=int, default=DEFAULT_PROMPTS)
    parser.add_argument("--json", help="write the report here as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        config, notes = load_and_validate(args.config)
    except (ConfigError, OSError) as exc:
        print(f"grpo-studio probe: {args.config}: {exc}", file=sys.stderr)
        return 2
    print("".join(f"note: {note}\n" for note in notes), end="", file=sys.stderr)
    report = run_probe(config, args.prompts, log=lambda line: print(line, file=sys.stderr))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report.to_dict(), f)
    print(report.to_text())
    return WASTED_EXIT if report.verdict == "wasted" else 0


if __name__ == "__main__":
    sys.exit(main())
