"""What a run's ``tools`` and ``environment`` name, loaded: a built-in (``builtin:NAME``, trainer.tools.builtin) or the
user's own ``path/to/file.py:name``, imported by the one loader of a user's code that custom rewards use
(trainer.scoring.custom_rewards.import_object), under the same operator rule (trainer.config.access).

:func:`trainer_arguments` is what the worker hands GRPOTrainer: ``tools=`` (a list of functions) and
``environment_factory=`` (a class TRL calls with no argument, once per rollout: trl 1.16.0
trainer/grpo_trainer.py:685-686, 2354-2358), each call run in the run's tool process within its limit
(trainer.tools.limits, trainer.tools.process). Nothing is passed when neither is set, so a run without tools builds
the trainer exactly as before. The user's modules are imported here too, for the tools' signatures and docstrings
(the schemas the model is shown); only the child calls them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from trainer.scoring.custom_rewards import import_object
from trainer.tools.builtin import ENVIRONMENTS, TOOLS
from trainer.tools.limits import time_limited, time_limited_environment, tool_methods
from trainer.tools.process import ToolProcess

BUILTIN = "builtin:"


def _builtin(spec: str, registry: dict[str, Any], setting: str) -> Any:
    """The built-in ``spec`` names (the review, trainer.review.tools, names the known ones to the user)."""
    name = spec.removeprefix(BUILTIN)
    if name not in registry:
        raise ValueError(f"{setting}: no built-in {spec!r}")
    return registry[name]


def _load(spec: str, registry: dict, setting: str, what: str, kind: str) -> Any:
    """What ``spec`` names: a built-in of ``registry``, or ``kind`` ``what`` of a user's file (ValueError in one
    sentence starting with ``setting`` when it can't be had)."""
    if spec.startswith(BUILTIN):
        return _builtin(spec, registry, setting)
    try:
        return import_object(spec, what, kind)
    except ValueError as exc:
        raise ValueError(f"{setting}: {exc}") from None


def load_tool(spec: str) -> Callable[..., Any]:
    """The function a ``tools`` entry names (ValueError in one sentence naming the entry when it can't be had)."""
    tool = _load(spec, TOOLS, "tools", "tool", "function")
    if not callable(tool) or isinstance(tool, type):
        raise ValueError(f"tools: tool {spec!r} is not a function")
    return tool


def load_environment(spec: str) -> type:
    """The class ``environment`` names (ValueError in one sentence when it can't be had, or is no class)."""
    cls = _load(spec, ENVIRONMENTS, "environment", "environment", "class")
    if not isinstance(cls, type):
        raise ValueError(f"environment: {spec!r} is not a class (TRL makes one instance per rollout)")
    return cls


def trainer_arguments(
    tools: list[str], environment: str, timeout_s: float, stop: threading.Event | None = None
) -> dict[str, Any]:
    """GRPOTrainer's ``tools`` and ``environment_factory`` for a run's settings, each call run in one tool process
    and limited to ``timeout_s``, a waiting call ended at once when ``stop`` (the run's stop request) is set; an
    empty mapping when neither is set."""
    if not tools and not environment:
        return {}
    process = ToolProcess(tools, environment, timeout_s, stop)
    found: dict[str, Any] = {}
    if tools:
        found["tools"] = [time_limited(spec, load_tool(spec), process) for spec in tools]
    if environment:
        found["environment_factory"] = time_limited_environment(load_environment(environment), process)
    return found


def offered_tools(arguments: dict[str, Any]) -> list[Callable[..., Any]]:
    """The tools a prompt is rendered with, for :func:`trainer_arguments`'s answer: the functions, then the tool
    methods of one instance of the environment (as TRL renders them: trl 1.16.0 trainer/grpo_trainer.py:702-704,
    1737-1741), so that a prompt's length is measured as the model sees it."""
    offered = list(arguments.get("tools", []))
    if factory := arguments.get("environment_factory"):
        instance = factory()
        offered += [getattr(instance, name) for name in tool_methods(factory)]
    return offered
