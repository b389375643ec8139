"""A limit on every tool call, and a tool's failure as its answer: a tool that raises or hangs ends that rollout's turn
with the error as the tool's message, never the worker, and never a run's Stop.

TRL calls a tool in the training process, between two generations of the batch (trl 1.16.0
trainer/grpo_trainer.py:1964-2010): an exception there becomes ``{"error": str(e)}`` as the tool's answer, but a
tool that never returns hangs the whole step, and TRL sets no time limit. Every call here runs in the run's tool
process (trainer.tools.process), which the training process kills at the limit or when the run is asked to stop, so
each call returns within ``tool_timeout_s`` whatever the tool does: its value, or ``"error: ZeroDivisionError:
division by zero"``, or ``"error: the tool took longer than 5 s"``.

An error answered here is a normal return for TRL, so its ``tools/failure_frequency`` (the calls that raised into it,
trl 1.16.0 trainer/grpo_trainer.py:1980-1990, 2316-2320) does not count it; it counts the call. The worker counts
the error answers itself instead (``tools/error_rate``, trainer.tools.turns), which the Monitor charts.

The functions TRL is handed keep the tool's name, signature and docstring (``functools.wraps``, whose ``__wrapped__``
inspect and typing follow), since transformers builds the tool's JSON schema from them
(``transformers.utils.get_json_schema``); tests/tools/test_tools.py checks that the schema of a wrapped tool is the tool's
own. Each is a plain function even for an ``async`` tool: the call waits on the tool process, not on an event loop
(TRL would otherwise run it on its one event loop thread, which a blocking tool stopped for good).
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from typing import Any

from trainer.tools.process import Lost, Raised, ToolProcess

DEFAULT_TIMEOUT_S = 5.0
LOST = (
    "error: this rollout's environment was lost when a call ran past its limit (its process was ended); it starts "
    "afresh at the next rollout"
)


def error_answer(exc: BaseException) -> str:
    """A failed call's answer to the model: the exception's type and message."""
    return f"error: {type(exc).__name__}: {exc}" if str(exc) else f"error: {type(exc).__name__}"


def timeout_answer(timeout_s: float) -> str:
    """A call that ran past its limit, as its answer to the model."""
    return f"error: the tool took longer than {timeout_s:g} s"


def error_answer_text(text: str) -> str:
    """The tool process's error text as the model's answer (it already reads ``error: ...``)."""
    return text if text.startswith("error:") else f"error: {text}"


def wraps_tool(limited: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """``limited`` under ``original``'s name, signature and docstring (see the module docstring)."""
    return functools.wraps(original)(limited)


def time_limited(spec: str, tool: Callable[..., Any], process: ToolProcess) -> Callable[..., Any]:
    """The function TRL calls for the tool ``spec`` names (``tool``: it, loaded here for its schema), each call run
    in ``process`` within its limit, its failure as its answer."""

    def limited(*args, **kwargs):
        try:
            return process.call(("call", spec, args, kwargs))
        except Raised as exc:
            return error_answer_text(str(exc))

    return wraps_tool(limited, tool)


def tool_methods(cls: type) -> list[str]:
    """The names of the methods TRL offers as an environment's tools: its public functions other than ``reset`` and
    ``get_reward``, listed on the class (trl 1.16.0 trainer/grpo_trainer.py:688-698, 2371-2375)."""
    return [
        name
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def time_limited_environment(cls: type, process: ToolProcess) -> type:
    """The stand-in TRL makes one instance of per rollout for environment class ``cls``, its instances living in
    ``process`` (:func:`make_stand_in`)."""
    return make_stand_in(process, cls)


def make_stand_in(process: ToolProcess, cls: type) -> type:
    """A class with ``cls``'s name, docstring and tool methods (their signatures) whose instances live in
    ``process``: made with no argument, each makes its instance there; a tool method answers as a tool does (its
    value, its error, its limit, or :data:`LOST`); ``reset`` and ``get_reward`` are forwarded with the same limit
    (``reset`` makes a lost instance afresh; ``get_reward`` of a lost or late one is None, which TRL skips; one that
    raised raises, as it did in process); any other public attribute is read from, and written to, the instance."""

    def forward(self, message: tuple) -> Any:
        return process.call(message, expect_generation=self._grpo_generation)

    def __init__(self) -> None:
        instance, generation = process.new_instance()
        object.__setattr__(self, "_grpo_instance", instance)
        object.__setattr__(self, "_grpo_generation", generation)
        weakref.finalize(self, process.drop, instance)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy, pickle and inspect probe dunders: never the child's
            raise AttributeError(name)
        try:
            return forward(self, ("get", self._grpo_instance, name))
        except Lost:
            raise AttributeError(f"{cls.__name__}.{name}: {LOST.removeprefix('error: ')}") from None
        except Raised as exc:
            raise AttributeError(str(exc).removeprefix("error: ")) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        forward(self, ("set", self._grpo_instance, name, value))

    def reset(self, **row) -> Any:
        try:
            return forward(self, ("method", self._grpo_instance, "reset", (), row))
        except Lost:
            __init__(self)
            return forward(self, ("method", self._grpo_instance, "reset", (), row))
        except Raised as exc:
            if exc.ended:  # past its limit or stopped: no observation, and the instance is lost with the process
                return None
            raise RuntimeError(f"{cls.__name__}.reset raised: {exc}") from None

    def get_reward(self) -> float | None:
        try:
            return forward(self, ("method", self._grpo_instance, "get_reward", (), {}))
        except Lost:
            return None
        except Raised as exc:
            if exc.ended:
                return None
            raise RuntimeError(f"{cls.__name__}.get_reward raised: {exc}") from None

    def method_for(name: str) -> Callable[..., Any]:
        def method(self, *args, **kwargs):
            try:
                return forward(self, ("method", self._grpo_instance, name, args, kwargs))
            except Lost:
                return LOST
            except Raised as exc:
                return error_answer_text(str(exc))

        return functools.wraps(getattr(cls, name))(method)

    members: dict[str, Any] = {name: method_for(name) for name in tool_methods(cls)}
    members |= {"__init__": __init__, "__getattr__": __getattr__, "__setattr__": __setattr__, "reset": reset}
    if callable(inspect.getattr_static(cls, "get_reward", None)):  # TRL adds an environment's reward only then
        members["get_reward"] = get_reward
    members |= {"__module__": cls.__module__, "__doc__": cls.__doc__}
    stand_in = type(cls.__name__, (), members)
    stand_in.__qualname__ = cls.__qualname__
    return stand_in
