"""The docs' lists of the API's endpoints are the verb table's (issue 58: docs/api.md held merge-conflict markers
and README named 15 endpoints while the server offered 17). Read from the table app/web/api.py builds its endpoints
from, not from a copy. docs/cli.md's and docs/api.md's tables and README's list are generated from the verb table by
scripts/verb_tables.py (issue 60 item 3), which keeps each row's prose: a new verb reaches them without a hand edit."""

from __future__ import annotations

import re
import subprocess

import pytest

from app.actions import verbs
from tests.conftest import ROOT
from tests.helpers import load_script


def test_no_tracked_text_file_holds_merge_conflict_markers():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in files:
        if not name.endswith((".md", ".py", ".yaml", ".toml", ".js", ".cfg", ".txt", ".sh")):
            continue
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        found += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if re.match(r"^(<{7}|>{7})( |$)", line)]
    assert found == []


def test_the_readme_and_the_api_doc_name_every_endpoint_the_server_offers_and_no_other():
    from app.web.api import NAMES

    readme = (ROOT / "README.md").read_text()
    listed = readme[readme.index("Every action of the dashboard has a named endpoint") :].split(")", 1)[0]
    assert re.findall(r"`/(\w+)`", listed) == list(NAMES)
    table = re.findall(r"^\| `/(\w+)` \|", (ROOT / "docs" / "api.md").read_text(), flags=re.MULTILINE)
    assert table == list(NAMES)


@pytest.fixture(scope="module")
def tables():
    return load_script("verb_tables.py")


def test_the_docs_tables_of_verbs_are_what_the_verb_table_generates(tables):
    for path, page in tables.generated().items():
        assert (ROOT / path).read_text(encoding="utf-8") == page, (
            f"{path}'s list of the verbs is not the table's: run `{tables.COMMAND}`"
        )


def _throwaway() -> verbs.Verb:
    return verbs.Verb(
        "throwaway",
        "runs",
        "a throwaway verb's help",
        frozenset({verbs.CLI, verbs.API}),
        (verbs.RUN_ID, verbs.Param("since", int, "since", 0, verbs.whole(0, 9)), verbs._flag("all", "all", "--all")),
    )


def test_a_new_verb_gets_a_row_of_each_docs_table_and_an_entry_in_the_readmes_list(tables):
    """Its names and parameters from the table, its help line as its prose until the doc's row is written."""
    pages = tables.generated(table=(*verbs.VERBS, _throwaway()))
    cli, api = (tables._rows(pages[path]) for path in (tables.CLI_DOC, tables.API_DOC))
    assert cli[-2] == ["`grpo-studio throwaway RUN_ID [--since 0] [--all]`", "a throwaway verb's help"]
    assert cli[-1][0].startswith("`grpo-studio --version`")  # the rows that are no command stay last
    assert api[-1] == ["`/throwaway`", "`run_id`, `since` (0)", "a throwaway verb's help"]
    listed = " ".join(tables.section(pages[tables.README]).split())  # wrapped to the page's width
    assert listed.endswith(f"`/{verbs.on(verbs.API)[-1].name}`, `/throwaway`: {len(verbs.on(verbs.API)) + 1} in all")


def test_a_dropped_verb_loses_its_rows_and_every_other_row_keeps_its_prose(tables):
    kept = tuple(v for v in verbs.VERBS if v.name != "stop")
    pages = tables.generated(table=kept)
    now = {path: tables._rows((ROOT / path).read_text(encoding="utf-8")) for path in (tables.CLI_DOC, tables.API_DOC)}
    for path in (tables.CLI_DOC, tables.API_DOC):
        rows = tables._rows(pages[path])
        assert [row for row in now[path] if tables._key(row[0]) != "stop"] == rows
    assert "`/stop`" not in tables.section(pages[tables.README])


def test_a_parameters_cell_that_no_longer_names_the_verbs_parameters_is_generated_again(tables):
    """Its notes in brackets are kept only while the names outside them are the verb's, in order."""
    verb = verbs.BY_NAME["log"]
    assert tables._named("`run_id`, `after_id` (0; `ignored` here)") == ["run_id", "after_id"]
    written = [["`/log`", "`run_id` (the run)", "its lines"]]
    table = tables.api_table(written, (verb,)).splitlines()
    assert table[2] == "| `/log` | `run_id`, `after_id` (0) | its lines |"
