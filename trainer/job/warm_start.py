"""``python -m trainer.job.warm_start --pipes R,W RUN_ID``: a worker that forks a warm parent before it trains.

The launcher's side, and why, is trainer.supervise.warm_start. This process imports the libraries every worker on
TRL's path imports (:func:`preload`), forks the warm parent (:func:`serve`), and trains RUN_ID as
``python -m trainer.job.worker RUN_ID`` does. The warm parent leaves the worker's session for one of its own, sends
its output to /dev/null, and waits on the launcher's pipes; for each start it forks a child set up as a fresh
detached worker would be (:func:`_become`: a session of its own, output appended to the run's log, the launch's
working directory and environment, with what the imports set in it) and answers the child's pid once the child
leads its session, so a stop's ``killpg`` finds it. SIGTERM is held from the fork until the child has routed it to
its stop request: a stop sent the moment the pid is recorded is heard, not fatal.

The warm parent ends when the launcher's end of the pipes closes (the launcher exited) or after
trainer.supervise.warm_start.IDLE_SECONDS without a start. Its children are reaped by the kernel (SIGCHLD ignored);
a child restores SIGCHLD before it runs, so the worker's own subprocesses are waited for as in a fresh process.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys

from trainer.job.stop import StopRequest
from trainer.supervise.warm_start import IDLE_SECONDS, READY, import_settings, read_line

PRELOAD = ("torch", "transformers", "peft", "datasets", "trl")


def preload() -> None:
    """Import what every worker on TRL's path imports (the slow part of its start)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from trl import GRPOConfig, GRPOTrainer  # noqa: F401  (trl's lazy module loads them on first use)


def serve(requests: int, answers: int, started_with: dict[str, str]):
    """The warm parent's loop (in a process forked just after :func:`preload`; ``started_with``, the environment
    before it). Returns only in a child it forked, set up as that request's worker: ``(run_id, stop)``. The parent
    itself exits at the end of its requests or after :data:`IDLE_SECONDS` without one."""
    settings = import_settings(started_with)
    # What the imports set in the environment, as they would have in a fresh worker: each child keeps it.
    set_by_imports = {name: value for name, value in os.environ.items() if started_with.get(name) != value}

    os.setsid()  # out of the first worker's session: a stop of that run (killpg) is not for the parent
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps its children
    _redirect(os.devnull, os.devnull)
    os.chdir("/")
    os.write(answers, READY)
    while select.select([requests], [], [], IDLE_SECONDS)[0]:
        line = read_line(requests)
        if not line:
            break
        try:
            request = json.loads(line)
            run_id, log, cwd, env = int(request["run_id"]), request["log"], request["cwd"], dict(request["env"])
        except (ValueError, KeyError, TypeError):
            os.write(answers, b'{"refused": "unreadable request"}\n')
            continue
        if import_settings(env) != settings:
            os.write(answers, b'{"refused": "another environment"}\n')
            continue
        # SIGTERM held from the fork until the child routes it to its stop request: a stop sent the moment the
        # launcher records the pid is heard, not fatal. The pid is answered once the child leads its own session,
        # so a stop's killpg finds it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        in_session, leads = os.pipe()
        pid = os.fork()
        if pid == 0:
            stop = StopRequest()
            stop.install()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.setsid()
            for fd in (requests, answers, in_session, leads):
                os.close(fd)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            _become(log, cwd, env | set_by_imports)
            return run_id, stop
        os.close(leads)
        os.read(in_session, 1)  # b"" once the child closed its end (in its session) or died
        os.close(in_session)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        os.write(answers, json.dumps({"pid": pid}).encode() + b"\n")
    os._exit(0)


def _become(log: str, cwd: str, env: dict[str, str]) -> None:
    """Set this forked child (already leading a session of its own) up as a fresh detached worker would be: stdin
    from /dev/null, output appended to ``log``, in ``cwd`` with ``env`` (and ``cwd`` first on sys.path, as
    ``python -m`` puts it)."""
    _redirect(os.devnull, log)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[0] = cwd
    import numpy

    numpy.random.seed()  # a fresh process draws its own; a fork would repeat the parent's
    print("grpo-studio: worker forked by the launcher's warm parent (libraries already imported)", file=sys.stderr)


def _redirect(stdin: str, output: str) -> None:
    """Point fd 0 at ``stdin`` and fds 1 and 2 at ``output`` (appended)."""
    sys.stdout.flush()
    sys.stderr.flush()
    read = os.open(stdin, os.O_RDONLY)
    write = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    os.dup2(read, 0)
    os.dup2(write, 1)
    os.dup2(write, 2)
    os.close(read)
    os.close(write)


def main(argv: list[str] | None = None) -> int:
    """``python -m trainer.job.warm_start [--pipes R,W] RUN_ID``: import the libraries, fork the warm parent
    (given the launcher's pipes), and train RUN_ID as ``python -m trainer.job.worker RUN_ID`` does."""
    stop = StopRequest()
    stop.install()  # before the imports: a stop asked meanwhile is heard, not fatal (as in trainer.job.worker)
    started_with = dict(os.environ)
    argv = sys.argv[1:] if argv is None else argv
    pipes = None
    if argv[:1] == ["--pipes"] and len(argv) >= 2:
        pipes = tuple(int(fd) for fd in argv[1].split(","))
        argv = argv[2:]
    run_id = int(argv[0]) if len(argv) == 1 and argv[0].isdigit() else None
    if run_id is None:
        print("usage: python -m trainer.job.warm_start [--pipes R,W] RUN_ID", file=sys.stderr)
        return 2
    preload()
    if pipes is not None:
        if os.fork() == 0:
            run_id, stop = serve(*pipes, started_with)
        else:
            for fd in pipes:
                os.close(fd)
    from trainer.job import worker

    sys.argv = [worker.__file__, str(run_id)]
    return worker.main([str(run_id)], stop=stop)


if __name__ == "__main__":
    raise SystemExit(main())
