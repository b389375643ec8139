"""The rules of the tool settings (``tools``, ``environment``): what TRL's GRPOTrainer would refuse when it is built,
said before a launch, each problem one sentence naming its setting.

What TRL requires, read from its source (trl 1.16.0 trainer/grpo_trainer.py; 1.15.0 has the same checks about 23
lines earlier):

- tools need transformers 5.0.0 or later, an environment 5.2.0 or later, and below 5.13 the jmespath package for
  parsing tool calls (628-648);
- the model's chat template must render a whole tool-calling exchange, user → assistant with tool_calls → tool
  (``supports_tool_calling``, 649-653; trl/chat_template_utils.py:800-863);
- TRL must be able to parse the model's tool calls: a tokenizer with no ``response_template`` (or legacy
  ``response_schema``) gets one from ``add_response_schema``, which knows a list of chat templates and raises for any
  other (762-766; trl/chat_template_utils.py:686-797);
- a template that is not prefix-preserving is swapped for TRL's training template of it, which exists for a list of
  templates only (776-779; ``get_training_chat_template``, trl/chat_template_utils.py:1077);
- an environment is made with no argument and must define a callable ``reset`` (685-701); its public methods other
  than ``reset`` and ``get_reward`` become tools (688-704);
- a tool's schema is built by transformers from its signature and Google-style docstring (251-257):
  ``transformers.utils.get_json_schema`` is called here on each tool, and its error reported.

The two template checks that go by a template's exact text are made as the run's worker will make them: with
Unsloth's wrappers of them when the run may take the Unsloth path (:func:`template_matchers`).

One rule is not TRL's own check but a combination its code cannot run (trl 1.15.0, the GPU path's TRL; 1.16.0 has
the same code): TRL's vLLM server mode with more than one training process. Each process runs its own tool loop and
re-generates only its rows that called a tool (trl 1.15.0 trainer/grpo_trainer.py:1896-1897, 2063-2069, 2118), so the
processes ask for different numbers of rows, or one asks for none and leaves the loop; server mode's ``generate``
gathers every process's rows and hands each back the slice ``process_index * len(prompts)`` (trl 1.15.0
generation/vllm_generation.py:593-597, 644, 651-658), which assumes equal counts. A process then gets another's
completions (or too few), or waits in a gather the others never join. Colocate mode generates each process's rows
on its own engine (:661-754, with the default tensor parallel size of 1), and is what such a run should use
(docs/gpu-path-evidence.md, issue 42; read in the source, not run).

A user's own tool or environment is imported (running its code) only when the operator allows custom code, as a
custom reward is (trainer.config.access.custom_tool_problems refuses it otherwise), and then in a child process
(trainer.scoring.user_code): what its module does as it is imported stays out of the process that checks it. The chat template is looked at
only for a model whose tokenizer is on this machine (builtin:tiny, a local directory, a hub model already
downloaded): for another hub model TRL's own check refuses it when the run starts. transformers is imported only
when a run sets tools.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer.config.cluster import vllm_node_layout
from trainer.config.names import BUILTIN_MODEL
from trainer.config.run_config import ConfigError, RunConfig
from trainer.loading.backend import existing_model_path
from trainer.loading.data import make_prompt
from trainer.review.rewards import CUSTOM_REWARD
from trainer.scoring.user_code import run_in_child
from trainer.tools.builtin import ENVIRONMENTS, TOOLS
from trainer.tools.limits import tool_methods
from trainer.tools.loading import BUILTIN, load_environment, load_tool

# trl 1.16.0 trainer/grpo_trainer.py:628-648
TOOLS_TRANSFORMERS = "5.0.0"
ENVIRONMENT_TRANSFORMERS = "5.2.0"
NO_JMESPATH_TRANSFORMERS = "5.13.0"


def tool_problems(config: RunConfig, import_custom: bool, check_template: bool = True) -> list[str]:
    """Every problem with a config's tools and environment (see the module docstring); an empty list when it sets
    neither. ``import_custom``: import the user's own files (the operator's permission); ``check_template``: look at
    the model's tokenizer (off where the dashboard may not read the model's path)."""
    if not config.tools and not config.environment:
        return []
    own = [spec for spec in [*config.tools, config.environment] if spec and not spec.startswith(BUILTIN)]
    if import_custom and own:  # the user's own code: imported in a child process, never in this one
        return run_in_child(f"{__name__}:own_tool_problems", [config.to_dict(), check_template], "tools")
    return _tool_problems(config, import_custom, check_template)


def own_tool_problems(config: dict[str, Any], check_template: bool) -> list[str]:
    """:func:`tool_problems` of a config that names the user's own tools or environment, with them imported: the
    child process's side (trainer.scoring.user_code)."""
    try:
        read = RunConfig.from_dict(config)[0]
    except ConfigError as exc:  # a partial config (a value of the wrong type): the asker reports those problems
        read = exc.partial
    return [] if read is None else _tool_problems(read, True, check_template)


def _tool_problems(config: RunConfig, import_custom: bool, check_template: bool) -> list[str]:
    found = _version_problems(config) + _generation_problems(config)
    schemas: list[dict] = []
    for spec in config.tools:
        if unnamed := _form_problem("tools", spec, TOOLS, "path/to/file.py:function"):
            found.append(unnamed)
            continue
        if not spec.startswith(BUILTIN) and not import_custom:
            continue  # refused by the operator's rule, not imported
        if unknown := _unknown_builtin("tools", spec, TOOLS):
            found.append(unknown)
            continue
        try:
            tool = load_tool(spec)
        except ValueError as exc:
            found.append(str(exc))
            continue
        found.extend(_schema_problems("tools", spec, tool, schemas))
    if config.environment and (
        unnamed := _form_problem("environment", config.environment, ENVIRONMENTS, "path/to/file.py:Class")
    ):
        found.append(unnamed)
    elif unknown := _unknown_builtin("environment", config.environment, ENVIRONMENTS):
        found.append(unknown)
    elif config.environment and (config.environment.startswith(BUILTIN) or import_custom):
        found.extend(_environment_problems(config.environment, schemas))
    # the model's files only where they are on this machine already: a check never downloads or dequantizes
    if check_template and schemas and not found and (path := existing_model_path(config)) is not None:
        found.extend(_template_problems(config, path, schemas))
    return found


def _form_problem(setting: str, spec: str, registry: dict[str, Any], own: str) -> str | None:
    """An entry that is neither ``builtin:NAME`` nor a user's ``file.py:name`` (or ``module:name``), with the
    built-in it may mean (``calculator`` for ``builtin:calculator``)."""
    if spec.startswith(BUILTIN) or CUSTOM_REWARD.match(spec):
        return None
    hint = f"; did you mean {BUILTIN}{spec}?" if spec in registry else ""
    return f"{setting}: {spec!r} is neither builtin:NAME nor {own}{hint}"


def _unknown_builtin(setting: str, spec: str, registry: dict[str, Any]) -> str | None:
    """A ``builtin:NAME`` that names no built-in, with the known ones (and the closest, when one is close)."""
    name = spec.removeprefix(BUILTIN)
    if not spec.startswith(BUILTIN) or name in registry:
        return None
    close = difflib.get_close_matches(name, list(registry), n=1)
    hint = f"; did you mean {BUILTIN}{close[0]}?" if close else ""
    known = ", ".join(BUILTIN + n for n in sorted(registry))
    return f"{setting}: unknown built-in {spec!r}: the built-in ones are {known}{hint}"


def _version_problems(config: RunConfig) -> list[str]:
    """The transformers (and jmespath) that TRL asks for tools and environments."""
    import transformers
    from packaging.version import Version

    installed = Version(transformers.__version__)
    found = []
    if config.tools and installed < Version(TOOLS_TRANSFORMERS):
        found.append(f"tools: TRL needs transformers {TOOLS_TRANSFORMERS} or later for tools; {installed} is installed")
    if config.environment and installed < Version(ENVIRONMENT_TRANSFORMERS):
        found.append(
            f"environment: TRL needs transformers {ENVIRONMENT_TRANSFORMERS} or later for an environment; "
            f"{installed} is installed"
        )
    if installed < Version(NO_JMESPATH_TRANSFORMERS) and importlib.util.find_spec("jmespath") is None:
        found.append(
            f"tools: TRL parses tool calls with the jmespath package on transformers below {NO_JMESPATH_TRANSFORMERS}, "
            f"and it is not installed (pip install jmespath, or transformers {NO_JMESPATH_TRANSFORMERS} or later)"
        )
    return found


def training_processes(config: RunConfig) -> int:
    """How many processes train: ``num_processes`` on each training node (a Slurm job's nodes, less the last when
    ``trl vllm-serve`` takes it, trainer.config.cluster.vllm_node_layout)."""
    nodes = config.slurm_nodes if config.executor == "slurm" else 1
    return config.num_processes * max(1, nodes - 1 if vllm_node_layout(config) else nodes)


def _generation_problems(config: RunConfig) -> list[str]:
    """Tools with TRL's vLLM server mode on more than one training process (the module docstring says why)."""
    processes = training_processes(config)
    if config.use_vllm and config.vllm_mode == "server" and processes > 1:
        return [
            f"vllm_mode server: with tools or an environment on {processes} training processes, TRL's server mode "
            "hands each process the wrong rows of a tool turn's generation (each process re-generates only its rows "
            "that called a tool, and server mode assumes every process sends as many); set vllm_mode colocate, or "
            "num_processes 1"
        ]
    return []


def _schema_problems(setting: str, spec: str, tool: Callable[..., Any], schemas: list[dict]) -> list[str]:
    """The tool's JSON schema as transformers builds it (appended to ``schemas``), or the one sentence why it can't."""
    from transformers.utils import get_json_schema

    try:
        schemas.append(get_json_schema(tool))
    except Exception as exc:  # noqa: BLE001 - transformers raises its own types (TypeHintParsingException, ...)
        name = getattr(tool, "__name__", spec)
        return [
            f"{setting}: {spec}: transformers cannot build the schema of {name} from its signature and docstring: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
        ]
    return []


def _environment_problems(spec: str, schemas: list[dict]) -> list[str]:
    """The environment class loads, is made with no argument, has a callable ``reset``, and each of its tool
    methods has a schema."""
    try:
        cls = load_environment(spec)
    except ValueError as exc:
        return [str(exc)]
    if not callable(inspect.getattr_static(cls, "reset", None)):
        return [
            f"environment: {spec}: {cls.__name__} has no reset method; TRL calls reset(**row) before each rollout "
            "and refuses an environment without one"
        ]
    try:
        instance = cls()
    except Exception as exc:  # noqa: BLE001 - the user's constructor
        return [
            f"environment: {spec}: {cls.__name__}() failed ({type(exc).__name__}: {exc}); TRL makes each rollout's "
            "instance with no argument"
        ]
    found = []
    for name in tool_methods(cls):  # the methods TRL offers as tools
        found.extend(_schema_problems("environment", spec, getattr(instance, name), schemas))
    return found


def template_matchers(config: RunConfig) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """TRL's ``add_response_schema`` and ``get_training_chat_template`` as the run's worker will have them. TRL knows
    a chat template by its exact text and refuses any other, Unsloth's fixed copies (unsloth/...) included; on the
    Unsloth path Unsloth wraps both to take, instead, the known template that renders the same text (unsloth
    2026.10.9 models/_trl_tool_templates.py:4-6, 230-300, installed before its trainers are made, rl.py:5387-5393).
    So a run that may take that path (Unsloth installed, ``backend`` auto or unsloth, not the built-in model) is
    checked with Unsloth's wrappers: without them the review would refuse a template Unsloth's path trains."""
    import trl.chat_template_utils as trl_templates

    plain = (trl_templates.add_response_schema, trl_templates.get_training_chat_template)
    if config.backend not in ("auto", "unsloth") or config.model_name_or_path == BUILTIN_MODEL:
        return plain
    module = _unsloth_templates()
    try:
        return (
            module._wrap_add_response_schema(plain[0], trl_templates),
            module._wrap_get_training_chat_template(plain[1], trl_templates),
        )
    except AttributeError:  # no Unsloth (None), or one whose private helpers moved: TRL's own check
        return plain


def _unsloth_templates() -> Any:
    """Unsloth's module of template matching, read from its file without importing the unsloth package (which
    patches TRL and looks for a GPU on import; the file needs only the standard library and TRL), or None."""
    spec = importlib.util.find_spec("unsloth")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "_trl_tool_templates.py"
    if not path.is_file():
        return None
    loaded = importlib.util.spec_from_file_location("grpo_studio_unsloth_tool_templates", path)
    module = importlib.util.module_from_spec(loaded)
    try:
        loaded.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - a file of another Unsloth version: TRL's own check applies
        return None
    return module


def _template_problems(config: RunConfig, path: str, schemas: list[dict]) -> list[str]:
    """Whether the model's chat template renders a tool call, TRL can parse its tool calls and keep its prefixes
    (the module docstring's list), and a prompt's system prompt and tool schemas leave room for a question within
    ``max_prompt_length`` (grpo-studio cuts a long prompt's question only, trainer.job.trl_args.truncate_prompts).
    Nothing when the tokenizer is not on this machine."""
    from transformers import AutoTokenizer

    model = config.model_name_or_path

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception:  # noqa: BLE001 - not downloaded yet: TRL checks the template when the run starts
        return []
    try:  # TRL 1.15.0 and 1.16.0 have all four (trl/chat_template_utils.py); an older TRL has no tools to check
        from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling
    except ImportError:
        return []
    add_response_schema, get_training_chat_template = template_matchers(config)

    if not supports_tool_calling(tokenizer):
        return [
            f"model {model}: its chat template does not render a tool call (user, assistant with tool_calls, tool), "
            "so TRL refuses tools with it; choose a model whose template supports tools, e.g. Qwen/Qwen2.5-0.5B-Instruct"
            + (" (offline: builtin:tiny-tools)" if model == BUILTIN_MODEL else "")
        ]
    call = {"type": "function", "function": {"name": schemas[0]["function"]["name"], "arguments": {}}}
    conversation = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": call["function"]["name"], "content": "1"},
    ]
    try:
        tokenizer.apply_chat_template(conversation, tools=schemas, tokenize=False)
    except Exception as exc:  # noqa: BLE001 - a Jinja template's own error
        return [f"model {model}: its chat template fails on the run's tools: {type(exc).__name__}: {exc}"]
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:
            add_response_schema(tokenizer)
        except ValueError:
            return [
                f"model {model}: TRL cannot parse its tool calls: its tokenizer sets no response_template and TRL "
                "knows no parser for its chat template (TRL knows Qwen2.5, Qwen3, Llama 3.1/3.2, GLM-4, gpt-oss and "
                "a few others)"
            ]
    if misread := _read_back_problem(tokenizer, schemas[0]):
        return [f"model {model}: TRL cannot read back a tool call its chat template writes: {misread}"]
    if not is_chat_template_prefix_preserving(tokenizer):
        try:
            get_training_chat_template(tokenizer)
        except Exception:  # noqa: BLE001 - TRL raises for a template it has no training version of
            return [
                f"model {model}: its chat template renders earlier turns differently once a tool answers (not "
                "prefix-preserving), and TRL has no training version of it"
            ]
    empty = make_prompt("", config.system_prompt, config.few_shot_examples)  # all of a prompt but its question
    text = tokenizer.apply_chat_template(empty, tools=schemas, tokenize=False, add_generation_prompt=True)
    overhead = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    if overhead >= config.max_prompt_length:
        return [
            f"max_prompt_length {config.max_prompt_length}: with this model's template the system prompt and the "
            f"tools' schemas alone take {overhead} tokens, leaving no room for a question; raise it above {overhead}"
        ]
    return []


def _read_back_problem(tokenizer, schema: dict) -> str | None:
    """Whether TRL's parser reads a tool call of the run's first tool back as the template wrote it: the call is
    rendered after a prompt, its tokens (through the end of the turn) parsed as TRL parses a rollout's
    (``trl.chat_template_utils.parse_response`` with the prompt as prefix, trl 1.16.0 trainer/grpo_trainer.py:1862),
    and compared. A template that writes calls in a form other than its response template reads (a model's own
    template with a parser made for another) fails here; TRL would take each call for plain text and never run a
    tool. None when it reads back, or when the tokens can't be split into prompt and turn (nothing to say then)."""
    from trl.chat_template_utils import parse_response

    function = schema["function"]
    properties = function.get("parameters", {}).get("properties", {})
    arguments = {name: "1" for name, spec in properties.items() if spec.get("type") == "string"}
    call = {"type": "function", "function": {"name": function["name"], "arguments": arguments}}
    asked = [{"role": "user", "content": "hi"}]
    answered = asked + [{"role": "assistant", "content": "", "tool_calls": [call]}]
    try:
        prompt = tokenizer.apply_chat_template(asked, tools=[schema], add_generation_prompt=True, return_dict=False)
        whole = tokenizer.apply_chat_template(answered, tools=[schema], return_dict=False)
    except Exception:  # noqa: BLE001 - a template's own error is reported by the rendering check above
        return None
    if whole[: len(prompt)] != prompt:
        return None
    turn = whole[len(prompt) :]
    if tokenizer.eos_token_id in turn:
        turn = turn[: turn.index(tokenizer.eos_token_id) + 1]
    parsed = parse_response(tokenizer, turn, prefix=prompt, tools=[schema]).get("tool_calls") or []
    got = [c.get("function", c) for c in parsed]
    if [(c.get("name"), c.get("arguments")) for c in got] != [(function["name"], arguments)]:
        shown = ", ".join(f"{c.get('name')}({c.get('arguments')})" for c in got) or "no call"
        return f"wrote {function['name']}({arguments}), read {shown}"
    return None
