"""The ``grpo-studio`` command line.

    grpo-studio run CONFIG.yaml [--detach]   create a run and train it (foreground, Ctrl-C stops gracefully)
    grpo-studio probe CONFIG.yaml            sample and score a few groups first: would the run learn? (exit 3: no)
    grpo-studio fork RUN_ID --step N [--set key=value ...]   a new run from a checkpoint of another, settings changed
    grpo-studio worker RUN_ID                train an existing run in this process (as python -m trainer.job.worker)
    grpo-studio resume RUN_ID [--detach]     continue a stopped or failed run from its latest checkpoint
    grpo-studio stop RUN_ID                  ask a run's worker to stop at the next step
    grpo-studio runs                         list runs with status, step and last reward
    grpo-studio prompts RUN_ID [--step N]    which prompts the model learns, has learnt, never solves; reward hacking
    grpo-studio alerts RUN_ID                a run's alerts: failure signs now and the watch's history
    grpo-studio logs RUN_ID [--follow]       a run's log (the traceback of a failure too); --follow until it ends
    grpo-studio eval RUN_ID [--k 200]         held-out correctness of base vs tuned
    grpo-studio export RUN_ID --zip/--merge/--push/--metrics   the adapter zipped, merged or pushed; metrics as CSV
    grpo-studio serve [--host H] [--port P]   start the dashboard (queue, monitor, runs, compare)
    grpo-studio build-tiny                   build (or find) the built-in model and score it on held-out problems

Heavy packages are imported inside the commands that need them, so ``grpo-studio runs`` answers instantly.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.cli_models import cmd_build_tiny, cmd_eval, cmd_export, cmd_fork, cmd_probe, fork_options, probe_options
from app.cli_output import quiet_libraries, quiet_logging, version
from app.cli_prompts import cmd_alerts, cmd_prompts, prompts_options
from app.cli_runs import cmd_logs, cmd_presets, cmd_resume, cmd_run, cmd_runs, cmd_stop, cmd_worker, refused
from app.terminal import guarded_terminal

if TYPE_CHECKING:
    pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``grpo-studio`` console script; returns the exit code. Everything it prints goes through
    app.terminal (names, errors and log lines from the database reach the operator's terminal)."""
    with guarded_terminal():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "allow_unisolated_code", False):
        from trainer.scoring.sandbox import ALLOW_UNISOLATED_ENV

        os.environ[ALLOW_UNISOLATED_ENV] = "1"  # this process's validation and every worker it starts
    quiet_logging()
    quiet_libraries()  # every command: the libraries' warnings and progress bars say nothing about a run
    from sqlalchemy.exc import SQLAlchemyError

    from app.actions import ActionError
    from storage.db import StorageError, describe_error
    from trainer.presets import PresetNotFound

    try:
        return args.func(args)
    except ActionError as exc:  # a refusal: what is wrong, one sentence (or one problem a line)
        return refused(exc)
    except PresetNotFound as exc:  # `run`/`probe` NAME that is neither a file nor a preset
        print(f"grpo-studio: {exc}", file=sys.stderr)
        return 2
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


def _add_verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--verbose", "-v", action="store_true", help="print the worker's INFO lines too (else they go to the run's log)"
    )


def _add_adapter(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adapter", default="final", help='"final" or "step N" (a checkpoint; default final)')


# Each subcommand's help ends with real examples (tests/test_cli_help.py parses every one of them).
EXAMPLES = {
    "run": ["grpo-studio run tiny-offline", "grpo-studio run my-run.yaml --name lr-1e-4 --detach"],
    "probe": ["grpo-studio probe tiny-offline", "grpo-studio probe my-run.yaml --prompts 16"],
    "fork": ["grpo-studio fork 1 --step 20 --set beta=0.01 --set max_steps=200"],
    "worker": ["grpo-studio worker 1"],
    "resume": ["grpo-studio resume 1", "grpo-studio resume 1 --detach"],
    "stop": ["grpo-studio stop 1"],
    "prompts": ["grpo-studio prompts 1", "grpo-studio prompts 1 --step 50 --all"],
    "alerts": ["grpo-studio alerts 1"],
    "runs": ["grpo-studio runs"],
    "presets": ["grpo-studio presets"],
    "logs": ["grpo-studio logs 1", "grpo-studio logs 1 --follow"],
    "eval": ["grpo-studio eval 1", "grpo-studio eval 1 --k 50 --samples 0 --adapter 'step 20'"],
    "export": ["grpo-studio export 1 --zip adapter.zip", "grpo-studio export 1 --metrics run.csv"],
    "serve": ["grpo-studio serve", "grpo-studio serve --host 0.0.0.0 --auth me:secret"],
    "build-tiny": ["grpo-studio build-tiny"],
}

TOP_HELP = """where data lives:
  $GRPO_STUDIO_HOME (default ~/.grpo-studio): the database, each run's files, built models
  ($DATABASE_URL points the database elsewhere, e.g. PostgreSQL)

start here:
  grpo-studio run tiny-offline   the offline demo: the built-in tiny model learns arithmetic on a CPU
  grpo-studio serve              the dashboard, at http://127.0.0.1:7860/
  grpo-studio COMMAND --help     a command's arguments and examples"""


def _command(sub, name: str, func, help: str, *options) -> argparse.ArgumentParser:
    """A subcommand running ``func``, with the shared ``options`` (``_add_run_id`` and the like) added in order, and
    its examples after the arguments."""
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
    p = sub.add_parser(name, help=help, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    for add in options:
        add(p)
    p.set_defaults(func=func)
    return p


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grpo-studio",
        description="Launch and watch GRPO fine-tuning runs.",
        epilog=TOP_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"grpo-studio {version()}")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    p = _command(sub, "run", cmd_run, "create a run from a YAML/JSON config and train it")
    p.add_argument("config", help="a YAML or JSON file with RunConfig fields, or a preset's name (grpo-studio presets)")
    p.add_argument("--name", help="override the run name")
    _add_detach(p)
    _add_verbose(p)
    _unisolated_code_flag(p)

    probe_help = "sample and score a few groups with the base model before training"
    _command(sub, "probe", cmd_probe, probe_help, probe_options, _unisolated_code_flag)
    fork_help = "start a new run from a saved checkpoint of another run"
    fork_flags = (_add_run_id, fork_options, _add_detach, _add_verbose, _unisolated_code_flag)
    _command(sub, "fork", cmd_fork, fork_help, *fork_flags)

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
        _add_verbose,
        _unisolated_code_flag,
    )
    _command(sub, "stop", cmd_stop, "stop a run at its next step boundary", _add_run_id)
    prompts_help = "a run's learning map (each prompt's pass rate and class) and its reward-hacking watch"
    _command(sub, "prompts", cmd_prompts, prompts_help, _add_run_id, prompts_options)
    alerts_help = "a run's alerts: failure signs now and the reward-hacking watch's history (as the Monitor's banner)"
    _command(sub, "alerts", cmd_alerts, alerts_help, _add_run_id)
    _command(sub, "runs", cmd_runs, "list runs")
    _command(sub, "presets", cmd_presets, "list the ready-made configs (run one with: grpo-studio run NAME)")
    p = _command(sub, "logs", cmd_logs, "print a run's log, with the traceback of a failure", _add_run_id)
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until the run ends")
    p = _command(sub, "eval", cmd_eval, "score base and tuned on held-out problems", _add_run_id)
    p.add_argument("--k", type=int, default=200, help="held-out problems (default 200)")
    p.add_argument(
        "--samples", type=int, default=4, help="sampled answers per problem for pass@1 (default 4; 0: greedy only)"
    )
    _add_adapter(p)

    p = _command(sub, "export", cmd_export, "zip, merge or push a run's adapter", _add_run_id, _add_adapter)
    p.add_argument("--zip", metavar="PATH", help="write the adapter as a zip")
    p.add_argument("--merge", metavar="DIR", help="merge into the base and save a full model directory")
    p.add_argument("--push", metavar="REPO", help="push to this Hub repo (the merged model with --merge)")
    p.add_argument("--token", help="Hugging Face token (default: $HF_TOKEN)")
    p.add_argument("--metrics", metavar="FILE", help="write the run's metrics, a column per key, as .csv or .parquet")

    p = _command(sub, "serve", cmd_serve, "start the dashboard")
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 in the container)"
    )
    p.add_argument(
        "--port",
        type=int,
        default=os.environ.get("GRPO_STUDIO_PORT", 7860),  # argparse reads a text default with type=int
        help="port to listen on (default 7860, or $GRPO_STUDIO_PORT)",
    )
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
        "--max-upload-size",
        default="1GB",
        metavar="SIZE",
        help="largest data set upload, refused while it arrives (default 1GB; e.g. 500MB, 5GB)",
    )
    p.add_argument(
        "--max-concurrent-runs",
        type=int,
        default=1,
        help="training runs at once (default 1; on a machine with several GPUs, up to one per GPU)",
    )
    _unisolated_code_flag(p)

    p = _command(
        sub, "build-tiny", cmd_build_tiny, "rebuild the built-in model; its held-out correctness vs the shipped one"
    )
    p.add_argument("--into", metavar="DIR", help="build into DIR (default: a new directory under the data dir)")
    return parser


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the dashboard (blocks)."""
    import os

    from app.serve_checks import ServeRefused, claim, port_problem, release
    from app.server import parse_auth, parse_size, serve
    from trainer.config.access import Access

    auth, source = (args.auth, "--auth") if args.auth else (os.environ.get("GRPO_STUDIO_AUTH"), "GRPO_STUDIO_AUTH")
    try:
        parse_auth(auth or None)
    except ValueError as exc:
        print(f"grpo-studio: {source}: {exc}", file=sys.stderr)
        return 2
    try:
        max_upload = parse_size(args.max_upload_size)
    except ValueError as exc:
        print(f"grpo-studio: --max-upload-size: {exc}", file=sys.stderr)
        return 2
    missing = [d for d in args.allow_path if not os.path.isdir(d)]
    if missing:
        print(f"grpo-studio: --allow-path {missing[0]}: no such directory", file=sys.stderr)
        return 2
    access = Access(args.allow_custom_rewards, tuple(os.path.abspath(d) for d in args.allow_path))
    try:  # before saying where to open it: another dashboard on this database, or another program on the port
        lock = claim(args.host, args.port)
    except ServeRefused as exc:
        print(f"grpo-studio: {exc}", file=sys.stderr)
        return 2
    try:
        taken = port_problem(args.host, args.port)
        if taken:
            print(f"grpo-studio: {taken}", file=sys.stderr)
            return 2
        # (quiet_libraries ran for every command: the workers the dashboard starts inherit it)
        shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
        print(
            f"grpo-studio {version()}: open http://{shown}:{args.port}/ in a browser (Ctrl-C stops the dashboard; runs"
        )
        print("keep training)", flush=True)
        serve(args.host, args.port, auth or None, access, args.max_concurrent_runs, max_upload)
    finally:
        release(lock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
