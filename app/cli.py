"""The ``grpo-studio`` command line.

    grpo-studio run CONFIG.yaml [--detach]   create a run and train it (foreground, Ctrl-C stops gracefully)
    grpo-studio probe CONFIG.yaml            sample and score a few groups first: would the run learn? (exit 3: no)
    grpo-studio fork RUN_ID --step N [--set key=value ...]   a new run from a checkpoint of another, settings changed
    grpo-studio worker RUN_ID                train an existing run in this process (as python -m trainer.job.worker)
    grpo-studio resume RUN_ID [--detach]     continue a stopped or failed run from its latest checkpoint
    grpo-studio stop RUN_ID                  ask a run's worker to stop at the next step
    grpo-studio runs                         list runs with status, step and last reward
    grpo-studio logs RUN_ID [--follow]       a run's log (the traceback of a failure too); --follow until it ends
    grpo-studio eval RUN_ID [--k 200]         held-out correctness of base vs tuned
    grpo-studio export RUN_ID --zip/--merge/--push   the adapter as a zip, merged into the base, or to the Hub
    grpo-studio serve [--host H] [--port P]   start the dashboard (queue, monitor, runs, compare)
    grpo-studio build-tiny                   build (or find) the built-in model and score it on held-out problems

Heavy packages are imported inside the commands that need them, so ``grpo-studio runs`` answers instantly.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from app.cli_output import foreground, quiet_libraries, quiet_logging, started_text, version
from app.cli_probe_fork import cmd_fork, cmd_probe, fork_options, probe_options


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``grpo-studio`` console script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "allow_unisolated_code", False):
        from trainer.scoring.sandbox import ALLOW_UNISOLATED_ENV

        os.environ[ALLOW_UNISOLATED_ENV] = "1"  # this process's validation and every worker it starts
    quiet_logging()
    from sqlalchemy.exc import SQLAlchemyError

    from storage.db import StorageError, describe_error

    try:
        return args.func(args)
    except StorageError as exc:  # a damaged or unreachable database: one sentence, no traceback
        print(f"grpo-studio: {exc}", file=sys.stderr)
        return 2
    except SQLAlchemyError as exc:
        print(f"grpo-studio: {describe_error(exc)}", file=sys.stderr)
        return 2


def _unisolated_code_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-unisolated-code",
        action="store_true",
        help="let code_tests run model-written code where it can't be sandboxed (see SECURITY.md; you accept the risk)",
    )


def _add_run_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", type=int, help="the run's id, as `grpo-studio runs` lists it")


def _add_detach(p: argparse.ArgumentParser) -> None:
    p.add_argument("--detach", action="store_true", help="start a background worker and return at once")


def _add_adapter(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adapter", default="final", help='"final" or "step N" (a checkpoint)')


def _command(sub, name: str, func, help: str, *options) -> argparse.ArgumentParser:
    """A subcommand running ``func``, with the shared ``options`` (``_add_run_id`` and the like) added in order."""
    p = sub.add_parser(name, help=help)
    for add in options:
        add(p)
    p.set_defaults(func=func)
    return p


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-studio", description="Launch and watch GRPO fine-tuning runs.")
    parser.add_argument("--version", action="version", version=f"grpo-studio {version()}")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    p = _command(sub, "run", cmd_run, "create a run from a YAML/JSON config and train it")
    p.add_argument("config", help="a YAML or JSON file with RunConfig fields")
    p.add_argument("--name", help="override the run name")
    _add_detach(p)
    _unisolated_code_flag(p)

    probe_help = "sample and score a few groups with the base model before training"
    _command(sub, "probe", cmd_probe, probe_help, probe_options, _unisolated_code_flag)
    fork_help = "start a new run from a saved checkpoint of another run"
    _command(sub, "fork", cmd_fork, fork_help, _add_run_id, fork_options, _add_detach, _unisolated_code_flag)

    _command(
        sub,
        "worker",
        cmd_worker,
        "train an existing run in this process (as python -m trainer.job.worker does)",
        _add_run_id,
    )
    _command(
        sub,
        "resume",
        cmd_resume,
        "continue a stopped or failed run from its latest checkpoint",
        _add_run_id,
        _add_detach,
        _unisolated_code_flag,
    )
    _command(sub, "stop", cmd_stop, "stop a run at its next step boundary", _add_run_id)
    _command(sub, "runs", cmd_runs, "list runs")
    p = _command(sub, "logs", cmd_logs, "print a run's log, with the traceback of a failure", _add_run_id)
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until the run ends")
    p = _command(sub, "eval", cmd_eval, "score base and tuned on held-out problems", _add_run_id)
    p.add_argument("--k", type=int, default=200, help="held-out problems (default 200)")
    p.add_argument("--samples", type=int, default=4, help="sampled answers per problem for pass@1 (0: greedy only)")
    _add_adapter(p)

    p = _command(sub, "export", cmd_export, "zip, merge or push a run's adapter", _add_run_id, _add_adapter)
    p.add_argument("--zip", metavar="PATH", help="write the adapter as a zip")
    p.add_argument("--merge", metavar="DIR", help="merge into the base and save a full model directory")
    p.add_argument("--push", metavar="REPO", help="push to this Hub repo (the merged model with --merge)")
    p.add_argument("--token", help="Hugging Face token (default: $HF_TOKEN)")

    p = _command(sub, "serve", cmd_serve, "start the dashboard")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in the container)")
    p.add_argument("--port", type=int, default=7860, help="port to listen on (default 7860)")
    p.add_argument("--auth", help="user:password protecting the UI and its API (or set GRPO_STUDIO_AUTH)")
    p.add_argument(
        "--allow-custom-rewards",
        action="store_true",
        help="let the form accept path/to/file.py:function rewards (runs arbitrary code)",
    )
    p.add_argument(
        "--allow-path",
        action="append",
        default=[],
        metavar="DIR",
        help="let dashboard users use local models and data files under DIR (repeatable; the data dir is always allowed)",
    )
    p.add_argument(
        "--max-concurrent-runs",
        type=int,
        default=1,
        help="training runs at once (default 1; on a machine with several GPUs, up to one per GPU)",
    )
    _unisolated_code_flag(p)

    _command(sub, "build-tiny", cmd_build_tiny, "build the built-in model and report its held-out correctness")
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    """Validate the config (exit 2 with every problem, starting nothing), create the run, train it."""
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.config import ConfigError, load_and_validate

    try:
        config, notes = load_and_validate(args.config)
    except (ConfigError, OSError) as exc:
        print(f"grpo-studio: {args.config}: {exc}", file=sys.stderr)
        return 2
    for note in notes + config.warnings():
        print(f"note: {note}", file=sys.stderr)
    if args.name:
        config.name = args.name
    with get_sessionmaker().begin() as session:
        run = queries.create_run(session, config.name, config.to_dict(), total_steps=config.max_steps)
        run_id = run.id
        if args.detach:
            from trainer.job.launch import start_worker

            pid = start_worker(session, run)
    if args.detach:
        print(f"run {run_id} started in the background ({started_text(pid)}); follow it with: grpo-studio runs")
        return 0
    print(f"run {run_id}: {config.name}")
    return foreground(run_id)


def cmd_worker(args: argparse.Namespace) -> int:
    """Train an existing run in this process: what ``python -m trainer.job.worker RUN_ID`` does."""
    from trainer.job.worker import main as worker_main

    return worker_main([str(args.run_id)])


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a stopped or failed run."""
    from storage.db import get_sessionmaker
    from trainer.job.launch import start_worker

    with get_sessionmaker().begin() as session:
        run = _find_run(session, args.run_id)
        if run is None:
            return 2
        if not run.status.resumable:
            print(f"grpo-studio: run {run.id} is {run.status}; only stopped or failed runs resume", file=sys.stderr)
            return 2
        if args.detach:
            pid = start_worker(session, run)
    if args.detach:
        print(f"run {args.run_id} resumed in the background ({started_text(pid)})")
        return 0
    return foreground(args.run_id)


def cmd_stop(args: argparse.Namespace) -> int:
    """Send a stop request to a run's worker."""
    from storage.db import get_sessionmaker
    from trainer.job.launch import stop_worker

    with get_sessionmaker().begin() as session:
        run = _find_run(session, args.run_id)
        if run is None:
            return 2
        sent = stop_worker(session, run)
    print(f"run {args.run_id}: " + ("stop requested" if sent else "no live worker; marked stopped if it was live"))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    """Print the runs table (after reconciling runs whose worker died)."""
    from app.liveness import liveness_problem
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.job.launch import reconcile

    with get_sessionmaker().begin() as session:
        reconcile(session)
        runs = queries.list_runs(session)
        rows = [
            (r.id, r.name, r.status, f"{r.current_step}/{r.total_steps}", queries.last_metric(session, r.id, "reward"))
            for r in runs
        ]
        problems = {r.id: problem[1] for r in runs if (problem := liveness_problem(r))}
    if not rows:
        print("No runs yet. Start one with: grpo-studio run examples/tiny-offline.yaml (or grpo-studio serve)")
        return 0
    print(f"{'id':>4}  {'name':<28} {'status':<10} {'step':>11}  last reward")
    for run_id, name, status, step, reward in rows:
        shown = "-" if reward is None else f"{reward:.3f}"
        print(f"{run_id:>4}  {name[:28]:<28} {status:<10} {step:>11}  {shown}")
        if run_id in problems:  # a frozen worker or a hanging step must not read as a healthy "running"
            print(f"{'':>6}{problems[run_id]}")
    return 0


def cmd_logs(args: argparse.Namespace, poll_seconds: float = 1.0) -> int:
    """Print a run's log lines, oldest first; with ``--follow``, new ones as they arrive until the run has ended."""
    import time

    from storage import queries
    from storage.db import get_sessionmaker

    last_id = 0
    while True:
        with get_sessionmaker().begin() as session:
            run = _find_run(session, args.run_id)
            if run is None:
                return 2
            lines = queries.log_since(session, args.run_id, last_id)
            ended = run.status.terminal
        for line in lines:
            print(f"{line.created_at:%Y-%m-%d %H:%M:%S} {line.level:<7} {line.message}", flush=True)
            last_id = line.id
        if not args.follow or (ended and not lines):
            return 0
        time.sleep(poll_seconds)


def cmd_eval(args: argparse.Namespace) -> int:
    """Held-out evaluation of base vs tuned, printed as a table and stored on the run."""
    from trainer.evaluation.evaluate import EvaluationError, evaluate_run
    from trainer.evaluation.run_lookup import RunLookupError

    try:
        results = evaluate_run(args.run_id, args.k, args.samples, args.adapter)
    except (EvaluationError, RunLookupError) as exc:
        print(f"grpo-studio: {exc}", file=sys.stderr)
        return 2
    from app.cli_output import evaluation_lines

    print("\n".join(evaluation_lines(results, args.run_id, args.adapter, args.samples)))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Zip, merge and/or push a run's adapter."""
    from pathlib import Path

    from trainer.evaluation.export import merge, push, zip_adapter
    from trainer.evaluation.run_lookup import RunLookupError, run_adapter

    if not (args.zip or args.merge or args.push):
        print("grpo-studio: export needs --zip PATH, --merge DIR and/or --push REPO", file=sys.stderr)
        return 2
    try:
        config, adapter_dir = run_adapter(args.run_id, args.adapter)
        if args.zip:
            print(f"adapter zipped to {zip_adapter(adapter_dir, Path(args.zip))}")
        folder = adapter_dir
        if args.merge:
            folder = merge(config, adapter_dir, Path(args.merge))
            print(f"merged model saved to {folder}")
        if args.push:
            print(f"pushed to {push(folder, args.push, args.token)}")
    except RunLookupError as exc:  # ExportError included
        print(f"grpo-studio: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the dashboard (blocks)."""
    import os

    from app.access import Access
    from app.server import parse_auth, serve

    auth, source = (args.auth, "--auth") if args.auth else (os.environ.get("GRPO_STUDIO_AUTH"), "GRPO_STUDIO_AUTH")
    try:
        parse_auth(auth or None)
    except ValueError as exc:
        print(f"grpo-studio: {source}: {exc}", file=sys.stderr)
        return 2
    missing = [d for d in args.allow_path if not os.path.isdir(d)]
    if missing:
        print(f"grpo-studio: --allow-path {missing[0]}: no such directory", file=sys.stderr)
        return 2
    access = Access(args.allow_custom_rewards, tuple(os.path.abspath(d) for d in args.allow_path))
    quiet_libraries()  # the workers the dashboard starts inherit it
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    print(f"grpo-studio {version()}: open http://{shown}:{args.port}/ in a browser (Ctrl-C stops the dashboard; runs")
    print("keep training)", flush=True)
    serve(args.host, args.port, auth or None, access, args.max_concurrent_runs)
    return 0


def cmd_build_tiny(args: argparse.Namespace) -> int:
    """Build the built-in model (or find it cached) and print its build time and held-out correctness."""
    import json
    import time

    from trainer.config import SYSTEM_PROMPT
    from trainer.evaluation.evaluate import score_heldout
    from trainer.loading.backend import load_tokenizer
    from trainer.loading.data import arithmetic_problems
    from trainer.loading.tiny import tiny_model_dir

    started = time.perf_counter()
    path = tiny_model_dir()
    info = json.loads((path / "grpo_studio_tiny.json").read_text())
    print(
        f"built-in model: {path} (built in {info['build_seconds']} s; this call {time.perf_counter() - started:.1f} s)"
    )
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path)
    score = score_heldout(model, load_tokenizer(str(path)), arithmetic_problems("test"), SYSTEM_PROMPT)
    print(f"held-out correctness {score.correct:.1%}, strict format {score.formatted:.1%} over {score.n} problems")
    return 0


def _find_run(session, run_id: int):
    """The run, or None after telling the user there is no such run."""
    from storage import queries

    run = queries.get_run(session, run_id)
    if run is None:
        print(f"grpo-studio: no run with id {run_id}", file=sys.stderr)
    return run


if __name__ == "__main__":
    sys.exit(main())
