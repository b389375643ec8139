"""The verbs: every user action under one name, with its parameters, for the three surfaces that offer it.

A verb is what a user does (launch a run, stop it, read its log). The ``grpo-studio`` command line (app/cli/main.py), the
named API (app/web/api.py) and the dashboard's pages (app/web/pages) each offer some of them, and before this table each
surface named them itself: the CLI's ``eval``, ``logs`` and ``run`` were the API's ``/evaluate``, ``/log`` and
``/launch``. Now the CLI's subcommands and their arguments, and the API's endpoints and their signatures, are built
from :data:`VERBS`; a verb's name is its command and its endpoint, and a surface that offers a verb the table does not
list, or under another name, fails tests/actions/test_verbs.py (which prints the three side by side). The CLI's old names
stay as :attr:`Verb.aliases`, each still a command of its own with the same arguments. One old name is left
ambiguous on purpose: ``grpo-studio run`` launches (its old name, in every script), ``/run`` reads one run.

A parameter says where it is taken: ``check`` (the API's type-and-range check, app.actions.arguments, one sentence
for a wrong value) puts it on the API, ``flags`` (argparse's option strings; empty: its name, positional when it has
no default) on the CLI. What a surface does with a verb's values (print a table, shape a JSON answer, fill widgets)
stays in that surface's adapter, under the verb's name (app/cli/main.py's ``cmd_<verb>``, app/web/api.py's ``<verb>``); the action
it calls is :attr:`Verb.action` in app.actions. A verb whose surface writes no adapter of its own answers there with
:func:`answered`, its action's value as JSON, so a new verb reaches the CLI and the API from this table and its action.
docs/cli.md, docs/api.md and README's list of endpoints are generated from the table too (scripts/verb_tables.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app import actions
from app.actions import arguments

CLI, API, PAGE = "cli", "api", "page"
REQUIRED = object()  # a parameter without a default
MAX_CONFIG_CHARS = 1_000_000  # a config text: the config file's own limit is 1 MB

Check = Callable[[Any, str], Any]


def whole(low: int, high: int) -> Check:
    """The check of a whole number from ``low`` to ``high``."""
    return lambda value, name: arguments.whole(name, value, low, high)


def step(low: int = 0) -> Check:
    """The check of a step or a cursor from ``low``."""
    return lambda value, name: arguments.step(value, name, low)


def text(limit: int = arguments.MAX_TEXT, empty: str | None = "") -> Check:
    """The check of a text of at most ``limit`` characters (None reads as ``empty`` where that is not None)."""
    return lambda value, name: arguments.text(name, value, limit, empty)


@dataclass(frozen=True)
class Param:
    """One argument of a verb: its name (the API's parameter, the CLI's ``dest``), type, help and default."""

    name: str
    type: Any  # int, str, int | None: the API's type hint; the CLI parses an int as an int
    help: str  # the CLI's ``--help`` line (a default is named in it)
    default: Any = REQUIRED
    check: Check | None = None  # on the API, checked by this; None: not on the API
    flags: tuple[str, ...] | None = ()  # the CLI's option strings (empty: the name); None: not on the CLI
    options: Mapping[str, Any] = field(default_factory=dict)  # argparse's other keywords (action, metavar, default)

    def argparse(self) -> tuple[tuple[str, ...], dict[str, Any]]:
        """``add_argument``'s arguments for this parameter."""
        keywords: dict[str, Any] = {"help": self.help}
        if self.type is int or self.type == int | None:
            keywords["type"] = int
        if self.default is not REQUIRED:
            keywords["default"] = self.default
        keywords |= self.options
        if callable(keywords.get("default")):  # read when the parser is built (an environment variable)
            keywords["default"] = keywords["default"]()
        if self.default is REQUIRED and not self.flags:
            return (self.name,), keywords
        keywords["dest"] = self.name  # ``--step`` for upto_step: the values arrive under the parameter's name
        return self.flags or (f"--{self.name.replace('_', '-')}",), keywords


@dataclass(frozen=True)
class Verb:
    """One user action: its name on every surface, the app.actions function it is, and its parameters."""

    name: str
    action: str | None  # the app.actions function (None: the CLI's own, such as serve)
    help: str  # one line: the CLI's help, the table's description
    surfaces: frozenset[str]
    params: tuple[Param, ...] = ()
    reads: tuple[str, ...] = ()  # the other app.actions functions its surfaces call for it (a page's widgets)
    aliases: tuple[str, ...] = ()  # the CLI's old names, each still a command
    examples: tuple[str, ...] = ()  # real commands, ending its ``--help`` (tests/cli/test_cli_help.py parses them)

    @property
    def api_params(self) -> tuple[Param, ...]:
        """The parameters the API takes, in the endpoint's order."""
        return tuple(p for p in self.params if p.check is not None)

    @property
    def cli_params(self) -> tuple[Param, ...]:
        """The parameters the command takes."""
        return tuple(p for p in self.params if p.flags is not None)

    def examples_as(self, name: str) -> list[str]:
        """The examples, as written with the command ``name`` (the verb's or an old name)."""
        return [f"grpo-studio {name}" + e.removeprefix(f"grpo-studio {self.name}") for e in self.examples]


# The parameters several verbs take, written once.
RUN_ID = Param("run_id", int, "the run's id, as `grpo-studio runs` lists it", check=arguments.run_id)
CONFIG = Param(
    "config",
    str,
    "a YAML or JSON file with RunConfig fields, or a preset's name (grpo-studio presets)",
    check=text(MAX_CONFIG_CHARS, None),  # the API takes the text itself, the CLI a file or a preset
)
SWEEP_ID = Param(
    "sweep_id",
    int,
    "the sweep's id, as `grpo-studio sweeps` lists it",
    check=lambda value, name: arguments.whole(name, value, 1, arguments.MAX_ID),
)
ADAPTER = Param("adapter", str, '"final" or "step N" (a checkpoint; default final)', "final", check=text(40))


def _flag(name: str, help: str, *flags: str) -> Param:
    """A CLI switch, off unless given; not on the API."""
    return Param(name, bool, help, False, flags=flags, options={"action": "store_true"})


def _cli(name: str, help: str, *flags: str, **options: Any) -> Param:
    """A CLI option that is not on the API (``--name VALUE``, argparse's other keywords as given)."""
    return Param(name, options.pop("type", str), help, options.pop("default", None), flags=flags, options=options)


DETACH = _flag("detach", "start a background worker and return at once")
VERBOSE = _flag("verbose", "print the worker's INFO lines too (else they go to the run's log)", "--verbose", "-v")
UNISOLATED = _flag(
    "allow_unisolated_code",
    "let code_tests run model-written code where it can't be sandboxed (see SECURITY.md; you accept the risk)",
)
API_ONLY = None  # Param.flags for a parameter the CLI does not take

BOTH, CLI_ONLY, API_PAGE = frozenset({CLI, API, PAGE}), frozenset({CLI}), frozenset({API, PAGE})

VERBS: tuple[Verb, ...] = (
    Verb(
        "validate",
        "validate",
        "check a run config: every problem at once, the warnings of a valid one, the config as it would run",
        API_PAGE,
        (CONFIG,),
        reads=("config_of",),
    ),
    Verb(
        "probe",
        "probe",
        "sample and score a few groups with the base model before training",
        BOTH,
        (
            CONFIG,
            Param("prompts", int, "prompts to sample a group for (default 8)", 8, whole(*arguments.PROBE_PROMPTS)),
            UNISOLATED,
        ),
        examples=("grpo-studio probe tiny-offline", "grpo-studio probe my-run.yaml --prompts 16"),
    ),
    Verb(
        "preview",
        "prompt_preview",
        "the first prompt of a data set as the model will read it (the form's chat-template preview)",
        frozenset({PAGE}),
    ),
    Verb(
        "launch",
        "launch",
        "create a run from a YAML/JSON config and train it",
        BOTH,
        (CONFIG, _cli("name", "override the run name"), DETACH, VERBOSE, UNISOLATED),
        aliases=("run",),
        examples=("grpo-studio launch tiny-offline", "grpo-studio launch my-run.yaml --name lr-1e-4 --detach"),
    ),
    Verb(
        "sweep",
        "sweep",
        "create a sweep: one run per point of its settings, each checked (and probed) before any is queued",
        BOTH,
        (
            CONFIG,
            Param(
                "grid",
                str,
                'settings and their values, e.g. "beta=0,0.04 learning_rate=1e-5,5e-5" (a grid; they replace the '
                "sweep: block's settings of the same name; default: the block's alone)",
                "",
                text(2000),
            ),
            _cli("name", "the sweep's name (its members are NAME-1, NAME-2, ...)"),
            _flag("detach", "create the members and return: a running dashboard's queue trains them"),
        ),
        examples=(
            'grpo-studio sweep tiny-offline --grid "beta=0,0.04 learning_rate=1e-5,5e-5"',
            "grpo-studio sweep tiny-grid --detach",
        ),
        reads=("sweepable",),
    ),
    Verb(
        "sweeps",
        "sweeps",
        "list sweeps, or one sweep's table: each member's point, status, objective now and best, reward, KL, why it stopped",
        BOTH,
        (
            Param(
                "sweep_id",
                int | None,
                "the sweep's id (default: list them all)",
                None,
                lambda value, name: None if value is None else arguments.whole(name, value, 1, arguments.MAX_ID),
                ("--id",),
                {"metavar": "ID"},
            ),
        ),
        reads=("sweep_detail", "summary_json", "point_text"),
        examples=("grpo-studio sweeps", "grpo-studio sweeps --id 1"),
    ),
    Verb(
        "stop_sweep",
        "stop_sweep",
        "stop a sweep: no member is asked or pruned, every live member stops (queued at once, training at its next step)",
        BOTH,
        (SWEEP_ID,),
        examples=("grpo-studio stop_sweep 1",),
    ),
    Verb(
        "resume_sweep",
        "resume_sweep",
        "resume a stopped sweep: its members that the stop ended continue from their checkpoints, TPE asks again",
        BOTH,
        (SWEEP_ID,),
        examples=("grpo-studio resume_sweep 1",),
    ),
    Verb(
        "delete_sweep",
        "delete_sweep",
        "delete a sweep whose members have all ended, with every member's metrics, samples, log and files",
        API_PAGE,
        (SWEEP_ID,),
    ),
    Verb(
        "stop",
        "stop",
        "stop a run at its next step boundary",
        BOTH,
        (RUN_ID,),
        examples=("grpo-studio stop 1",),
    ),
    Verb(
        "resume",
        "resume",
        "continue a stopped or failed run from its latest checkpoint",
        BOTH,
        (RUN_ID, DETACH, VERBOSE, UNISOLATED),
        examples=("grpo-studio resume 1", "grpo-studio resume 1 --detach"),
    ),
    Verb(
        "fork",
        "fork",
        "start a new run from a saved checkpoint of another run",
        BOTH,
        (
            RUN_ID,
            Param("step", int, "the checkpoint's step", check=step(), flags=("--step",), options={"required": True}),
            Param("settings", str, "changed settings, one key=value a line", "", text(), API_ONLY),
            _cli(
                "set",
                "a changed setting, e.g. beta=0.01 (repeatable)",
                action="append",
                default=[],
                metavar="KEY=VALUE",
            ),
            Param(
                "name",
                str,
                "the new run's name (default: <parent>-fork<step>)",
                "",
                text(200),
                options={"default": None},
            ),
            DETACH,
            VERBOSE,
            UNISOLATED,
        ),
        reads=("checkpoints", "start_now"),
        examples=("grpo-studio fork 1 --step 20 --set beta=0.01 --set max_steps=200",),
    ),
    Verb("clone", "clone", "a run's config in the New run form, to change and launch", frozenset({PAGE})),
    Verb(
        "delete",
        "delete",
        "delete a run that is not live, with its metrics, samples, log and files",
        API_PAGE,
        (RUN_ID,),
    ),
    Verb(
        "export",
        "export",
        "zip, merge or push a run's adapter",
        frozenset({CLI, PAGE}),
        (
            RUN_ID,
            ADAPTER,
            _cli("zip", "write the adapter as a zip", metavar="PATH"),
            _cli("merge", "merge into the base and save a full model directory", metavar="DIR"),
            _cli("push", "push to this Hub repo (the merged model with --merge)", metavar="REPO"),
            _cli("token", "Hugging Face token (default: $HF_TOKEN)"),
            _cli("metrics", "write the run's metrics, a column per key, as .csv or .parquet", metavar="FILE"),
        ),
        examples=("grpo-studio export 1 --zip adapter.zip", "grpo-studio export 1 --metrics run.csv"),
    ),
    Verb(
        "runs",
        "runs",
        "list runs",
        BOTH,
        (Param("search", str, "a name part or an id (empty: all)", "", text(200), API_ONLY),),
        reads=("places", "run_json", "run_errors"),
        examples=("grpo-studio runs",),
    ),
    Verb(
        "run",
        "run_detail",
        "one run: what runs says of it, with its whole config, its error and its newest evaluation's state",
        frozenset({API}),
        (RUN_ID,),
        reads=("latest_evaluation_json",),
    ),
    Verb(
        "monitor",
        "monitor_view",
        "one poll of the Monitor: a run's charts with its overlays, its queue and its health",
        frozenset({PAGE}),
        reads=("has_runs",),
    ),
    Verb(
        "metrics",
        "metrics",
        "a run's metric series as columns",
        frozenset({API}),
        (
            RUN_ID,
            Param("keys", str, "comma-separated metric keys (empty: all)", "", text(), API_ONLY),
            Param("since_step", int, "only steps after this one", -1, step(low=-1), API_ONLY),
        ),
    ),
    Verb(
        "samples",
        "samples",
        "the completions sampled at a step, with their rewards and advantages",
        API_PAGE,
        (
            RUN_ID,
            Param("step", int | None, "the step (None: the newest)", None, arguments.optional_step, API_ONLY),
            Param("limit", int, "rows at most", 200, whole(1, arguments.MAX_SAMPLES_LIMIT), API_ONLY),
        ),
        reads=("sample_steps",),
    ),
    Verb(
        "tokens",
        "token_values",
        "the tokens behind an advantage: one completion's per-token probabilities",
        frozenset({PAGE}),
        reads=("token_completions", "latest_token_step", "step_samples"),
    ),
    Verb(
        "alerts",
        "alerts",
        "a run's alerts: failure signs now and the reward-hacking watch's history (as the Monitor's banner)",
        BOTH,
        (RUN_ID,),
        reads=("run_alerts", "cached_alerts", "watch_alerts"),
        examples=("grpo-studio alerts 1",),
    ),
    Verb(
        "log",
        "log",
        "print a run's log, with the traceback of a failure",
        frozenset({CLI, API}),
        (
            RUN_ID,
            Param("after_id", int, "only lines after this one", 0, whole(0, arguments.MAX_ID), API_ONLY),
            _flag("follow", "keep printing new lines until the run ends", "--follow", "-f"),
        ),
        aliases=("logs",),
        examples=("grpo-studio log 1", "grpo-studio log 1 --follow"),
    ),
    Verb(
        "prompts",
        "learning",
        "a run's learning map (each prompt's pass rate and class) and its reward-hacking watch",
        BOTH,
        (
            RUN_ID,
            Param(
                "upto_step",
                int | None,
                "the map as of this step (default: the latest)",
                None,
                arguments.optional_step,
                ("--step",),
                {"metavar": "STEP"},
            ),
            _flag("all", "list every prompt (default: 10 of each class)", "--all"),
        ),
        reads=("learning_json", "newest_steps", "samples_between"),
        examples=("grpo-studio prompts 1", "grpo-studio prompts 1 --step 50 --all"),
    ),
    Verb(
        "evaluate",
        "evaluate",
        "score base and tuned on held-out problems",
        BOTH,
        (
            RUN_ID,
            ADAPTER,
            Param("k", int, "held-out problems (default 200)", 200, whole(*arguments.EVAL_K)),
            Param(
                "samples",
                int,
                "sampled answers per problem for pass@1 (default 4; 0: greedy only)",
                4,
                whole(*arguments.EVAL_SAMPLES),
            ),
        ),
        reads=("evaluation_json", "latest_evaluation", "heldout_origin"),
        aliases=("eval",),
        examples=("grpo-studio evaluate 1", "grpo-studio evaluate 1 --k 50 --samples 0 --adapter 'step 20'"),
    ),
    Verb("stop-evaluation", "stop_evaluation", "stop a run's evaluation that is queued or running", frozenset({PAGE})),
    Verb(
        "compare",
        "compare",
        "base and tuned side by side on one prompt, or on held-out problems",
        frozenset({PAGE}),
        reads=(
            "adapter_names",
            "compared_run",
            "compare_notice",
            "heldout_points",
            "heldout_problems",
            "release_compare_model",
            "gpu_busy",
        ),
    ),
    Verb("datasets", "dataset_names", "the data sets uploaded to the data dir", frozenset({PAGE})),
    Verb(
        "presets",
        None,
        "list the ready-made configs (run one with: grpo-studio launch NAME)",
        CLI_ONLY,
        examples=("grpo-studio presets",),
    ),
    Verb(
        "worker",
        None,
        "train an existing run in this process (as python -m trainer.job.worker does)",
        CLI_ONLY,
        (RUN_ID,),
        examples=("grpo-studio worker 1",),
    ),
    Verb(
        "serve",
        None,
        "start the dashboard",
        CLI_ONLY,
        (
            _cli("host", "address to listen on (default 127.0.0.1; 0.0.0.0 in the container)", default="127.0.0.1"),
            _cli(
                "port",
                "port to listen on (default 7860, or $GRPO_STUDIO_PORT)",
                type=int,
                default=lambda: os.environ.get("GRPO_STUDIO_PORT", 7860),  # argparse reads a text default with int
            ),
            _cli("auth", "user:password protecting the UI and its API (or set GRPO_STUDIO_AUTH)"),
            _flag("allow_custom_rewards", "let the form accept path/to/file.py:function rewards (runs arbitrary code)"),
            _cli(
                "allow_path",
                "let dashboard users use local models and data files under DIR (repeatable; the data dir is always "
                "allowed)",
                action="append",
                default=[],
                metavar="DIR",
            ),
            _cli(
                "max_upload_size",
                "largest data set upload, refused while it arrives (default 1GB; e.g. 500MB, 5GB)",
                default="1GB",
                metavar="SIZE",
            ),
            _cli(
                "max_concurrent_runs",
                "training runs at once (default 1; on a machine with several GPUs, up to one per GPU)",
                type=int,
                default=1,
            ),
            UNISOLATED,
        ),
        examples=("grpo-studio serve", "grpo-studio serve --host 0.0.0.0 --auth me:secret"),
    ),
    Verb(
        "build-tiny",
        None,
        "rebuild the built-in model; its held-out correctness vs the shipped one",
        CLI_ONLY,
        (_cli("into", "build into DIR (default: a new directory under the data dir)", metavar="DIR"),),
        examples=("grpo-studio build-tiny",),
    ),
)

BY_NAME: dict[str, Verb] = {verb.name: verb for verb in VERBS}


def on(surface: str) -> tuple[Verb, ...]:
    """The verbs ``surface`` (CLI, API or PAGE) offers, in the table's order."""
    return tuple(verb for verb in VERBS if surface in verb.surfaces)


def answered(verb: Verb, values: Mapping[str, Any]) -> Any:
    """What ``verb`` answers on a surface that writes no answer of its own (app/cli/main.py, app/web/api.py): its action called
    with ``values`` by parameter name, as JSON (the result's ``to_json()`` where it has one)."""
    result = getattr(actions, verb.action)(**values)
    return result.to_json() if hasattr(result, "to_json") else result
