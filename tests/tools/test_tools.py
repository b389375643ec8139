"""Tools and environments (issue 42, part 1): the built-in calculator's values, the time limit that answers a raising
or hung tool with its error, the schema kept through the wrapper, and each problem the review reports before a launch,
by its sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.web.api import endpoints
from tests.helpers import tiny_config, tiny_with_tool_template
from trainer import review
from trainer.config.access import Access
from trainer.tools.builtin import CalculatorEnv, calculator
from trainer.tools.loading import trainer_arguments

DASHBOARD = Access()


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory) -> Path:
    """builtin:tiny with a chat template that renders tool calls (tests.helpers.tiny_with_tool_template)."""
    return tiny_with_tool_template(tmp_path_factory.mktemp("tool-model") / "tiny-qwen-template")


# The Qwen2.5 template's tool block in the tiny model's byte-level tokens (trained on arithmetic text only): some
# 800 tokens a tool, so the prompt's room is raised to leave a question room.
ROOM = {"max_prompt_length": 2048, "max_seq_length": 4096}


def _problems(access: Access = Access(any_path=True, allow_custom_rewards=True), **changes) -> list[str]:
    return review.check({**tiny_config().to_dict(), **changes}, access).problems


# --- the calculator -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "value"),
    [("1 + 2", "3"), ("(3 + 4) * 2.5", "17.5"), ("7 / 2", "3.5"), ("-4 * -(2 - 5)", "-12"), ("0.1 + 0.2", "0.3")],
)
def test_the_calculator_computes_arithmetic(expression, value):
    assert calculator(expression) == value


def test_the_calculators_answer_stays_short_whatever_the_expression():
    """Issue 58: 1e308 multiplied by itself over 195 characters answered 9,000 digits into the model's context."""
    expression = " * ".join(["1e308"] * 24)  # 191 characters, within the expression's cap
    assert len(expression) <= 200 and calculator(expression) == "1E+7392"  # 24 x 308, recomputed
    assert calculator("1e-20 / 1e20") == "1E-40"
    assert calculator("123456789 * 1000") == "123456789000"  # within the precision: written out, as before


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("__import__('os')", "unsupported element Call"),
        ("2 ** 8", "unsupported element Pow"),
        ("1 +", "not an arithmetic expression"),
        ("x + 1", "unsupported element Name"),
    ],
)
def test_the_calculator_refuses_anything_but_arithmetic(expression, error):
    with pytest.raises(ValueError, match=error):
        calculator(expression)


def test_the_calculator_environment_counts_its_rollouts_calls():
    env = CalculatorEnv()
    env.calculate("1 + 1")
    assert env.calls == 1
    env.reset(question="anything")
    assert env.calls == 0


# --- the time limit (the tool process itself: tests/tools/test_tool_process.py) ------------------------------------------
def _limited(specs: list[str], environment: str = "", timeout_s: float = 1.0) -> dict:
    return trainer_arguments(specs, environment, timeout_s)


def test_a_raising_tool_answers_with_its_error():
    assert _limited(["builtin:calculator"])["tools"][0]("1 / 0") == "error: ZeroDivisionError: division by zero"


def test_a_hung_tool_answers_within_its_limit(tmp_path):
    """A tool that never returns gives the timeout's answer; the next call gets a fresh tool process."""
    path = tmp_path / "slow.py"
    path.write_text(
        "import time\n\n\ndef hang(seconds: float) -> str:\n"
        '    """Sleep.\n\n    Args:\n        seconds: How long.\n    """\n'
        "    time.sleep(seconds)\n    return 'done'\n"
    )
    limited = _limited([f"{path}:hang"], timeout_s=0.2)["tools"][0]
    assert limited(60) == "error: the tool took longer than 0.2 s"
    assert limited(0) == "done"


def test_the_wrapper_keeps_the_schema_transformers_builds():
    from transformers.utils import get_json_schema

    assert get_json_schema(_limited(["builtin:calculator"])["tools"][0]) == get_json_schema(calculator)
    limited = _limited([], "builtin:calculator")["environment_factory"]
    assert limited.__name__ == "CalculatorEnv"  # TRL logs an environment's own reward under its class name
    assert get_json_schema(limited().calculate) == get_json_schema(CalculatorEnv().calculate)


def test_an_environments_tool_answers_its_error_and_keeps_its_state():
    env = _limited([], "builtin:calculator")["environment_factory"]()
    assert env.calculate("1 / 0") == "error: ZeroDivisionError: division by zero"
    assert env.calculate("2 * 3") == "6" and env.calls == 2


def test_the_trainer_gets_tools_only_when_set():
    assert trainer_arguments([], "", 5.0) == {}
    given = trainer_arguments(["builtin:calculator"], "builtin:calculator", 5.0)
    assert [t.__name__ for t in given["tools"]] == ["calculator"]
    assert given["environment_factory"]().calculate("2 + 2") == "4"


# --- the review ---------------------------------------------------------------------------------------------------
def test_builtin_tools_on_a_model_whose_template_renders_tool_calls_pass(tool_model):
    assert _problems(model_name_or_path=str(tool_model), tools=["builtin:calculator"], **ROOM) == []
    assert _problems(model_name_or_path=str(tool_model), environment="builtin:calculator", **ROOM) == []


def test_a_prompt_with_no_room_for_a_question_is_refused(tool_model):
    """The system prompt and the tools' schemas must leave a question room within max_prompt_length, since
    grpo-studio cuts a long prompt's question only."""
    found = _problems(model_name_or_path=str(tool_model), tools=["builtin:calculator"])
    assert len(found) == 1 and found[0].startswith(
        "max_prompt_length 128: with this model's template the system prompt and the tools' schemas alone take "
    ), found


def test_the_tiny_models_template_is_said_to_render_no_tool_call():
    assert _problems(tools=["builtin:calculator"]) == [
        "model builtin:tiny: its chat template does not render a tool call (user, assistant with tool_calls, tool), "
        "so TRL refuses tools with it; choose a model whose template supports tools, e.g. Qwen/Qwen2.5-0.5B-Instruct "
        "(offline: builtin:tiny-tools)"
    ]


def test_an_unknown_builtin_is_named_with_the_closest():
    assert _problems(tools=["builtin:calculater"]) == [
        "tools: unknown built-in 'builtin:calculater': the built-in ones are builtin:calculator; did you mean "
        "builtin:calculator?"
    ]
    assert _problems(environment="builtin:chess") == [
        "environment: unknown built-in 'builtin:chess': the built-in ones are builtin:calculator"
    ]


def test_an_entry_of_neither_form_is_named_with_the_builtin_it_may_mean():
    for access in (DASHBOARD, Access(any_path=True, allow_custom_rewards=True)):
        assert _problems(access, tools=["calculator"]) == [
            "tools: 'calculator' is neither builtin:NAME nor path/to/file.py:function; did you mean builtin:calculator?"
        ]
        assert _problems(access, environment="my env") == [
            "environment: 'my env' is neither builtin:NAME nor path/to/file.py:Class"
        ]


def test_custom_tools_need_the_operators_permission(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("def f(x: int) -> int:\n    return x\n")  # never imported below
    found = _problems(DASHBOARD, tools=[f"{path}:f"], environment=f"{path}:Env")
    assert (
        f"tools: custom tool {path}:f: custom tool code runs arbitrary Python, so the dashboard only accepts it when started with --allow-custom-rewards"
        in found
    )
    assert (
        f"environment: custom environment {path}:Env: custom environment code runs arbitrary Python, so the dashboard only accepts it when started with --allow-custom-rewards"
        in found
    )


def test_a_file_that_does_not_load_and_a_missing_name_are_said(tmp_path):
    broken, fine = tmp_path / "broken.py", tmp_path / "fine.py"
    broken.write_text("import no_such_module_here\n")
    fine.write_text("X = 1\n")
    # two checks, not five: each is a child process importing transformers (trainer.scoring.user_code)
    assert _problems(tools=[f"{tmp_path}/none.py:f", f"{broken}:f", f"{fine}:f"], environment=f"{fine}:Env") == [
        f"tools: tool '{tmp_path}/none.py:f': no such file {tmp_path}/none.py",
        f"tools: tool '{broken}:f': could not import {broken}: ModuleNotFoundError: No module named 'no_such_module_here'",
        f"tools: tool '{fine}:f': {fine} has no function f",
        f"environment: environment '{fine}:Env': {fine} has no class Env",
    ]
    assert _problems(environment=f"{fine}:X") == [
        f"environment: '{fine}:X' is not a class (TRL makes one instance per rollout)"
    ]


def test_an_environment_without_reset_is_refused(tmp_path):
    path = tmp_path / "env.py"
    path.write_text(
        "class Env:\n    def step(self, move: str) -> str:\n        '''Move.\n\n        Args:\n            move: Where.\n        '''\n        return move\n"
    )
    assert _problems(environment=f"{path}:Env") == [
        f"environment: {path}:Env: Env has no reset method; TRL calls reset(**row) before each rollout and refuses "
        "an environment without one"
    ]


def test_a_tool_transformers_cannot_describe_is_named_with_its_reason(tmp_path):
    path = tmp_path / "tools.py"
    path.write_text(
        "def add(a, b):\n    '''Add.\n\n    Args:\n        a: One.\n        b: Two.\n    '''\n    return a + b\n"
    )
    assert _problems(tools=[f"{path}:add"]) == [
        f"tools: {path}:add: transformers cannot build the schema of add from its signature and docstring: "
        "Argument a is missing a type hint in function add"
    ]


# --- the entries --------------------------------------------------------------------------------------------------
def test_the_api_validates_the_tool_settings(tool_model):
    """/validate reads the three settings from the config it is given, and reports their problems."""
    settings = {
        **tiny_config().to_dict(),
        "model_name_or_path": str(tool_model),
        "tools": ["builtin:calculator"],
        "environment": "builtin:calculator",
        "tool_timeout_s": 2.5,
        **ROOM,
    }
    validate = endpoints(Access(allowed_dirs=(str(tool_model.parent),)))["validate"]
    assert validate(json.dumps(settings))["problems"] == []
    answer = validate(json.dumps({**settings, "tool_timeout_s": 0, "tools": ["builtin:calc"]}))
    assert any(p.startswith("tool_timeout_s 0:") for p in answer["problems"]), answer
    assert any(p.startswith("tools: unknown built-in 'builtin:calc'") for p in answer["problems"]), answer


def test_the_cli_refuses_a_launch_whose_model_renders_no_tool_call(tmp_path, capsys):
    """`grpo-studio launch FILE` reads the tool settings and refuses the tiny model's template before anything
    starts."""
    from app.cli.main import main

    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({**tiny_config().to_dict(), "tools": ["builtin:calculator"]}))
    assert main(["launch", str(path)]) != 0
    assert "model builtin:tiny: its chat template does not render a tool call" in capsys.readouterr().err


def test_a_relative_tool_file_is_made_absolute_for_the_worker(tmp_path):
    """A launched worker runs in its run directory, so the files of tools and an environment are resolved first."""
    (tmp_path / "mine.py").write_text("")
    config = tiny_config(tools=["builtin:calculator", "mine.py:f"], environment="mine.py:Env")
    absolute = config.with_absolute_paths(tmp_path)
    assert absolute.tools == ["builtin:calculator", f"{tmp_path}/mine.py:f"]
    assert absolute.environment == f"{tmp_path}/mine.py:Env"


def test_a_prompts_length_counts_its_tools(tool_model):
    """The cut of a long prompt measures it with the tools' schemas, as TRL renders it."""
    from datasets import Dataset

    from trainer.job.trl_args import _prompt_tokens, truncate_prompts
    from trainer.loading.backend import load_tokenizer

    tokenizer = load_tokenizer(str(tool_model))
    prompt = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "1 + 1 = ?"}]
    data = Dataset.from_list([{"prompt": prompt}])
    assert truncate_prompts(data, tokenizer, 128)[1] == 0
    (full,) = _prompt_tokens(tokenizer, [prompt], [calculator])
    assert full > 128  # the schema alone is hundreds of tokens
    assert truncate_prompts(data, tokenizer, full, [calculator])[1] == 0
    assert truncate_prompts(data, tokenizer, full - 1, [calculator])[1] == 1
    # a limit the tools' schema alone fills leaves no room for any question: said, not cut to an empty question
    with pytest.raises(ValueError, match=r"max_prompt_length 128 leaves no room for a question"):
        truncate_prompts(data, tokenizer, 128, [calculator])


SERVER_SENTENCE = (
    "vllm_mode server: with tools or an environment on 2 training processes, TRL's server mode hands each process the "
    "wrong rows of a tool turn's generation (each process re-generates only its rows that called a tool, and server "
    "mode assumes every process sends as many); set vllm_mode colocate, or num_processes 1"
)


def test_tools_with_vllm_server_mode_on_two_processes_are_refused():
    """TRL's tool loop re-generates a different number of rows on each process, which server mode cannot split back
    (trainer/review/tools.py says where in TRL): refused before launch, in one sentence."""
    server = {"backend": "trl", "use_vllm": True, "vllm_mode": "server", "vllm_gpus": "0", "num_processes": 2}
    assert SERVER_SENTENCE in _problems(tools=["builtin:calculator"], **server)
    assert SERVER_SENTENCE in _problems(environment="builtin:calculator", **server)


def test_tools_with_vllm_colocate_or_one_process_are_not_refused_for_it():
    """Colocate mode generates each process's rows on its own engine, and one process has nobody to disagree with."""
    colocate = {"backend": "trl", "use_vllm": True, "vllm_mode": "colocate", "num_processes": 2}
    one = {"backend": "trl", "use_vllm": True, "vllm_mode": "server", "vllm_gpus": "0", "num_processes": 1}
    for settings in (colocate, one):
        assert not [p for p in _problems(tools=["builtin:calculator"], **settings) if p.startswith("vllm_mode server:")]


# Unsloth's module of template matching, faked: the real one (unsloth/models/_trl_tool_templates.py) takes, for a
# template TRL does not know by its exact text, the known one that renders the same; this one takes Qwen2.5's, which
# the copy below renders exactly. Written as a file, since the review reads Unsloth's from its file.
FAKE_UNSLOTH_TEMPLATES = """
def _wrap_add_response_schema(original, trl_module):
    def add_response_schema(tokenizer):
        try:
            return original(tokenizer)
        except ValueError:
            tokenizer.chat_template = trl_module.qwen2_5_chat_template
            return original(tokenizer)
    return add_response_schema


def _wrap_get_training_chat_template(original, trl_module):
    return original
"""


@pytest.fixture
def copied_template_model(tool_model, tmp_path) -> Path:
    """builtin:tiny with a copy of TRL's Qwen2.5 template that renders the same text but is not the same string (as
    Unsloth's fixed copies of templates are)."""
    import shutil

    target = tmp_path / "copied-template"
    shutil.copytree(tool_model, target)
    template = target / "chat_template.jinja"
    template.write_text(template.read_text() + "{#- a copy's comment -#}")
    return target


def test_a_template_trl_knows_only_by_another_copy_is_refused_off_the_unsloth_path(copied_template_model):
    """On TRL's own path TRL refuses a template it does not know by its exact text (trl add_response_schema)."""
    found = _problems(
        model_name_or_path=str(copied_template_model), tools=["builtin:calculator"], backend="trl", **ROOM
    )
    assert [p for p in found if "TRL cannot parse its tool calls" in p], found


def test_a_template_unsloth_matches_passes_where_the_run_may_take_the_unsloth_path(
    copied_template_model, tmp_path, monkeypatch
):
    """Unsloth installed (here a stand-in package with its template module) and backend auto: the review checks the
    template as Unsloth's wrapped TRL will, and does not refuse what that path trains."""
    package = tmp_path / "site" / "unsloth"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the review must not import unsloth')\n")
    (package / "models" / "_trl_tool_templates.py").write_text(FAKE_UNSLOTH_TEMPLATES)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    model = str(copied_template_model)
    assert _problems(model_name_or_path=model, tools=["builtin:calculator"], **ROOM) == []
    refused = _problems(model_name_or_path=model, tools=["builtin:calculator"], backend="trl", **ROOM)
    assert [p for p in refused if "TRL cannot parse its tool calls" in p], refused
