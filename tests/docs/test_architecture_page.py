"""docs/architecture.md's drawing of the house is the code's (issue 39): scripts/architecture.py regenerates it from
the imports in memory and the page's section must be exactly that; every folder it finds has a row among the page's
rooms; and the script itself, on a planted tree, lists two folders that import each other (a deferred import
included), their cycle and an import off the staircase rather than hiding them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import load_script


@pytest.fixture(scope="module")
def architecture():
    return load_script("architecture.py")


@pytest.fixture(scope="module")
def drawn(architecture):
    """The house as the code stands (read once: a few seconds)."""
    return architecture.house()


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(body))
    return root


def test_the_pages_drawing_is_what_the_code_gives(architecture, drawn):
    page = (ROOT / architecture.PAGE).read_text(encoding="utf-8")
    section = architecture.render(drawn)
    assert architecture.replace_section(page, section) == page, (
        f"{architecture.PAGE}'s drawing of the house is stale: run `{architecture.COMMAND}`"
    )


def test_every_folder_of_the_house_has_a_row_among_the_rooms(architecture, drawn):
    page = (ROOT / architecture.PAGE).read_text(encoding="utf-8")
    rooms = page.split("## The rooms", 1)[1].split("\n## ", 1)[0]
    missing = [folder for folder in drawn.folders if f"`{folder}/`" not in rooms]
    assert missing == [], f"folders without a row in {architecture.PAGE}'s rooms: {missing}"


def test_no_two_folders_of_trainer_import_each_other(architecture, drawn):
    """Issue 39: inside trainer/ every tie between two folders runs one way (trainer/'s own modules count as a folder,
    trainer/review/ as one apart from trainer/config/), read from the graph the page draws, so adding an import
    back (a deferred one included) fails here, not only in the drawing."""
    pairs = [(a, b) for a, b in architecture.mutual_pairs(drawn) if a.startswith("trainer") and b.startswith("trainer")]
    tied = {pair: drawn.between[pair] + drawn.between[pair[::-1]] for pair in pairs}
    assert pairs == [], "folders of trainer/ that import each other: " + "; ".join(
        f"{a} <-> {b}: " + ", ".join(f"{i.source.path} -> {i.target.path}" for i in links)
        for (a, b), links in tied.items()
    )
    assert [group for group in architecture.cycles(drawn) if any(f.startswith("trainer") for f in group)] == []


def test_folders_that_import_each_other_are_listed_with_the_modules_that_tie_them(architecture, tmp_path):
    root = plant(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/job/__init__.py": "",
            "trainer/job/worker.py": "from ..loading import backend\n",  # relative, at import time
            "trainer/loading/__init__.py": "",
            "trainer/loading/backend.py": """
                def start():
                    from trainer.job.worker import run  # waits inside a function: still a tie
                """,
        },
    )
    drawn = architecture.house(root, ("trainer",))
    assert architecture.mutual_pairs(drawn) == [("trainer/job", "trainer/loading")]
    assert architecture.cycles(drawn) == [["trainer/job", "trainer/loading"]]
    [back] = drawn.between[("trainer/loading", "trainer/job")]
    assert back.deferred and back.target.path == Path("trainer/job/worker.py")
    text = architecture.render(drawn)
    assert "**Folders that import each other: 1.**" in text
    assert "- `trainer/job/` ↔ `trainer/loading/`:" in text
    assert "trainer/loading/backend.py → worker.py (deferred)" in text


def test_a_type_checking_import_is_deferred_and_a_name_resolves_to_its_package(architecture, tmp_path):
    root = plant(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/actions/__init__.py": "OPERATOR = 1\n",
            "app/web/pages/__init__.py": "",
            "app/web/pages/monitor.py": """
                from typing import TYPE_CHECKING

                from app.actions import OPERATOR
                if TYPE_CHECKING:
                    from storage.db import Session
                """,
            "storage/__init__.py": "",
            "storage/db.py": "Session = None\n",
        },
    )
    drawn = architecture.house(root, ("app", "storage"))
    [action] = drawn.between[("app/web/pages", "app/actions")]
    assert action.target.path == Path("app/actions/__init__.py") and not action.deferred
    [db] = drawn.between[("app/web/pages", "storage")]
    assert db.deferred
    text = architecture.render(drawn)
    assert "around the action layer), 1: app/web/pages/monitor.py → storage/db.py (deferred)" in text
    assert "**Folders that import each other: none.**" in text


def test_the_section_is_written_between_the_markers_only(architecture):
    page = f"# Title\n\nbefore\n{architecture.BEGIN}\nold\n{architecture.END}\nafter\n"
    assert architecture.replace_section(page, "new\n") == (
        f"# Title\n\nbefore\n{architecture.BEGIN}\nnew\n{architecture.END}\nafter\n"
    )
    with pytest.raises(ValueError, match="markers"):
        architecture.replace_section("# no markers\n", "new\n")
