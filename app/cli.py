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
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli_output import follow, foreground, quiet_libraries, quiet_logging, started_text, version
from app.cli_probe_fork import cmd_fork, cmd_probe, fork_options, probe_options
from app.terminal import guarded_terminal
from trainer.safe_text import printable

if TYPE_CHECKING:
    from app.actions import ActionError


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

    try:
        return args.func(args)
    except ActionError as exc:  # a refusal: what is wrong, one sentence (or one problem a line)
        return _refused(exc)
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
    p.add_argument("--adapter", default="final", help='"final" or "step N" (a checkpoint; default final)')


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
    p.add_argument("config", help="a YAML or JSON file with RunConfig fields, or a preset's name (grpo-studio presets)")
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


def cmd_run(args: argparse.Namespace) -> int:
    """Validate the config (exit 2 with every problem, starting nothing), create the run, train it."""
    from app import actions
    from trainer.presets import resolve_preset

    source = Path(resolve_preset(args.config))
    checked = actions.validate(source, actions.OPERATOR, name=args.name)
    if checked.problems:
        return _refused(actions.ActionError(f"{args.config}: invalid run config", checked.problems))
    for note in checked.notes + checked.warnings:
        print(f"note: {note}", file=sys.stderr)
    launched = actions.launch(checked.config, actions.OPERATOR, start="detached" if args.detach else "here")
    if launched.started is None:
        print(f"run {launched.run_id}: {launched.name}")
        return foreground(launched.run_id)
    return _started(launched.run_id, launched.started, args.detach, "started")


def _started(run_id: int, started: int | str, detach: bool, verb: str) -> int:
    """What ``run`` and ``resume`` say after starting a worker elsewhere: a Slurm job refused (exit 1, with Slurm's
    words), a detached worker (exit 0), or a Slurm job followed in the foreground as ``run`` follows a local one."""
    if started == "":
        from storage import queries
        from storage.db import get_sessionmaker

        with get_sessionmaker().begin() as session:
            error = queries.get_run(session, run_id).error or "Slurm refused the job"
        print(f"grpo-studio: run {run_id}: {error.strip().splitlines()[0]}", file=sys.stderr)
        return 1
    if detach:
        print(f"run {run_id} {verb} in the background ({started_text(started)}); follow it with: grpo-studio runs")
        return 0
    print(f"run {run_id} {verb} as Slurm job {started}: following it here (Ctrl-C stops the job)", flush=True)
    return follow(run_id)


def _refused(exc: ActionError) -> int:
    """Print an action's refusal (every problem of a config, one a line) and return its exit code."""
    if len(exc.problems) > 1 or exc.problems != [exc.message]:
        print(f"grpo-studio: {exc.message}:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
    else:
        print(f"grpo-studio: {exc.message}", file=sys.stderr)
    return exc.exit_code


def cmd_worker(args: argparse.Namespace) -> int:
    """Train an existing run in this process: what ``python -m trainer.job.worker RUN_ID`` does."""
    from trainer.job.worker import main as worker_main

    return worker_main([str(args.run_id)])


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a stopped or failed run."""
    from app import actions

    started = actions.resume(args.run_id, start="detached" if args.detach else "here")
    if started is None:
        return foreground(args.run_id)
    return _started(args.run_id, started, args.detach, "resumed")


def cmd_stop(args: argparse.Namespace) -> int:
    """Send a stop request to a run's worker."""
    from app import actions

    sent = actions.stop(args.run_id)
    print(f"run {args.run_id}: " + ("stop requested" if sent else "stopped before a worker took it"))
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    """Print the presets: name (what ``run`` takes), title, model and data set."""
    from trainer.presets import load_preset, preset_files, preset_title

    for path in preset_files():
        config = load_preset(path)
        print(f"{path.stem:<20} {preset_title(path)}")
        print(f"{'':<20} model {config.model_name_or_path}, data {config.dataset_name}, {config.max_steps} steps")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    """Print the runs table (after reconciling runs whose worker died)."""
    from app import actions
    from storage.db import get_sessionmaker
    from trainer.job.launch import poll_slurm, reconcile

    states = poll_slurm()  # one squeue for every live job, before the transaction
    with get_sessionmaker().begin() as session:
        reconcile(session, states)
    summaries = actions.runs()
    if not summaries:
        print("No runs yet. Start one with: grpo-studio run tiny-offline (or grpo-studio serve)")
        return 0
    places = actions.places(summaries)
    errors = _errors([s.id for s in summaries])
    print(f"{'id':>4}  {'name':<28} {'status':<10} {'step':>11}  {'last reward':<11}  where")
    for s in summaries:
        run = actions.run_json(s, places[s.id])
        step = f"{s.current_step}/{s.total_steps}"
        shown = "-" if s.last_reward is None else f"{s.last_reward:.3f}"
        name = printable(s.name, one_line=True)[:28]
        print(f"{s.id:>4}  {name:<28} {s.status!s:<10} {step:>11}  {shown:<11}  {run['where']}")
        if errors.get(s.id):
            print(f"{'':6}error: {printable(errors[s.id], one_line=True)[:200]}")
        if run["health"]:  # a frozen worker or a hanging step must not read as a healthy "running"
            print(f"{'':>6}{run['health']}")
    return 0


def _errors(run_ids: list[int]) -> dict[int, str]:
    """Each run's error, its last line (the runs list shows one line a run)."""
    from storage import queries
    from storage.db import get_sessionmaker

    with get_sessionmaker().begin() as session:
        errors = {r.id: r.error for r in queries.list_runs(session) if r.id in run_ids}
    return {i: e.strip().splitlines()[-1] for i, e in errors.items() if e and e.strip()}


def cmd_logs(args: argparse.Namespace, poll_seconds: float = 1.0) -> int:
    """Print a run's log lines, oldest first; with ``--follow``, new ones as they arrive until the run has ended."""
    import time
    from datetime import datetime

    from app import actions

    after = 0
    while True:
        read = actions.log(args.run_id, after)
        for line in read["lines"]:
            stamp = datetime.fromisoformat(line["time"])
            print(f"{stamp:%Y-%m-%d %H:%M:%S} {line['level']:<7} {line['message']}", flush=True)
        after = read["next_after"]
        if not args.follow or (read["ended"] and not read["lines"]):
            return 0
        time.sleep(poll_seconds)


def cmd_eval(args: argparse.Namespace) -> int:
    """Held-out evaluation of base vs tuned, printed as a table and stored on the run."""
    from app import actions
    from app.cli_output import Progress, evaluation_lines

    print(f"scoring base and tuned on up to {args.k} held-out problems (greedy, then {args.samples} samples each)")
    results = actions.evaluate(
        args.run_id, args.adapter, args.k, args.samples, here=True, on_answers=Progress("answers")
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


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the dashboard (blocks)."""
    import os

    from app.access import Access
    from app.server import parse_auth, parse_size, serve

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
    # (quiet_libraries ran for every command: the workers the dashboard starts inherit it)
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    print(f"grpo-studio {version()}: open http://{shown}:{args.port}/ in a browser (Ctrl-C stops the dashboard; runs")
    print("keep training)", flush=True)
    serve(args.host, args.port, auth or None, access, args.max_concurrent_runs, max_upload)
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


def _find_run(session, run_id: int):
    """The run, or None after telling the user there is no such run."""
    from storage import queries

    run = queries.get_run(session, run_id)
    if run is None:
        print(f"grpo-studio: no run with id {run_id}", file=sys.stderr)
    return run


if __name__ == "__main__":
    sys.exit(main())
