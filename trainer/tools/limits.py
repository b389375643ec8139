"""A time limit on every tool call, and a tool's failure as its answer: a tool that raises or hangs ends that
rollout's turn with the error as the tool's message, never the worker.

TRL calls a tool in the training process, between two generations of the batch (trl 1.16.0
trainer/grpo_trainer.py:1964-1990): an exception there becomes ``{"error": str(e)}`` as the tool's answer, but a
tool that never returns hangs the whole step, and TRL sets no time limit. :func:`time_limited` wraps a tool so that
each call returns within ``timeout_s`` whatever the tool does: its value, or ``"error: ZeroDivisionError: division
by zero"``, or ``"error: the tool took longer than 5 s"``.

How a call is bounded, and why a thread rather than a process: each call runs in a new daemon thread that the caller
waits on with ``join(timeout)``. A join returns on time, but Python cannot stop a thread, so a hung call's thread is
left running (a daemon: it never keeps the worker from exiting) and its CPU is spent until it ends. A process per
call would kill a hung tool outright, and is the stronger isolation, but it does not fit here: an environment's
methods change the environment's own state (a game's board, a counter), which a child process would change in its
copy only; forking the training process, which holds CUDA and the database writer's threads, is unsafe (a lock held
by another thread at the fork stays held in the child); and spawning a fresh interpreter per call costs a second or
more of imports, more than a model's whole turn. A tool whose code the operator does not trust is already refused
without ``--allow-custom-rewards`` (SECURITY.md); the limit is against a tool that is slow or stuck, not hostile.

An error answered here is a normal return for TRL, so its ``tools/failure_frequency`` (the calls that raised into it,
trl 1.16.0 trainer/grpo_trainer.py:1980-1990, 2316-2320) does not count it; it counts the call. The worker counts
the error answers itself instead (``tools/error_rate``, trainer.tools.turns), which the Monitor charts.

The wrapper keeps the tool's name, signature and docstring (``functools.wraps``, whose ``__wrapped__`` inspect and
typing follow), since transformers builds the tool's JSON schema from them (``transformers.utils.get_json_schema``);
tests/test_tools.py checks that the schema of a wrapped tool is the tool's own.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

DEFAULT_TIMEOUT_S = 5.0


def error_answer(exc: BaseException) -> str:
    """A failed call's answer to the model: the exception's type and message."""
    return f"error: {type(exc).__name__}: {exc}" if str(exc) else f"error: {type(exc).__name__}"


def timeout_answer(timeout_s: float) -> str:
    """A call that ran past its limit, as its answer to the model."""
    return f"error: the tool took longer than {timeout_s:g} s"


def time_limited(tool: Callable[..., Any], timeout_s: float = DEFAULT_TIMEOUT_S) -> Callable[..., Any]:
    """``tool`` with each call bounded by ``timeout_s`` seconds and its exceptions turned into its answer (see the
    module docstring). An ``async`` tool stays ``async`` (TRL gathers those on its own event loop,
    trl 1.16.0 trainer/grpo_trainer.py:2377-2381), bounded with ``asyncio.wait_for``."""
    if inspect.iscoroutinefunction(tool):

        @functools.wraps(tool)
        async def limited_async(*args, **kwargs):
            try:
                return await asyncio.wait_for(tool(*args, **kwargs), timeout_s)
            except TimeoutError:
                return timeout_answer(timeout_s)
            except Exception as exc:  # noqa: BLE001 - a tool's failure is its answer to the model
                return error_answer(exc)

        return limited_async

    @functools.wraps(tool)
    def limited(*args, **kwargs):
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["value"] = tool(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - carried back to the caller's thread as the answer
                outcome["error"] = exc

        worker = threading.Thread(target=call, name=f"tool {tool.__name__}", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():  # left running: Python cannot stop a thread (module docstring)
            return timeout_answer(timeout_s)
        if "error" in outcome:
            return error_answer(outcome["error"])
        return outcome["value"]

    return limited


def tool_methods(cls: type) -> list[str]:
    """The names of the methods TRL offers as an environment's tools: its public functions other than ``reset`` and
    ``get_reward``, listed on the class (trl 1.16.0 trainer/grpo_trainer.py:688-698, 2371-2375)."""
    return [
        name
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def time_limited_environment(cls: type, timeout_s: float = DEFAULT_TIMEOUT_S) -> type:
    """A subclass of environment class ``cls`` whose tool methods are :func:`time_limited`. It keeps the class's
    name, under which TRL logs an environment's own reward (``get_reward``, trl 1.16.0
    trainer/grpo_trainer.py:706-728); ``reset`` and ``get_reward`` are TRL's to call and stay as they are."""
    methods = {name: time_limited(getattr(cls, name), timeout_s) for name in tool_methods(cls)}
    limited = type(cls.__name__, (cls,), {**methods, "__module__": cls.__module__, "__doc__": cls.__doc__})
    limited.__qualname__ = cls.__qualname__
    return limited
