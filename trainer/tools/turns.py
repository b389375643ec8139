"""A tool run's completion as its turns, and grpo-studio's own count of the tool calls that failed.

With tools, TRL's completion is a conversation (trl 1.16.0 trainer/grpo_trainer.py:1945-2191): the assistant's
message, which may carry ``tool_calls`` (``{"type": "function", "function": {"name", "arguments"}}``), then one
``{"role": "tool", "name", "content"}`` message per call, then the assistant's next message, and so on. A stored
sample keeps it as a flat list of turns, each a small dict with the same keys whatever the model wrote:

- ``{"role": "assistant", "content": text}``: what the model wrote (left out when a message is only tool calls),
- ``{"role": "tool_call", "content": "", "name": name, "arguments": {...}}``: one call, in the order written,
- ``{"role": "tool", "content": answer, "name": name}``: the tool's answer as the model read it.

Why a failure count of our own: TRL's ``tools/failure_frequency`` counts the calls that raised into TRL
(trl 1.16.0 trainer/grpo_trainer.py:1980-1990, 2316-2320), but every tool of a run is wrapped by the time limit
(trainer.tools.limits), which answers a raise or a hang with ``error: ...`` and returns normally, so TRL counts
none of them. :func:`tool_error_rate` counts the answers the model read as errors instead: the wrapper's
``error: ...`` and TRL's own ``{'error': ...}`` (a tool name that does not exist), of all the tool answers of the
step's completions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

ERROR_RATE = "tools/error_rate"  # the metric key the worker logs, beside TRL's tools/call_frequency
# TRL's answer when it could not call a tool at all: str({"error": ...}) (trl 1.16.0 trainer/grpo_trainer.py:1986)
_TRL_ERROR = "{'error':"


def completion_turns(completion: Any) -> list[dict[str, Any]]:
    """A conversational completion as its turns (see the module docstring); a text completion is one assistant
    turn."""
    if isinstance(completion, str):
        return [{"role": "assistant", "content": completion}]
    turns: list[dict[str, Any]] = []
    for message in completion:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), _text(message.get("content"))
        if role == "tool":
            turns.append({"role": "tool", "content": content, "name": str(message.get("name") or "")})
            continue
        calls = message.get("tool_calls") or []
        if content or not calls:
            turns.append({"role": str(role or "assistant"), "content": content})
        for call in calls:
            function = call.get("function", call) if isinstance(call, dict) else {}
            turns.append(
                {
                    "role": "tool_call",
                    "content": "",
                    "name": str(function.get("name") or ""),
                    "arguments": _arguments(function.get("arguments")),
                }
            )
    return turns


def is_error_answer(turn: dict[str, Any]) -> bool:
    """Whether a tool turn is a failed call's answer: the time limit's ``error: ...`` or TRL's ``{'error': ...}``."""
    content = turn.get("content", "").lstrip()
    return turn.get("role") == "tool" and (content.startswith("error:") or content.startswith(_TRL_ERROR))


def tool_error_rate(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The share of the step's tool answers that were errors, as ``{ERROR_RATE: share}``, over the sample rows of
    the whole generation batch (their ``turns``); nothing when no completion called a tool (a share of no calls is
    no measure, and a chart then shows the gap)."""
    answers = [turn for row in rows for turn in (row.get("turns") or []) if turn.get("role") == "tool"]
    if not answers:
        return {}
    return {ERROR_RATE: sum(is_error_answer(turn) for turn in answers) / len(answers)}


def _text(content: Any) -> str:
    """A message's content as text: a multimodal tool answer (a list of parts) by its text parts."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return str(content)


def _arguments(arguments: Any) -> dict[str, Any]:
    """A call's arguments as a JSON-storable mapping: TRL parses them into a dict; a template that leaves them a
    JSON string is read as one, and anything else is kept as its text under ``""``."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {"": arguments}
    if not isinstance(arguments, dict):
        return {} if arguments is None else {"": str(arguments)}
    return json.loads(json.dumps(arguments, default=str))
