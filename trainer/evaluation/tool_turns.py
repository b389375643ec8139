"""Answers with tools, answered as TRL's rollouts are (trl 1.16.0 trainer/grpo_trainer.py:1902-2060): the held-out
evaluation of a run that gives the model tools (greedy, so that a held-out score of a tool run counts the calls it
makes, and sampled for its pass@1) and the Compare panel's two sides of a tool run (sampled or greedy).

Each round generates the next assistant turn of every unfinished conversation (left-padded batches), parses
it with TRL's parser (``trl.chat_template_utils.parse_response``, the tokenizer's response template), runs the tool
calls it holds (time-limited, their errors as their answers: trainer.tools.limits), and appends the turn, the tools'
answers and the template's tokens between them, found as TRL finds them (a conversation rendered with and without the
tool messages). A conversation ends at a turn with no call, or when its tokens reach ``max_new_tokens`` (the
completion budget TRL gives a rollout, tool answers included), or after ``max_calls`` rounds of calls.
The answer is the completion as chat messages (assistant and tool turns), which the rewards read as TRL hands them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

MAX_CALL_ROUNDS = 4  # a greedy model that calls again and again is stopped here (TRL's max_tool_calling_iterations)


def run_tools(config) -> Callable[[dict], list[Callable[..., Any]]] | None:
    """For a run with tools: a function giving the tools of one problem's conversation (its row: question, answer),
    the run's functions and a fresh, reset environment's methods, each time-limited as in training; None without."""
    from trainer.tools.limits import tool_methods
    from trainer.tools.loading import trainer_arguments

    arguments = trainer_arguments(list(config.tools), config.environment, config.tool_timeout_s)
    if not arguments:
        return None
    functions = list(arguments.get("tools", []))
    factory = arguments.get("environment_factory")

    def tools_for(row: dict) -> list[Callable[..., Any]]:
        if factory is None:
            return functions
        environment = factory()
        environment.reset(**row)
        return functions + [getattr(environment, name) for name in tool_methods(factory)]

    return tools_for


def _suffix_ids(tokenizer, tool_messages: list[dict]) -> list[int]:
    """The template's tokens after an assistant turn's end-of-turn token: the tool answers and the next generation
    prompt (TRL's ``_get_tool_suffix_ids``, trl 1.16.0 trainer/grpo_trainer.py:1902-1945)."""
    call = {"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    prefix = tokenizer.apply_chat_template(dummy, tokenize=True, return_dict=False)
    full = tokenizer.apply_chat_template(
        dummy + tool_messages, tokenize=True, return_dict=False, add_generation_prompt=True
    )
    ends = [i for i, token in enumerate(prefix) if token == tokenizer.eos_token_id]
    if ends:
        prefix = prefix[: ends[-1] + 1]
    return full[len(prefix) :]


def _call(tools: list[Callable[..., Any]], call: dict) -> tuple[str, str]:
    """One parsed tool call's (name, answer); a call of no such tool, or with wrong arguments, answers its error."""
    function = call.get("function", call)
    name = function.get("name", "")
    by_name = {getattr(tool, "__name__", ""): tool for tool in tools}
    if name not in by_name:
        return name, f"error: no tool named {name!r}"
    try:
        return name, str(by_name[name](**(function.get("arguments") or {})))
    except TypeError as exc:  # wrong arguments: the time-limited wrapper turns a tool's own errors into answers
        return name, f"error: TypeError: {exc}"


def generate_with_tools(
    model,
    tokenizer,
    prompts: Sequence[list[dict]],
    rows: Sequence[dict],
    tools_for: Callable[[dict], list[Callable[..., Any]]],
    max_new_tokens: int,
    batch_size: int = 64,
    on_batch: Callable[[int], None] | None = None,
    sampling: dict[str, Any] | None = None,
) -> tuple[list[list[dict]], list[int], list[int]]:
    """Multi-turn answers to chat ``prompts`` with tools (module docstring): (each answer as chat messages, its token
    count, tool answers included, and its number of tool calls). ``rows[i]`` is what prompt i's environment is reset
    with. Greedy unless ``sampling`` gives ``generate``'s sampling arguments (``do_sample``, ``temperature``,
    ``top_p``); a caller that wants repeatable draws seeds torch first."""
    import torch
    from trl.chat_template_utils import parse_response

    tools = [tools_for(row) for row in rows]
    contexts = [
        tokenizer.apply_chat_template(p, tools=t or None, tokenize=True, return_dict=False, add_generation_prompt=True)
        for p, t in zip(prompts, tools)
    ]
    starts = [len(c) for c in contexts]
    answers: list[list[dict]] = [[] for _ in prompts]
    calls = [0] * len(prompts)
    active = list(range(len(prompts)))
    model.eval()
    for round_number in range(MAX_CALL_ROUNDS + 1):
        going = []
        for start in range(0, len(active), batch_size):
            chunk = active[start : start + batch_size]
            width = max(len(contexts[i]) for i in chunk)
            pad = tokenizer.pad_token_id
            ids = torch.tensor([[pad] * (width - len(contexts[i])) + contexts[i] for i in chunk])
            mask = torch.tensor([[0] * (width - len(contexts[i])) + [1] * len(contexts[i]) for i in chunk])
            left = max(max_new_tokens - (len(contexts[i]) - starts[i]) for i in chunk)
            with torch.no_grad():
                out = model.generate(
                    input_ids=ids.to(model.device),
                    attention_mask=mask.to(model.device),
                    max_new_tokens=max(left, 1),
                    **(sampling or {"do_sample": False}),
                    pad_token_id=pad,
                    eos_token_id=tokenizer.eos_token_id,
                )
            for row, i in enumerate(chunk):
                new = out[row, width:].tolist()
                room = max_new_tokens - (len(contexts[i]) - starts[i])
                new = new[:room]
                if tokenizer.eos_token_id in new:
                    new = new[: new.index(tokenizer.eos_token_id) + 1]
                turn = parse_response(tokenizer, new, prefix=contexts[i], tools=tools[i])
                answers[i].append(turn)
                prefix = contexts[i] + new
                tool_calls = turn.get("tool_calls") or []
                if not tool_calls or round_number == MAX_CALL_ROUNDS or not new or new[-1] != tokenizer.eos_token_id:
                    contexts[i] = prefix
                    continue
                messages = []
                for call in tool_calls:
                    name, text = _call(tools[i], call)
                    messages.append({"role": "tool", "name": name, "content": text})
                    calls[i] += 1
                answers[i].extend(messages)
                contexts[i] = prefix + _suffix_ids(tokenizer, messages)
                if len(contexts[i]) - starts[i] < max_new_tokens:
                    going.append(i)
            if on_batch:
                on_batch(len(chunk))
        active = going
        if not active:
            break
    lengths = [len(c) - s for c, s in zip(contexts, starts)]
    return answers, lengths, calls
