"""The action layer (app/actions): one function per user action, plain values in, typed results or ActionError out;
the command line and the dashboard are adapters over it, and RunConfig is ground (it imports no loading, job or
scoring code)."""

from __future__ import annotations

import ast
import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app import actions
from app.cli.main import main
from tests.conftest import ROOT
from tests.helpers import tiny_config
from trainer.config.access import Access


def test_importing_the_config_loads_only_its_own_ground():
    """RunConfig and its per-field rules import nothing from trainer.loading, trainer.job or trainer.scoring."""
    code = "import sys, trainer.config; print(sorted(m for m in sys.modules if m.split('.')[0] in ('trainer', 'storage', 'app')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    loaded = ast.literal_eval(done.stdout.strip())
    assert loaded == [
        "trainer",
        "trainer.config",
        "trainer.config.examples",
        "trainer.config.fields",
        "trainer.config.file",
        "trainer.config.keys",
        "trainer.config.rules",
        "trainer.config.run_config",
        "trainer.config.values",
        "trainer.safe_text",
        "trainer.trl_features",  # reads the installed TRL's GRPOConfig as text, importing nothing of it (issue 38)
    ]


def _imports(path: Path) -> set[str]:
    """The app.* modules a module imports anywhere in it (inside functions too: a lazy import is still a circle)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("app"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("app"))
    return found


def test_no_import_circle_among_the_dashboards_modules():
    """The Compare ↔ evaluation circle is gone (what pages share lives in the action layer), and no other."""
    modules = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for path in (ROOT / "app").rglob("*.py")
    }
    graph = {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start])

    circles = sorted(name for name in graph if reaches(name, name, {name}) and name != "app.actions")
    assert circles == [], circles


def ENTRANCES() -> list[Path]:  # noqa: N802 - a constant, read when a test runs
    """The modules users enter by: every module of the two entrances' folders, app/web/ (the dashboard: its server,
    API, pages and widgets) and app/cli/ (the command line), sub-folders included."""
    return sorted(path for entrance in ("web", "cli") for path in (ROOT / "app" / entrance).rglob("*.py"))


def test_the_cli_and_the_pages_act_through_the_action_layer():
    """No action is written twice: the command line and the dashboard's pages never create, stop, fork or delete a
    run themselves (queries.create_run, stop_worker, fork_run, queries.delete_run appear only under app/actions)."""
    writers = (
        "create_run",
        "stop_worker",
        "fork_run",
        "delete_run",
        "requeue_run",
        "start_evaluation",
        "probe_in_child",
    )
    for path in ENTRANCES():
        tree = ast.parse(path.read_text())
        used = {  # what it takes from storage and trainer: imported names, and queries.<name> / stop.<name> ...
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("storage", "trainer"))
            for alias in node.names
        } | {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("queries", "start", "stop", "fork")  # the modules of storage and trainer.supervise
        }
        assert not used & set(writers), (path.name, used & set(writers))


OUTSIDE_THE_PAGES = ("trainer", "storage")  # what the pages reach only through app.actions


def _imported_modules(path: Path, source: str | None = None) -> list[tuple[int, str, bool]]:
    """(line, module, relative) for every import of a module (``source``: its text, default read from ``path``) at any
    depth: a lazy import inside a function counts, a relative one is resolved from the module's package (``from ..x``
    in app/web/pages/ is app.x; a level too many leaves the repository: "<outside>"), and importlib.import_module or
    __import__ of a literal name counts as an import of it."""
    package = list(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, False) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append((node.lineno, node.module or "", False))
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level <= len(package) else ["<outside>"]
            found.append((node.lineno, ".".join(base + ([node.module] if node.module else [])), True))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value, False))
    return found


def _page_offenders(path: Path, source: str | None = None) -> list[str]:
    """file:line of each import of trainer/ or storage/ in a page, and of each relative import leaving app."""
    return [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for line, module, relative in _imported_modules(path, source)
        if module.split(".")[0] in OUTSIDE_THE_PAGES or (relative and module.split(".")[0] != "app")
    ]


def test_the_pages_import_nothing_of_trainer_or_storage():
    """A page is layout and wiring: what it shows comes from app.actions, so app/web/pages/*.py import nothing from
    trainer/ or storage/, at the top or lazily inside a function, and a relative import stays inside app."""
    pages = sorted((ROOT / "app" / "web" / "pages").glob("*.py"))
    assert {p.name for p in pages} >= {"monitor.py", "compare.py", "runs.py", "new_run.py"}  # the walk found them
    offenders = [offence for path in pages for offence in _page_offenders(path)]
    assert offenders == [], "the pages go around app.actions:\n" + "\n".join(offenders)


# What an entrance (ENTRANCES) may still import of storage/ or trainer/, and why; each is "file: module". Everything
# else it reaches goes through app.actions.
ENTRANCE_EXCEPTIONS = {
    "the dashboard's process hosts the supervisor that starts queued runs and tends sweeps": (
        "app/web/server.py: trainer.supervise.schedule",
        "app/web/server.py: trainer.sweeps.tending",
    ),
    "the command line trains or builds a model in its own process (grpo-studio worker, a foreground run, build-tiny)": (
        "app/cli/runs.py: trainer.job.worker",
        "app/cli/output.py: trainer.job.worker",
        "app/cli/models.py: storage.db",
        "app/cli/models.py: trainer.config",
        "app/cli/models.py: trainer.evaluation.evaluate",
        "app/cli/models.py: trainer.loading.backend",
        "app/cli/models.py: trainer.loading.data",
        "app/cli/models.py: trainer.loading.tiny",
    ),
    "what a followed run prints is read each tick from what its worker writes (its steps, log, status and summary), "
    "a read no action offers yet": (
        "app/cli/output.py: storage",
        "app/cli/output.py: storage.db",
        "app/cli/output.py: storage.models",
        "app/cli/output.py: trainer.config",
        "app/cli/output.py: trainer.insight.spread",
        "app/cli/output.py: trainer.loading.heldout",
        "app/cli/output.py: trainer.review.heldout",
        "app/cli/output.py: trainer.supervise.run_files",
        "app/cli/log.py: storage",
        "app/cli/log.py: storage.db",
        "app/cli/log.py: trainer.supervise.run_files",
        "app/cli/prompts.py: trainer.insight.learning_map",
        "app/cli/prompts.py: trainer.insight.report",
        "app/cli/sweeps.py: trainer.sweeps.tending",
    ),
    "plain names with no session or model behind them, read before app.actions is imported (the command line's "
    "errors, presets, flags and version answer without it)": (
        "app/cli/main.py: storage.db",
        "app/cli/main.py: trainer.config.access",
        "app/cli/main.py: trainer.presets",
        "app/cli/main.py: trainer.scoring.sandbox",
        "app/cli/models.py: trainer.presets",
        "app/cli/models.py: trainer.probe.job",
        "app/cli/output.py: trainer.version",
        "app/cli/runs.py: trainer.presets",
        "app/cli/runs.py: trainer.safe_text",
        "app/cli/sweeps.py: trainer.presets",
        "app/cli/sweeps.py: trainer.safe_text",
        "app/cli/terminal.py: trainer.safe_text",
    ),
    "the dashboard's widgets draw from value types and names declared once beside the rules that use them, with no "
    "session or model behind them: the settings' declaration (RunConfig, its groups, rules and review) that the form "
    "is built from and the chart notes read, the learning map's classes and token values the learning charts draw, "
    "and the worker's phase messages the Monitor's start-up status recognises": (
        "app/web/widgets/chart_notes.py: trainer.config.run_config",
        "app/web/widgets/charts.py: trainer.config",
        "app/web/widgets/charts_learning.py: storage.learning",
        "app/web/widgets/charts_learning.py: trainer.insight.learning_map",
        "app/web/widgets/form.py: trainer",
        "app/web/widgets/form.py: trainer.config",
        "app/web/widgets/form.py: trainer.config.rules",
        "app/web/widgets/start_phases.py: storage.queries",
    ),
}


def test_the_entrances_import_storage_or_trainer_only_where_listed():
    """No module of app/web/ or app/cli/ (whole folders) imports anything of storage/ or trainer/ (at the top or
    inside a function) but what ENTRANCE_EXCEPTIONS lists with its reason, and every listed exception is still
    used (a stale one would let the import come back unseen)."""
    excused = {entry for entries in ENTRANCE_EXCEPTIONS.values() for entry in entries}
    found = {
        f"{path.relative_to(ROOT)}: {module}": line
        for path in ENTRANCES()
        for line, module, _ in _imported_modules(path)
        if module.split(".")[0] in OUTSIDE_THE_PAGES
    }
    entrances = {str(p.relative_to(ROOT / "app")) for p in ENTRANCES()}
    assert entrances >= {"web/server.py", "web/api.py", "web/pages/new_run.py", "cli/main.py", "cli/output.py"}
    unexcused = sorted(f"{entry} (line {line})" for entry, line in found.items() if entry not in excused)
    assert unexcused == [], "the entrances go around app.actions:\n" + "\n".join(unexcused)
    assert sorted(excused - set(found)) == [], "listed exceptions no longer used: remove them"


def test_the_page_import_check_sees_lazy_relative_and_dynamic_imports():
    """The check above finds an import inside a function, a relative import that leaves app and one by name, and
    lets a relative import inside app pass."""
    source = (
        "import gradio\n"
        "from . import monitor\n"
        "from ...actions import runs\n"
        "def poll():\n"
        "    from storage import queries\n"
        "    import trainer.supervise.start\n"
        "    from ....storage import db\n"
        "    importlib.import_module('storage.db')\n"
    )
    page = ROOT / "app" / "web" / "pages" / "a_page.py"
    assert [(line, module) for line, module, _ in _imported_modules(page, source)][:3] == [
        (1, "gradio"),
        (2, "app.web.pages"),
        (3, "app.actions"),
    ]
    assert _page_offenders(page, source) == [
        "app/web/pages/a_page.py:5 imports storage",
        "app/web/pages/a_page.py:6 imports trainer.supervise.start",
        "app/web/pages/a_page.py:7 imports <outside>.storage",  # a level above app: out of the repository
        "app/web/pages/a_page.py:8 imports storage.db",
    ]


def test_a_config_arrives_as_text_a_mapping_or_a_config_and_reads_the_same():
    config = tiny_config(name="same")
    text = yaml.safe_dump(config.to_dict())
    for source in (config, config.to_dict(), text, config.to_dict() | {"unknown_key": 1}):
        checked = actions.validate(source, actions.OPERATOR)
        assert checked.problems == [] and checked.config == config, checked.problems
    assert actions.validate(config.to_dict() | {"unknown_key": 1}, actions.OPERATOR).notes == [
        "ignored unknown setting 'unknown_key'"
    ]


def test_the_dashboards_rules_are_an_argument_applied_once(tmp_path):
    """The same config: accepted from the command line (its user owns the machine), refused under the dashboard's
    rules, whichever adapter asks."""
    outside = tmp_path / "data.jsonl"
    outside.write_text('{"question": "1+1", "answer": "2"}\n' * 20)
    config = tiny_config(dataset_name=str(outside), reward_funcs=["correctness", f"{tmp_path}/r.py:reward"])
    (tmp_path / "r.py").write_text("def reward(completions, **kw):\n    return [0.0 for _ in completions]\n")
    assert actions.validate(config, actions.OPERATOR).problems == []
    refused = actions.validate(config, Access()).problems
    assert any("local paths are limited to" in p for p in refused)
    assert any("--allow-custom-rewards" in p for p in refused)
    with pytest.raises(actions.ActionError) as caught:
        actions.launch(config, Access())
    assert caught.value.problems == refused and actions.runs() == []


def test_a_hostile_config_text_is_refused_in_one_sentence():
    laughs = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    laughs += (
        "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    )
    checked = actions.validate(laughs, Access())
    assert checked.config is None and len(checked.problems) == 1 and "the config text" in checked.problems[0]
    assert actions.validate("- just\n- a list\n", Access()).problems[0].endswith("got a list")
    assert "at most 1 MB" in actions.validate("x" * 1_100_000, Access()).problems[0]


def test_unknown_runs_and_wrong_ids_are_one_sentence_errors():
    for act in (actions.stop, actions.resume, actions.delete, actions.clone, actions.run_detail, actions.alerts):
        with pytest.raises(actions.ActionError, match="no run with id 99"):
            act(99)
    with pytest.raises(actions.ActionError, match="expected a whole number"):
        actions.stop("three")


@pytest.mark.slow
def test_metrics_come_out_as_columns_and_as_csv_and_parquet_files(trained_run, tmp_path, capsys):
    run_id, config, _ = trained_run
    table = actions.metrics(run_id, ["reward", "kl"])
    assert table["step"] == list(range(1, config.max_steps + 1)) and len(table["reward"]) == config.max_steps
    assert actions.metrics(run_id, ["reward"], since_step=4)["step"] == [5, 6]
    with pytest.raises(actions.ActionError, match="no metric 'rewrd'"):
        actions.metrics(run_id, ["rewrd"])

    assert main(["export", str(run_id), "--metrics", str(tmp_path / "m.csv")]) == 0
    assert main(["export", str(run_id), "--metrics", str(tmp_path / "m.parquet")]) == 0
    assert f"metrics ({config.max_steps} steps) written to" in capsys.readouterr().out
    every = actions.metrics(run_id)
    with (tmp_path / "m.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(every) and [int(r["step"]) for r in rows] == every["step"]
    assert [float(r["reward"]) for r in rows] == pytest.approx(every["reward"])
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "m.parquet").to_pydict() == every
    assert main(["export", str(run_id), "--metrics", str(tmp_path / "m.xlsx")]) == 2
    assert "a metrics file ends in .csv or .parquet" in capsys.readouterr().err
    assert not Path(tmp_path / "m.xlsx").exists()


def test_a_resume_while_the_stopped_worker_still_exits_waits_for_it_then_queues(tmp_path):
    """Issue 29 item 5: the table already says stopped, the worker is still saving; the resume is queued once the
    worker has exited instead of being refused."""
    import threading
    import time

    from storage import queries
    from storage.db import get_sessionmaker
    from storage.models import RunStatus
    from tests.helpers import create_run, run_row
    from trainer.supervise.processes import process_start_time

    run_id = create_run(tiny_config(name="exiting"))
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with get_sessionmaker().begin() as s:
            run = queries.get_run(s, run_id)
            run.pid, run.pid_started = worker.pid, process_start_time(worker.pid)
            queries.finish_run(s, run, RunStatus.STOPPED)
        threading.Timer(1.5, worker.kill).start()
        started = time.monotonic()
        assert actions.resume(run_id) is None
        waited = time.monotonic() - started
    finally:
        worker.kill()
        worker.wait()
    assert waited >= 1.0 and run_row(run_id).status == "queued" and run_row(run_id).pid is None
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a worker that won't exit
    try:
        with get_sessionmaker().begin() as s:
            run = queries.get_run(s, run_id)
            run.pid, run.pid_started = stuck.pid, process_start_time(stuck.pid)
            queries.finish_run(s, run, RunStatus.STOPPED)
        with pytest.raises(actions.ActionError, match="still saving and exiting after 0 s"):
            actions.resume(run_id, wait_s=0)
        assert run_row(run_id).status == "stopped"  # refused: nothing changed
        with get_sessionmaker().begin() as s:  # a worker that trained in this very process (a foreground run)
            run = queries.get_run(s, run_id)
            run.pid, run.pid_started = os.getpid(), process_start_time(os.getpid())
        assert actions.resume(run_id, wait_s=0) is None and run_row(run_id).status == "queued"
    finally:
        stuck.kill()
        stuck.wait()


@pytest.mark.parametrize("source", ["", "   \n", "{}", "# a comment only\n", {}])
def test_an_empty_config_is_refused_and_starts_nothing(source, fresh_db):
    """Issue 58: /launch("") queued the reference recipe (a 3B model from the hub, 250 steps) on a CPU-only machine,
    and /validate("") said valid: every setting has a default, so an empty config is the biggest run there is."""
    from app import actions
    from storage import queries
    from storage.db import get_sessionmaker

    expected = r"^the config( text)? is empty: give the run's settings as YAML or JSON"
    (problem,) = actions.validate(source, actions.Access()).problems
    assert re.match(expected, problem), problem
    with pytest.raises(actions.ActionError, match=expected):
        actions.launch(source, actions.Access())
    with get_sessionmaker().begin() as s:
        assert queries.list_runs(s) == []
