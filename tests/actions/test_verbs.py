"""One table of verbs (app/actions/verbs.py, issue 39 item 2): the command line, the named API and the dashboard's pages offer
the verbs it lists, under its names. Each surface is read as a user meets it (the parser's subcommands, the endpoints
a Gradio app registers, the app.actions calls in the pages' source), not from the table, and listed side by side."""

from __future__ import annotations

import argparse
import ast
import inspect

import pytest

from app import actions
from app.actions import verbs
from app.cli.main import COMMANDS, _parser
from tests.conftest import ROOT

PAGES = ROOT / "app" / "web" / "pages"

# The page modules that call each verb's action (or what it reads): the one column of the listing the table does not
# say. A verb no page calls has no row.
PAGE_CALLERS = """\
validate         new_run
probe            new_run
preview          new_run
launch           new_run
sweep            new_run
sweeps           sweeps
stop_sweep       sweeps
resume_sweep     sweeps
delete_sweep     sweeps
stop             runs
resume           runs
fork             runs, sweeps
clone            runs
delete           runs
export           compare, runs
runs             compare, runs
monitor          monitor
samples          monitor
tokens           learning
alerts           monitor
prompts          learning
evaluate         evaluation
stop-evaluation  evaluation
compare          compare
datasets         data_files"""


def _row(name: str, action: str, command: str, endpoint: str, pages: str) -> str:
    return f"{name:<16} {action:<18} {command:<19} {endpoint:<11} {pages}".rstrip()


def table_side_by_side() -> str:
    """The listing as the table says it should read: each verb's action, its command (old names in brackets) and its
    endpoint where it lists the surface, and the page modules of :data:`PAGE_CALLERS`."""
    pages = dict(line.split(maxsplit=1) for line in PAGE_CALLERS.splitlines())
    lines = []
    for verb in verbs.VERBS:
        command = "-"
        if verbs.CLI in verb.surfaces:
            command = f"{verb.name} ({', '.join(verb.aliases)})" if verb.aliases else verb.name
        endpoint = f"/{verb.name}" if verbs.API in verb.surfaces else "-"
        lines.append(_row(verb.name, verb.action or "-", command, endpoint, pages.get(verb.name, "-")))
    return "\n".join(lines)


def _commands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def cli_surface() -> dict[str, list[str]]:
    """Each verb's commands, its own name first, found by the function a subcommand runs."""
    verb_of = {func: name for name, func in COMMANDS.items()}
    found: dict[str, list[str]] = {}
    for command, parser in _commands().items():
        verb = verb_of.get(parser.get_default("func"), f"(no verb: {command})")
        found.setdefault(verb, []).append(command)
    return {verb: sorted(names, key=lambda n: n != verb) for verb, names in found.items()}


def api_surface() -> set[str]:
    """The named endpoints a dashboard registers (without starting a server)."""
    import gradio as gr

    from app.web import api
    from trainer.config.access import Access

    with gr.Blocks() as demo:
        api.register(Access())
    return {f"/{fn.api_name.lstrip('/')}" for fn in demo.fns.values() if fn.api_name}


def _action_functions() -> dict[str, object]:
    """app.actions' functions (not the types and storage helpers it passes on to the pages)."""
    return {
        name: obj
        for name, obj in vars(actions).items()
        if inspect.isfunction(obj) and obj.__module__.startswith("app.actions.")
    }


def page_calls() -> dict[str, dict[str, set[str]]]:
    """For each page module, each of its functions (a callback, or the layout that wires them) and the app.actions
    functions it calls (``actions.NAME``)."""
    functions = _action_functions()
    calls: dict[str, dict[str, set[str]]] = {}
    for path in sorted(PAGES.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            named = {
                sub.attr
                for sub in ast.walk(node)
                if isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "actions"
                and sub.attr in functions
            }
            if named:
                calls.setdefault(path.stem, {})[node.name] = named
    return calls


def _verb_of_action() -> dict[str, str]:
    """Each app.actions function a verb is or reads, and the verb's name."""
    owners: dict[str, str] = {}
    for verb in verbs.VERBS:
        for name in filter(None, (verb.action, *verb.reads)):
            assert name not in owners, f"{name} belongs to {owners[name]} and {verb.name}"
            owners[name] = verb.name
    return owners


def page_surface() -> dict[str, set[str]]:
    """Each verb the pages call, and the page modules that call it."""
    owners = _verb_of_action()
    pages: dict[str, set[str]] = {}
    for module, functions in page_calls().items():
        for called in functions.values():
            for name in called:
                pages.setdefault(owners.get(name, f"(no verb: actions.{name})"), set()).add(module)
    return pages


def side_by_side() -> str:
    """The table's verbs with what each surface offers of them, and any verb a surface offers that the table lacks."""
    cli, api, pages = cli_surface(), api_surface(), page_surface()
    names = [v.name for v in verbs.VERBS] + sorted(
        (set(cli) | {a.lstrip("/") for a in api} | set(pages)) - set(verbs.BY_NAME)
    )
    lines = []
    for name in names:
        verb = verbs.BY_NAME.get(name)
        commands = cli.get(name, [])
        command = " ".join([commands[0], f"({', '.join(commands[1:])})"] if commands[1:] else commands) or "-"
        endpoint = f"/{name}" if f"/{name}" in api else "-"
        action = verb.action if verb and verb.action else "-"
        lines.append(_row(name, action, command, endpoint, ", ".join(sorted(pages.get(name, ()))) or "-"))
    return "\n".join(lines)


def test_the_three_surfaces_offer_the_tables_verbs_side_by_side():
    """The listing is read from the surfaces and compared with what the table says: a command, an endpoint or a
    page's call of an action that no verb holds shows as "(no verb: ...)", a verb offered under another name as a row
    of its own, a verb a surface lacks as a "-" where the table names it."""
    listing = side_by_side()
    print(listing)
    assert listing == table_side_by_side()


@pytest.mark.parametrize("surface", [verbs.CLI, verbs.API, verbs.PAGE])
def test_each_surface_offers_what_the_table_says(surface):
    offered = {
        verbs.CLI: set(cli_surface()),
        verbs.API: {name.lstrip("/") for name in api_surface()},
        verbs.PAGE: set(page_surface()),
    }[surface]
    assert offered == {verb.name for verb in verbs.on(surface)}


def test_an_old_command_name_is_the_same_command():
    """``run``, ``logs`` and ``eval`` take what ``launch``, ``log`` and ``evaluate`` take and run the same function."""
    commands = _commands()
    for verb in verbs.VERBS:
        for alias in verb.aliases:
            new, old = commands[verb.name], commands[alias]
            assert old.get_default("func") is new.get_default("func")
            assert [a.option_strings or a.dest for a in old._actions] == [
                a.option_strings or a.dest for a in new._actions
            ]
    assert _parser().parse_args(["eval", "3", "--k", "5"]) == _parser().parse_args(["evaluate", "3", "--k", "5"])


def test_every_endpoint_takes_the_verbs_parameters_with_their_types():
    from app.web.api import endpoints
    from trainer.config.access import Access

    for name, fn in endpoints(Access()).items():
        params = inspect.signature(fn).parameters
        assert [(p.name, p.annotation) for p in params.values()] == [
            (p.name, p.type) for p in verbs.BY_NAME[name].api_params
        ], name


def test_each_surface_calls_its_verbs_action():
    """A command and an endpoint named for a verb call that verb's action (or what it reads), not another's."""
    from app.web import api

    owners = _verb_of_action()
    for verb in verbs.on(verbs.CLI) + verbs.on(verbs.API):
        if verb.action is None:
            continue
        bodies = []
        if verb in verbs.on(verbs.CLI):
            bodies.append(COMMANDS[verb.name])
        if verb in verbs.on(verbs.API):
            bodies.append(api.ANSWERS[verb.name])
        for body in bodies:
            if hasattr(body, "action"):  # a surface's answer made from the table (app.actions.verbs.answered)
                assert body.action == verb.action, (verb.name, body.__name__, body.action)
                continue
            tree = ast.parse(inspect.getsource(body).strip())
            called = {
                n.attr
                for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "actions"
            } & set(owners)
            assert called and {owners[c] for c in called} == {verb.name}, (verb.name, body.__name__, called)


def test_every_action_the_pages_call_belongs_to_a_verb():
    """Each page function's calls of app.actions, printed as the verbs they are (``pytest -s`` shows them)."""
    owners = _verb_of_action()
    for module, functions in page_calls().items():
        for function, called in functions.items():
            print(f"{module}.{function}: {', '.join(sorted({owners.get(n, '?' + n) for n in called}))}")
    strays = {
        f"{module}.{function}: actions.{name}"
        for module, functions in page_calls().items()
        for function, called in functions.items()
        for name in called
        if name not in owners
    }
    assert strays == set()


def test_every_verb_names_an_action_that_exists():
    for verb in verbs.VERBS:
        for name in filter(None, (verb.action, *verb.reads)):
            assert inspect.isfunction(getattr(actions, name, None)), f"{verb.name}: actions.{name}"


def _throwaway(monkeypatch, action) -> verbs.Verb:
    """A verb the table does not hold, on the CLI and the API, whose action is ``action`` (set on app.actions)."""
    monkeypatch.setattr(actions, "throwaway_status", action, raising=False)
    return verbs.Verb("throwaway", "throwaway_status", "a run's status", verbs.BOTH, (verbs.RUN_ID,))


def test_a_verb_without_a_command_of_its_own_prints_its_actions_answer_as_json(monkeypatch, capsys):
    import json

    from app.cli import main as cli

    class Status:
        def __init__(self, run_id: int) -> None:
            self.run_id = run_id

        def to_json(self) -> dict:
            return {"run_id": self.run_id, "status": "queued"}

    command = cli._command(_throwaway(monkeypatch, Status))
    assert command(argparse.Namespace(run_id=3)) == 0
    assert json.loads(capsys.readouterr().out) == {"run_id": 3, "status": "queued"}


def test_a_verb_without_an_answer_of_its_own_answers_its_actions_value_and_refusal_on_the_api(monkeypatch):
    import gradio as gr

    from app.web import api
    from trainer.config.access import Access

    def status(run_id: int) -> dict:
        if run_id == 9:
            raise actions.ActionError("run 9 does not exist")
        return {"run_id": run_id, "status": "queued"}

    verb = _throwaway(monkeypatch, status)
    endpoint = api._endpoint(verb, api._answer(verb), Access())
    assert [p.name for p in inspect.signature(endpoint).parameters.values()] == ["run_id"]
    assert endpoint(4) == {"run_id": 4, "status": "queued"}
    with pytest.raises(gr.Error, match="run 9 does not exist"):
        endpoint(9)
    with pytest.raises(gr.Error, match="run_id"):  # checked as the verb's parameter says, before the action
        endpoint(-1)


def test_a_verb_without_an_action_must_have_its_command():
    from app.cli import main as cli

    with pytest.raises(LookupError, match="cmd_throwaway"):
        cli._command(verbs.Verb("throwaway", None, "nothing", verbs.CLI_ONLY))
