"""``python -m trainer.job.warm_start --pipes R,W RUN_ID``: a worker that forks a warm parent before it trains.

The launcher's side, and why, is trainer.supervise.warm_start. This process imports the libraries every worker on
TRL's path imports (:func:`preload`), forks the warm parent (:func:`serve`), and trains RUN_ID as
``python -m trainer.job.worker RUN_ID`` does. The warm parent leaves the worker's session for one of its own, sends
its output to /dev/null, and waits on the launcher's pipes; for each start it forks a child set up as a fresh
detached worker would be (:func:`_become`: a session of its own, output appended to the run's log, the launch's
working directory and environment, with what the imports set in it) and answers the child's pid once the child
leads its session, so a stop's ``killpg`` finds it. SIGTERM is held from the fork until the child has routed it to
its stop request: a stop sent the moment the pid is recorded is heard, not fatal. Each sets its own process title
(trainer.job.proctitle): the child ``python -m trainer.job.worker RUN_ID`` with its own run's id, the parent
``python -m trainer.job.warm_start warm-parent``.

The warm parent ends when the launcher's end of the pipes closes (the launcher exited) or after
trainer.supervise.warm_start.IDLE_SECONDS without a start. Its children are reaped by the kernel (SIGCHLD ignored);
a child restores SIGCHLD before it runs, so the worker's own subprocesses are waited for as in a fresh process.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from trainer.job.proctitle import set_title
from trainer.job.stop import StopRequest
from trainer.supervise.warm_start import (
    GO,
    IDLE_SECONDS,
    MODULE,
    READY,
    WORKER_MODULE,
    import_settings,
    read_line,
    readable,
    write_all,
)

# What every worker on TRL's path imports. Not trl's GRPOTrainer: its module imports trackio (trl 1.16.0
# trainer/grpo_trainer.py:110-111), which reads TRACKIO_DIR once, as it is imported (trackio utils.py:211), and the
# worker points that under the run's directory first (trainer.job.trackers.place_trackers).
PRELOAD = ("torch", "transformers", "transformers.trainer", "peft", "datasets", "trl", "trl.trainer.grpo_config")
# Trackers that read their settings as they are imported: a warm parent that holds one would hand every child the
# first run's settings, so none serves then.
TRACKERS = ("trackio", "wandb", "mlflow", "tensorboard", "tensorboardX", "comet_ml", "swanlab")


def preload() -> bool:
    """Import what every worker on TRL's path imports (the slow part of its start). Whether a warm parent may keep
    them: no tracker came with them."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    return not any(name.split(".")[0] in TRACKERS for name in sys.modules)


def serve(requests: int, answers: int, started_with: dict[str, str]):
    """The warm parent's loop (in a process forked just after :func:`preload`; ``started_with``, the environment
    before it). Returns only in a child it forked, set up as that request's worker: ``(run_id, stop)``. The parent
    itself exits at the end of its requests or after IDLE_SECONDS without one."""
    settings = import_settings(started_with)
    # What the imports set in the environment, as they would have in a fresh worker: each child keeps it.
    set_by_imports = {name: value for name, value in os.environ.items() if started_with.get(name) != value}

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps its children
    _redirect(os.devnull, os.devnull)
    os.chdir("/")
    set_title([sys.executable, "-m", MODULE, "warm-parent"])  # not the first run's id: it trains no run
    write_all(answers, READY + b" %d\n" % os.getpid())
    while readable(requests, IDLE_SECONDS):
        line = read_line(requests)
        if not line:
            break
        try:
            request = json.loads(line)
            run_id, log, cwd, env = int(request["run_id"]), request["log"], request["cwd"], dict(request["env"])
        except (ValueError, KeyError, TypeError):
            write_all(answers, b'{"refused": "unreadable request"}\n')
            continue
        if import_settings(env) != settings:
            write_all(answers, b'{"refused": "another environment"}\n')
            continue
        child = _fork_worker(requests, answers, run_id)
        if child is not None:  # in the child: set up as the request's worker
            _become(log, cwd, env | set_by_imports)
            # ps shows a fresh worker's command line, with this run's id, not the one of the process forked from
            if not set_title([sys.executable, "-m", WORKER_MODULE, str(run_id)]):
                print("grpo-studio: this worker's process title could not be set (ps shows another's)", file=sys.stderr)
            return child
    os._exit(0)


def _fork_worker(requests: int, answers: int, run_id: int):
    """Fork the worker of ``run_id``. In the child: ``(run_id, stop)``, once its pid has reached the launcher. In the
    parent: None, the pid answered.

    SIGTERM is held from the fork until the child has routed it to its stop request, so a stop sent the moment the
    launcher records the pid is heard, not fatal. The pid is answered once the child leads a session of its own (a
    stop's killpg finds it); the child runs only after the answer is written, and exits if it never is (the parent
    died, or the launcher stopped listening): no run gets a worker its launcher does not know of."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    in_session, leads = os.pipe()
    wait_go, go = os.pipe()
    pid = os.fork()
    if pid == 0:
        stop = StopRequest()
        stop.install()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        for fd in (requests, answers, in_session, leads, go):
            os.close(fd)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        if os.read(wait_go, 1) != GO:
            os._exit(0)
        os.close(wait_go)
        return run_id, stop
    os.close(leads)
    os.close(wait_go)
    os.read(in_session, 1)  # b"" once the child closed its end (in its session) or died
    os.close(in_session)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    try:
        write_all(answers, json.dumps({"pid": pid}).encode() + b"\n")
        write_all(go, GO)
    except OSError:  # the launcher is gone: the child reads the end of its go, and exits
        pass
    os.close(go)
    return None


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
    read = os.open(stdin, os.O_RDONLY)
    write = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    os.dup2(read, 0)
    os.dup2(write, 1)
    os.dup2(write, 2)
    os.close(read)
    os.close(write)


def _start_parent(pipes: tuple[int, int], started_with: dict[str, str]):
    """Fork the warm parent twice removed (the middle process exits at once, so the parent is nobody's zombie and
    this worker has no child of its own), out of this worker's session: a stop of this run (killpg) is not for it.
    Returns only in a worker child the parent forked, as :func:`serve` does."""
    sys.stdout.flush()  # nothing buffered here is written twice
    sys.stderr.flush()
    middle = os.fork()
    if middle == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                return serve(*pipes, started_with)
        except BaseException:
            pass
        os._exit(0)
    os.waitpid(middle, 0)
    for fd in pipes:
        os.close(fd)
    return None


def main(argv: list[str] | None = None) -> int:
    """``python -m trainer.job.warm_start [--pipes R,W] RUN_ID``: import the libraries, fork the warm parent
    (given the launcher's pipes), and train RUN_ID as ``python -m trainer.job.worker RUN_ID`` does. Where the
    imports fail, or bring a tracker along, no parent is forked and the worker goes on (it reports a failed import
    itself, as a fresh one does)."""
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
    try:
        keep = preload()
    except Exception as exc:  # the worker imports them again, and fails the run saying why
        print(f"grpo-studio: no warm parent: the imports failed ({exc})", file=sys.stderr)
        keep = False
    if pipes is not None:
        if keep:
            child = _start_parent(pipes, started_with)
            if child is not None:
                run_id, stop = child
        else:
            for fd in pipes:
                os.close(fd)
    from trainer.job import worker

    sys.argv = [worker.__file__, str(run_id)]
    return worker.main([str(run_id)], stop=stop)


if __name__ == "__main__":
    raise SystemExit(main())
