"""The ``grpo-studio`` command line.

    grpo-studio launch CONFIG.yaml [--detach]   create a run and train it (foreground, Ctrl-C stops gracefully)
    grpo-studio probe CONFIG.yaml            sample and score a few groups first: would the run learn? (exit 3: no)
    grpo-studio sweep CONFIG --grid "beta=0,0.04"   one run per point, each checked and probed first; pruned early
    grpo-studio sweeps [--id ID]             the sweeps, or one sweep's table (point, objective, why a member stopped)
    grpo-studio fork RUN_ID --step N [--set key=value ...]   a new run from a checkpoint of another, settings changed
    grpo-studio worker RUN_ID                train an existing run in this process (as python -m trainer.job.worker)
    grpo-studio resume RUN_ID [--detach]     continue a stopped or failed run from its latest checkpoint
    grpo-studio stop RUN_ID                  ask a run's worker to stop at the next step
    grpo-studio runs                         list runs with status, step and last reward
    grpo-studio prompts RUN_ID [--step N]    which prompts the model learns, has learnt, never solves; reward hacking
    grpo-studio alerts RUN_ID                a run's alerts: failure signs now and the watch's history
    grpo-studio log RUN_ID [--follow]        a run's log (the traceback of a failure too); --follow until it ends
    grpo-studio evaluate RUN_ID [--k 200]    held-out correctness of base vs tuned
    grpo-studio export RUN_ID --zip/--merge/--push/--metrics   the adapter zipped, merged or pushed; metrics as CSV
    grpo-studio serve [--host H] [--port P]   start the dashboard (queue, monitor, runs, compare)
    grpo-studio build-tiny                   build (or find) the built-in model and score it on held-out problems

The commands, their arguments and examples are the verbs of app/actions/verbs.py (the API's endpoints have the same names);
``run``, ``logs`` and ``eval`` are the old names of ``launch``, ``log`` and ``evaluate``, and still work. A verb's
command runs the function ``cmd_<verb>`` of this module or of app/cli/*.py (:data:`COMMANDS`); a verb with none prints
its action's answer as JSON, as its endpoint answers.

Heavy packages are imported inside the commands that need them, so ``grpo-studio runs`` answers instantly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence

from app.actions import verbs
from app.cli import models as cli_models
from app.cli import prompts as cli_prompts
from app.cli import runs as cli_runs
from app.cli import sweeps as cli_sweeps
from app.cli.output import quiet_libraries, quiet_logging, version
from app.cli.runs import refused
from app.cli.terminal import guarded_terminal


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``grpo-studio`` console script; returns the exit code. Everything it prints goes through
    app.cli.terminal (names, errors and log lines from the database reach the operator's terminal)."""
    try:
        with guarded_terminal():
            return _main(argv)
    except BrokenPipeError:  # `grpo-studio runs | head`: the reader left; nothing more to say, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush goes nowhere
        return 141  # a shell's status for a command ended by SIGPIPE (128 + 13)


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


# Each subcommand's help ends with real examples (tests/cli/test_cli_help.py parses every one of them).
EXAMPLES = {name: verb.examples_as(name) for verb in verbs.on(verbs.CLI) for name in (verb.name, *verb.aliases)}

TOP_HELP = """where data lives:
  $GRPO_STUDIO_HOME (default ~/.grpo-studio): the database, each run's files, built models
  ($DATABASE_URL points the database elsewhere, e.g. PostgreSQL)

start here:
  grpo-studio run tiny-offline   the offline demo: the built-in tiny model learns arithmetic on a CPU
  grpo-studio serve              the dashboard, at http://127.0.0.1:7860/
  grpo-studio COMMAND --help     a command's arguments and examples"""


def _parser() -> argparse.ArgumentParser:
    """The command line: a subcommand per verb the CLI offers (and per old name), its arguments from the verb's
    parameters, its examples after them."""
    parser = argparse.ArgumentParser(
        prog="grpo-studio",
        description="Launch and watch GRPO fine-tuning runs.",
        epilog=TOP_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"grpo-studio {version()}")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    for verb in verbs.on(verbs.CLI):
        for name in (verb.name, *verb.aliases):
            shown = verb.help if name == verb.name else f"the old name of `{verb.name}`"
            epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
            p = sub.add_parser(name, help=shown, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
            for param in verb.cli_params:
                flags, keywords = param.argparse()
                p.add_argument(*flags, **keywords)
            p.set_defaults(func=COMMANDS[verb.name])
    return parser


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the dashboard (blocks). Every refusal (a malformed flag, another dashboard on this database, a port
    another program holds) is said before Gradio is imported: on a loaded machine that import took minutes."""
    import os

    from app.serve_checks import ServeRefused, claim, parse_auth, parse_size, port_problem, release
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
        from app.web.server import serve  # Gradio, at last

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


Command = Callable[[argparse.Namespace], int]


def _printed(verb: verbs.Verb) -> Command:
    """The command of a verb that has no ``cmd_`` function: its action called with the command's values, the answer
    printed as JSON (what its endpoint answers; a refusal is :func:`refused`'s, as every command's)."""

    def command(args: argparse.Namespace) -> int:
        answer = verbs.answered(verb, {p.name: getattr(args, p.name) for p in verb.cli_params})
        print(json.dumps(answer, indent=2, ensure_ascii=False, default=str))
        return 0

    command.__name__ = command.__qualname__ = f"cmd_{verb.name}"
    command.__doc__ = verb.help
    command.action = verb.action  # what tests/actions/test_verbs.py reads in place of the source's ``actions.NAME``
    return command


def _command(verb: verbs.Verb) -> Command:
    """The function ``grpo-studio VERB`` runs: ``cmd_<verb>`` (a dash read as an underscore) here or in a CLI module,
    else :func:`_printed`. A verb with no action (serve, worker) must have its function."""
    name = "cmd_" + verb.name.replace("-", "_")
    for module in (sys.modules[__name__], cli_models, cli_prompts, cli_runs, cli_sweeps):
        if hasattr(module, name):
            return getattr(module, name)
    if verb.action is None:
        raise LookupError(f"the verb {verb.name!r} has no action and no {name} in app/cli/main.py or app/cli/*.py")
    return _printed(verb)


# Each verb's command (app/actions/verbs.py: its name, arguments and examples); each old name runs the same one.
COMMANDS: dict[str, Command] = {verb.name: _command(verb) for verb in verbs.on(verbs.CLI)}


if __name__ == "__main__":
    sys.exit(main())
