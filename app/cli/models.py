"""The ``grpo-studio`` commands that load a model: probe, fork, evaluate, export and build-tiny (each ``cmd_`` and its
verb's name; their options are the verbs' in app/actions/verbs.py), thin adapters over app.actions. A fork trains in the
foreground as ``launch`` does (app.cli.output.foreground). Heavy packages are imported inside the commands."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from app.cli.output import foreground, started_text


def cmd_probe(args: argparse.Namespace) -> int:
    """Print the probe's report of a config: exit 0, 3 when it says the run would learn nothing, 2 for a bad config
    (the probe runs in this process, its progress on stderr; the dashboard runs the same probe as a child job)."""
    from app import actions
    from trainer.presets import resolve_preset
    from trainer.probe.job import WASTED_EXIT

    source = Path(resolve_preset(args.config))
    probed = actions.probe(
        source, actions.OPERATOR, args.prompts, here=True, log=lambda line: print(line, file=sys.stderr)
    )
    print(probed.report.to_text())
    return WASTED_EXIT if probed.report.verdict == "wasted" else 0


def cmd_fork(args: argparse.Namespace) -> int:
    """Create a fork of a run at a checkpoint and train it (foreground unless --detach)."""
    from app import actions

    run_id = actions.fork(args.run_id, args.step, args.set, actions.OPERATOR, args.name)
    print(f"run {run_id}: fork of run {args.run_id} at step {args.step}; steps continue from {args.step + 1}")
    if args.detach:
        started = actions.start_now(run_id)
        print(f"run {run_id} started in the background ({started_text(started)}); follow it with: grpo-studio runs")
        return 0

    return foreground(run_id, args.verbose)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Held-out evaluation of base vs tuned, printed as a table and stored on the run."""
    from app import actions
    from app.cli.output import Progress, evaluation_lines

    def announce() -> None:
        print(f"scoring base and tuned on up to {args.k} held-out problems (greedy, then {args.samples} samples each)")

    results = actions.evaluate(
        args.run_id, args.adapter, args.k, args.samples, here=True, on_answers=Progress("answers"), announce=announce
    )
    print("\n".join(evaluation_lines(results, args.run_id, args.adapter, args.samples)))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Zip, merge and/or push a run's adapter; write its metrics as CSV or Parquet."""
    from app import actions

    if not (args.zip or args.merge or args.push or args.metrics):
        print("grpo-studio: export needs --zip PATH, --merge DIR, --push REPO and/or --metrics FILE", file=sys.stderr)
        return 2
    if args.push and not (args.token or os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")):
        print(
            "grpo-studio: --push needs a Hugging Face token with write access: --token, or set HF_TOKEN",
            file=sys.stderr,
        )
        return 2
    for line in actions.export(
        args.run_id,
        args.adapter,
        zip_to=args.zip,
        merge_into=args.merge,
        push_to=args.push,
        token=args.token,
        metrics_to=args.metrics,
    ):
        print(line)
    return 0


def cmd_build_tiny(args: argparse.Namespace) -> int:
    """Rebuild the built-in model (into --into, else a fresh directory under the data dir) and print its build time
    and held-out correctness beside the shipped model's."""
    import tempfile
    import time
    from pathlib import Path

    from transformers import AutoModelForCausalLM

    from storage.db import data_dir
    from trainer.config import SYSTEM_PROMPT
    from trainer.evaluation.evaluate import score_heldout
    from trainer.loading.backend import load_tokenizer
    from trainer.loading.data import arithmetic_problems
    from trainer.loading.tiny import build_tiny_model, shipped_model, tiny_threads

    if args.into:
        target = Path(args.into)
    else:
        (data_dir() / "models").mkdir(parents=True, exist_ok=True)
        target = Path(tempfile.mkdtemp(prefix="tiny-rebuild-", dir=data_dir() / "models"))
    print(f"building the built-in model into {target} (1-2 minutes on 2 quiet cores)", flush=True)
    started = time.perf_counter()
    build_tiny_model(target)
    print(f"built in {time.perf_counter() - started:.0f} s", flush=True)
    shipped = shipped_model()
    for label, path in (("rebuilt", target), ("shipped", shipped)):
        if path is None:
            continue
        model = AutoModelForCausalLM.from_pretrained(path)
        with tiny_threads():  # the thread setting the worker uses
            score = score_heldout(model, load_tokenizer(str(path)), arithmetic_problems("test"), SYSTEM_PROMPT)
        print(
            f"{label:<8} held-out correctness {score.correct:.1%}, strict format {score.formatted:.1%} over {score.n}"
        )
    return 0
