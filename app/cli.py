"""The ``grpo-studio`` command line.

    grpo-studio run CONFIG.yaml [--detach]   create a run and train it (foreground, Ctrl-C stops gracefully)
    grpo-studio probe CONFIG.yaml            sample and score a few groups first: would the run learn? (exit 3: no)
    grpo-studio fork RUN_ID --step N [--set key=value ...]   a new run from a checkpoint of another, settings changed
    grpo-studio worker RUN_ID                train an existing run in this process (as python -m trainer.job.worker)
    grpo-studio resume RUN_ID [--detach]     continue a stopped or failed run from its latest checkpoint
    grpo-studio stop RUN_ID                  ask a run's worker to stop at the next step
    grpo-studio runs                         list runs with status, step and last reward
    grpo-studio prompts RUN_ID [--step N]    which prompts the model learns, has learnt, never solves; reward hacking
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

from app.cli_output import follow, foreground, quiet_libraries, quiet_logging, started_text, version
from app.cli_probe_fork import cmd_fork, cmd_probe, fork_options, probe_options
from app.cli_prompts import cmd_prompts, prompts_options
from app.terminal import guarded_terminal
from trainer.safe_text import printable


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
    prompts_help = "a run's learning map (each prompt's pass rate and class) and its reward-hacking watch"
    _command(sub, "prompts", cmd_prompts, prompts_help, _add_run_id, prompts_options)
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
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.config import ConfigError, load_and_validate
    from trainer.presets import resolve_preset

    try:
        config, notes = load_and_validate(resolve_preset(args.config), name=args.name)
    except (ConfigError, OSError) as exc:
        print(f"grpo-studio: {args.config}: {exc}", file=sys.stderr)
        return 2
    for note in notes + config.warnings():
        print(f"note: {note}", file=sys.stderr)
    from trainer.job.launch import start_worker

    on_slurm = config.executor == "slurm"
    with get_sessionmaker().begin() as session:
        run = queries.create_run(session, config.name, config.to_dict(), total_steps=config.max_steps)
        run_id = run.id
        started = start_worker(session, run) if args.detach or on_slurm else None
    if not args.detach and not on_slurm:
        print(f"run {run_id}: {config.name}")
        return foreground(run_id)
    return _started(run_id, started, args.detach, "started")


def _started(run_id: int, started: int | str | None, detach: bool, verb: str) -> int:
    """What ``run`` and ``resume`` say after starting a worker elsewhere: a Slurm job refused (exit 1, with Slurm's
    words), a detached worker (exit 0), or a Slurm job followed in the foreground as ``run`` follows a local one."""
    from storage import queries
    from storage.db import get_sessionmaker

    if started is None:
        with get_sessionmaker().begin() as session:
            error = queries.get_run(session, run_id).error or "Slurm refused the job"
        print(f"grpo-studio: run {run_id}: {error.strip().splitlines()[0]}", file=sys.stderr)
        return 1
    if detach:
        print(f"run {run_id} {verb} in the background ({started_text(started)}); follow it with: grpo-studio runs")
        return 0
    print(f"run {run_id} {verb} as Slurm job {started}: following it here (Ctrl-C stops the job)", flush=True)
    return follow(run_id)


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
        on_slurm = (run.config or {}).get("executor") == "slurm"
        started = start_worker(session, run) if args.detach or on_slurm else None
    if not args.detach and not on_slurm:
        return foreground(args.run_id)
    return _started(args.run_id, started, args.detach, "resumed")


def cmd_stop(args: argparse.Namespace) -> int:
    """Send a stop request to a run's worker."""
    from storage.db import get_sessionmaker
    from trainer.job.launch import stop_worker
    from trainer.job.slurm import SlurmError

    try:
        with get_sessionmaker().begin() as session:
            run = _find_run(session, args.run_id)
            if run is None:
                return 2
            sent = stop_worker(session, run)
    except SlurmError as exc:  # nothing was changed: the transaction rolled back
        print(
            f"grpo-studio: run {args.run_id}: could not reach Slurm ({exc}); try again when it answers", file=sys.stderr
        )
        return 1
    print(f"run {args.run_id}: " + ("stop requested" if sent else "no live worker; marked stopped if it was live"))
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
    from app.liveness import liveness_problem
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.job.launch import poll_slurm, reconcile
    from trainer.job.slurm import queue_positions, where

    states = poll_slurm()  # one squeue for every live job, before the transaction
    with get_sessionmaker().begin() as session:
        reconcile(session, states)
        runs = queries.list_runs(session)
        positions = queue_positions() if any(r.slurm_job_id and r.status == "queued" for r in runs) else {}
        rows = [
            (
                r.id,
                r.name,
                str(r.status),
                f"{r.current_step}/{r.total_steps}",
                queries.last_metric(session, r.id, "reward"),
                where(r.host, r.slurm_job_id, str(r.status), positions),
                (r.error or "").strip().splitlines()[-1] if r.error and r.error.strip() else "",
            )
            for r in runs
        ]
        problems = {r.id: problem[1] for r in runs if (problem := liveness_problem(r))}
    if not rows:
        print("No runs yet. Start one with: grpo-studio run tiny-offline (or grpo-studio serve)")
        return 0
    print(f"{'id':>4}  {'name':<28} {'status':<10} {'step':>11}  {'last reward':<11}  where")
    for run_id, name, status, step, reward, place, error in rows:
        shown = "-" if reward is None else f"{reward:.3f}"
        print(f"{run_id:>4}  {printable(name, one_line=True)[:28]:<28} {status:<10} {step:>11}  {shown:<11}  {place}")
        if error:
            print(f"{'':6}error: {printable(error, one_line=True)[:200]}")
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
    from app.cli_output import Progress
    from trainer.evaluation.evaluate import EvaluationError, evaluate_run
    from trainer.evaluation.run_lookup import RunLookupError

    print(f"scoring base and tuned on up to {args.k} held-out problems (greedy, then {args.samples} samples each)")
    try:
        results = evaluate_run(args.run_id, args.k, args.samples, args.adapter, on_answers=Progress("answers"))
    except (EvaluationError, RunLookupError) as exc:
        print(f"grpo-studio: {exc}", file=sys.stderr)
        return 2
    from app.cli_output import evaluation_lines

    print("\n".join(evaluation_lines(results, args.run_id, args.adapter, args.samples)))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Zip, merge and/or push a run's adapter."""
    from pathlib import Path

    from storage.db import new_export_dir
    from trainer.evaluation.export import merge, push, shareable_adapter, zip_adapter
    from trainer.evaluation.run_lookup import RunLookupError, run_adapter

    if not (args.zip or args.merge or args.push):
        print("grpo-studio: export needs --zip PATH, --merge DIR and/or --push REPO", file=sys.stderr)
        return 2
    try:
        config, adapter_dir = run_adapter(args.run_id, args.adapter)
        folder = shareable_adapter(args.run_id, config, adapter_dir, new_export_dir() / "adapter")
        if args.zip:
            print(f"adapter zipped to {zip_adapter(folder, Path(args.zip))}")
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
