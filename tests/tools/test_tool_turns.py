"""A tool run turn by turn (issue 42 item 2), without training: a TRL-shaped batch of conversational completions
(trl 1.16.0 trainer/grpo_trainer.py:1945-2191: the assistant's message with ``tool_calls``, a ``tool`` message per
call, the assistant's next message) goes through the worker's callback as a logging step does, and comes back as
stored turns through ``/samples``, in the Monitor's completions table and as the Monitor's tool chart; a plain run
reads as before and has no tool chart. tests/tools/test_tools_training.py does the same with a real GRPOTrainer step."""

from __future__ import annotations

import re
from types import SimpleNamespace

import orjson
import pytest
from markdown_it import MarkdownIt

from app.web.api import endpoints
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config
from trainer.config.access import Access
from trainer.tools.limits import error_answer, timeout_answer
from trainer.tools.turns import ERROR_RATE, completion_turns, is_error_answer, tool_error_rate

PLANTED = "<img src=//elsewhere.invalid/t> **bold** ```"  # what a tool might answer, read as text everywhere


def call(expression: str) -> dict:
    """One tool call as TRL's parser returns it."""
    return {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expression}}}


def answer(text: str) -> dict:
    return {"role": "tool", "name": "calculator", "content": text}


# A group of four: a call answered, a call that raised (the time limit's answer), no call at all, and two calls in
# one message, one answered by the time limit: 4 tool answers, 2 of them errors.
COMPLETIONS = [
    [
        {"role": "assistant", "content": "Let me add.", "tool_calls": [call("12+3")]},
        answer("15"),
        {"role": "assistant", "content": "<answer>15</answer>"},
    ],
    [
        {"role": "assistant", "content": "", "tool_calls": [call("1/0")]},
        answer(error_answer(ZeroDivisionError("division by zero"))),
        {"role": "assistant", "content": "<answer>?</answer>"},
    ],
    [{"role": "assistant", "content": "<answer>14</answer>"}],
    [
        {"role": "assistant", "content": "", "tool_calls": [call("2*3"), call("9+9")]},
        answer(PLANTED),
        answer(timeout_answer(5.0)),
        {"role": "assistant", "content": "<answer>6</answer>"},
    ],
]
FIRST_TURNS = [
    {"role": "assistant", "content": "Let me add."},
    {"role": "tool_call", "content": "", "name": "calculator", "arguments": {"expression": "12+3"}},
    {"role": "tool", "content": "15", "name": "calculator"},
    {"role": "assistant", "content": "<answer>15</answer>"},
]


def fake_trainer(completions) -> SimpleNamespace:
    """What the callback reads of a GRPOTrainer: its completions table (``_logs``, trl 1.16.0
    trainer/grpo_trainer.py:1089-1094, 2833-2834), here one group of four. TRL's tool loop appends each call and
    answer to the prompt too (trainer/grpo_trainer.py:1972, 2016), so a prompt ends with its completion's turns."""
    prompt = [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "What is 12 + 3?"}]
    n = len(completions)
    return SimpleNamespace(
        _logs={
            "prompt": [prompt + completion[:-1] for completion in completions],
            "completion": completions,
            "rewards": {"correctness": [2.0, 0.0, 0.0, 0.0][:n]},
            "advantages": [1.5, -0.5, -0.5, -0.5][:n],
            "extra": {"answer": ["15"] * n},
        }
    )


class Writer:
    """The callback's DbWriter, writing at once (the real one writes from a thread)."""

    moved = None

    def metrics(self, rows):
        with get_sessionmaker().begin() as s:
            queries.add_metric_rows(s, rows)

    def samples(self, rows):
        with get_sessionmaker().begin() as s:
            queries.add_sample_rows(s, rows)

    def progress(self, *args):
        pass

    def flush(self):
        pass


def logged_step(config, completions, logs: dict) -> int:
    """A run of ``config`` whose worker callback logged one step (1) of ``completions`` with TRL's ``logs``."""
    from trainer.job.callback import make_callback

    run_id = create_run(config)
    callback = make_callback(run_id, Writer(), SimpleNamespace(requested=False), config)
    callback.trainer = fake_trainer(completions)
    state = SimpleNamespace(global_step=1, is_world_process_zero=True)
    callback.on_log(None, state, SimpleNamespace(should_save=False), logs=logs)
    return run_id


def tool_run(completions=COMPLETIONS) -> int:
    config = tiny_config(name="calc", tools=["builtin:calculator"], reward_funcs=["correctness"])
    return logged_step(config, completions, {"loss": 0.1, "reward": 0.5, "tools/call_frequency": 1.0})


def test_a_conversational_completion_becomes_its_turns():
    assert completion_turns(COMPLETIONS[0]) == FIRST_TURNS
    assert completion_turns(COMPLETIONS[2]) == [{"role": "assistant", "content": "<answer>14</answer>"}]
    # a message that is only calls has no assistant turn of its own; arguments a template left as JSON are read
    both = completion_turns([{"role": "assistant", "content": None, "tool_calls": [call("1"), call("2")]}])
    assert [t["arguments"] for t in both] == [{"expression": "1"}, {"expression": "2"}]
    texted = {"type": "function", "function": {"name": "f", "arguments": '{"x": 2}'}}
    assert completion_turns([{"role": "assistant", "tool_calls": [texted]}])[0]["arguments"] == {"x": 2}
    assert completion_turns("plain text") == [{"role": "assistant", "content": "plain text"}]


def test_error_answers_are_the_time_limits_and_trls_own():
    assert is_error_answer({"role": "tool", "content": timeout_answer(0.2)})
    assert is_error_answer({"role": "tool", "content": error_answer(ValueError("bad"))})
    assert is_error_answer({"role": "tool", "content": str({"error": "Tool nope not found."})})  # TRL's
    assert not is_error_answer({"role": "tool", "content": "15"})
    assert not is_error_answer({"role": "assistant", "content": "error: I can't"})  # the model's words, no call
    assert tool_error_rate([{"turns": completion_turns(c)} for c in COMPLETIONS]) == {ERROR_RATE: 0.5}
    assert tool_error_rate([{"turns": completion_turns(COMPLETIONS[2])}]) == {}  # no call: no share


def test_a_tool_runs_samples_keep_their_turns_and_samples_returns_them():
    run_id = tool_run()
    answer = orjson.loads(orjson.dumps(endpoints(Access())["samples"](run_id, None, 200)))  # as the client gets it
    assert answer["step"] == 1 and len(answer["samples"]) == 4
    first = answer["samples"][0]
    assert first["turns"] == FIRST_TURNS
    assert first["rewards"] == {"correctness": 2.0} and first["advantage"] == 1.5 and first["total_reward"] == 2.0
    assert first["completion"] == "Let me add.\n15\n<answer>15</answer>"  # the text, as before
    fourth = answer["samples"][3]["turns"]
    assert [t["role"] for t in fourth] == ["tool_call", "tool_call", "tool", "tool", "assistant"]
    assert fourth[2]["content"] == PLANTED and fourth[3]["content"] == "error: the tool took longer than 5 s"


def test_a_plain_runs_samples_read_as_before():
    config = tiny_config(name="plain", reward_funcs=["correctness"])
    run_id = logged_step(config, [[{"role": "assistant", "content": "<answer>15</answer>"}]] * 4, {"reward": 0.5})
    sample = endpoints(Access())["samples"](run_id, None, 200)["samples"][0]
    assert set(sample) == {"group", "prompt", "completion", "reference_answer", "rewards", "total_reward", "advantage"}
    assert sample["completion"] == "<answer>15</answer>"
    with get_sessionmaker().begin() as s:
        assert [row.turns for row in queries.samples_at(s, run_id, 1)] == [None] * 4
        assert ERROR_RATE not in queries.metric_keys(s, run_id)


def test_the_completions_table_shows_a_rollout_turn_by_turn_as_text():
    from app.web.pages.monitor import completion_detail, completions_table

    rows = completions_table(tool_run(), None)
    assert rows[0][4] == "Let me add.\n→ calculator(expression='12+3')\n← 15\n<answer>15</answer>"
    assert rows[1][4].splitlines()[1] == "← error: ZeroDivisionError: division by zero"
    assert rows[0][7:] == [2.0, 1.5] and rows[1][7:] == [0.0, -0.5]  # total and advantage as for any run
    assert rows[3][4].splitlines()[:3] == [
        "→ calculator(expression='2*3')",
        "→ calculator(expression='9+9')",
        f"← {PLANTED}",
    ]
    # the detail fences it: the planted markup is text there (tests/web/test_markup.py renders the same way)
    rendered = MarkdownIt("commonmark", {"html": True}).render(completion_detail(SimpleNamespace(row_value=rows[3])))
    assert "<img" not in rendered and "<strong>bold" not in rendered and rendered.count("<pre>") == 2


@pytest.mark.parametrize("tools", [True, False])
def test_the_tool_chart_draws_the_stored_values_for_a_tool_run_only(tools):
    from app.web.pages import monitor
    from app.web.widgets.charts import CHARTS
    from app.web.widgets.styles import CHART_NONE, CHART_SHOWN

    if tools:
        run_id = tool_run()
    else:
        config = tiny_config(name="plain", reward_funcs=["correctness"])
        run_id = logged_step(config, [[{"role": "assistant", "content": "x"}]] * 4, {"reward": 0.5})
    figure = monitor.refresh(run_id, [], 0.0, "step", 0, {}).figures[[c.name for c in CHARTS].index("tools")]
    if not tools:
        assert figure["elem_classes"] == [CHART_NONE] and figure["value"] is None
        return
    assert figure["elem_classes"] == [CHART_SHOWN]
    drawn = {trace.meta: list(trace.y) for trace in figure["value"].data}
    with get_sessionmaker().begin() as s:
        stored = [row.turns for row in queries.samples_at(s, run_id, 1)]
    answers = [t for turns in stored for t in turns if t["role"] == "tool"]
    errors = [t for t in answers if re.match(r"error: ", t["content"])]
    assert drawn == {"tools/call_frequency": [1.0], ERROR_RATE: [len(errors) / len(answers)]} and len(errors) == 2


def test_the_heldout_chart_draws_the_share_of_answers_calling_a_tool_beside_correctness():
    from app.web.pages import monitor
    from app.web.widgets.charts import CHARTS

    run_id = tool_run()
    with get_sessionmaker().begin() as s:  # what the periodic evaluation stores for a tool run (steps 0 and 10)
        for step, correct, calling in ((0, 0.01, 0.0), (10, 0.62, 0.71)):
            rows = queries.metric_rows(run_id, step, {"heldout/correct": correct, "heldout/tool_calls": calling}, 1.0)
            queries.add_metric_rows(s, rows)
    figure = monitor.refresh(run_id, [], 0.0, "step", 0, {}).figures[[c.name for c in CHARTS].index("heldout")]
    drawn = {trace.meta: (list(trace.x), list(trace.y)) for trace in figure["value"].data}
    assert drawn == {"heldout/correct": ([0, 10], [0.01, 0.62]), "heldout/tool_calls": ([0, 10], [0.0, 0.71])}
    names = {trace.name for trace in figure["value"].data}
    assert "answers calling a tool" in names


def test_the_learning_map_and_an_alerts_completions_read_a_tool_run():
    """The learning map groups a tool run's samples by their question (the last user message of a prompt that TRL
    extends with the tool turns) and scores them as any run's; an alert's completions show the turns."""
    from app.web.pages.learning import alert_completions

    run_id = tool_run()
    mapped = orjson.loads(orjson.dumps(endpoints(Access())["prompts"](run_id)))
    assert [(p["prompt"], p["pass_rate"]) for p in mapped["prompts"]] == [("What is 12 + 3?", {"1": 0.25})]
    best = alert_completions(run_id, "1:1")[0]
    assert best[3].splitlines()[:3] == ["Let me add.", "→ calculator(expression='12+3')", "← 15"]


def test_compare_says_a_tool_runs_sides_answered_with_its_tools_and_not_on_vllm():
    """The Compare panel answers both sides of a tool run with its tools (tests/tools/test_compare_tools.py) and says so
    beside them; a run that samples with vLLM is compared on transformers, which it says too."""
    from trainer.evaluation.compare import WITH_TOOLS, WITH_TOOLS_NOT_VLLM, notes_for
    from trainer.loading.backend import Capabilities

    assert notes_for(tiny_config(tools=["builtin:calculator"])) == [WITH_TOOLS]
    assert notes_for(tiny_config(environment="builtin:calculator")) == [WITH_TOOLS]
    gpu = Capabilities(cuda=True, bf16=True, unsloth=False, vllm=True)
    on_vllm = tiny_config(model_name_or_path="Qwen/Qwen2.5-0.5B-Instruct", tools=["builtin:calculator"], use_vllm=True)
    assert notes_for(on_vllm, gpu) == [WITH_TOOLS, WITH_TOOLS_NOT_VLLM]
    assert notes_for(on_vllm, Capabilities(cuda=False, bf16=False, unsloth=False, vllm=False)) == [WITH_TOOLS]
    assert notes_for(tiny_config()) == []
