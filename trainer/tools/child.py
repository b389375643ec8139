"""The tool process's own side: ``python -m trainer.tools.child REQUESTS REPLIES SPECS MEMORY_MB``, started by
:class:`trainer.tools.process.ToolProcess`, never by hand.

It imports the run's tools and environment class by their specs (the same loader as the worker's,
trainer.tools.loading), then answers one request at a time from the REQUESTS pipe on the REPLIES pipe until the
training process closes REQUESTS or kills it. Before any user code runs it lowers its own address-space limit to
MEMORY_MB (hard and soft: a tool that asks for more gets MemoryError, which becomes its answer) and asks the kernel to
kill it when its parent dies (``PR_SET_PDEATHSIG``), so a worker killed with ``kill -9`` leaves no tool process
behind. Its standard output goes to standard error: a tool's ``print`` reaches the run's log and never the replies.

A request is ``(drops, message)``: ``drops`` the environment instances the training process no longer holds (freed
here), ``message`` one of

- ``("call", spec, args, kwargs)``: call the tool ``spec`` names,
- ``("new", instance)``: make an environment instance with no argument (TRL's factory call),
- ``("method", instance, name, args, kwargs)``: call one of an instance's methods (a tool, ``reset``, ``get_reward``),
- ``("get", instance, name)`` and ``("set", instance, name, value)``: an instance's attribute, which a reward reads.

The reply is ``("ok", value)`` or ``("raised", "error: Type: message")``; an ``async`` tool is run to its end on this
process's own event loop. Nothing here bounds a call: the parent kills this process at the limit.
"""

from __future__ import annotations

import asyncio
import ctypes
import inspect
import json
import resource
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the process that started it ends (elsewhere: nothing)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _limit_memory(memory_mb: int) -> None:
    """Cap this process's address space at ``memory_mb`` MiB, hard and soft (a tool can't raise it again unless it
    runs as root with CAP_SYS_RESOURCE: SECURITY.md)."""
    if memory_mb > 0:
        cap = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _error(exc: BaseException) -> str:
    """As trainer.tools.limits.error_answer (this process imports only what it must before the user's code)."""
    return f"error: {type(exc).__name__}: {exc}" if str(exc) else f"error: {type(exc).__name__}"


def _run(loop: asyncio.AbstractEventLoop, value: Any) -> Any:
    """A call's value, an ``async`` tool's awaited on this process's loop."""
    return loop.run_until_complete(value) if inspect.isawaitable(value) else value


def serve(requests: Connection, replies: Connection, specs: dict[str, Any]) -> int:
    """Load the tools and environment ``specs`` names, say ready, then answer requests until the parent closes
    them. Returns the exit status."""
    from trainer.tools.loading import load_environment, load_tool

    try:
        tools = {spec: load_tool(spec) for spec in specs.get("tools", [])}
        environment = load_environment(specs["environment"]) if specs.get("environment") else None
    except Exception as exc:  # noqa: BLE001 - the user's module failed to import: said to the parent
        replies.send(("raised", _error(exc)))
        return 1
    replies.send(("ok", "ready"))
    loop = asyncio.new_event_loop()
    instances: dict[int, Any] = {}
    while True:
        try:
            drops, message = requests.recv()
        except EOFError:  # the training process closed its end: the run is over
            return 0
        for instance in drops:
            instances.pop(instance, None)
        kind = message[0]
        try:
            if kind == "call":
                _, spec, args, kwargs = message
                value = _run(loop, tools[spec](*args, **kwargs))
            elif kind == "new":
                instances[message[1]] = environment()
                value = None
            elif kind == "method":
                _, instance, name, args, kwargs = message
                value = _run(loop, getattr(instances[instance], name)(*args, **kwargs))
            elif kind == "get":
                value = getattr(instances[message[1]], message[2])
            else:  # "set"
                setattr(instances[message[1]], message[2], message[3])
                value = None
            reply = ("ok", value)
        except BaseException as exc:  # noqa: BLE001 - a tool's failure is its answer, SystemExit included
            reply = ("raised", _error(exc))
        try:
            replies.send(reply)
        except Exception as exc:  # noqa: BLE001 - an answer pickle can't carry: nothing was written yet
            replies.send(("raised", f"error: the tool's answer could not be sent back: {_error(exc)[7:]}"))


def main(argv: list[str]) -> int:
    requests_fd, replies_fd, specs, memory_mb = argv
    _die_with_parent()
    _limit_memory(int(memory_mb))
    sys.stdout = sys.stderr  # a tool's print goes to the run's log, not into the replies
    requests, replies = Connection(int(requests_fd), writable=False), Connection(int(replies_fd), readable=False)
    return serve(requests, replies, json.loads(specs))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
