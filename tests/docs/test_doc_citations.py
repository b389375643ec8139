"""What the code and the docs cite is there for a user (issue 39, item 6): no file of the repository names the private
spec the project started from (users don't have it: what comments relied on is stated in docs/grpo.md), every
``docs/<file>.md`` a file cites exists, and every section it names, as ``§ Heading``, ``(section Heading)`` or
``#anchor``, is a heading of that file; every ``tests/<file>.py`` a file cites exists (a test file renamed for its
subject leaves no citation of its old name).

The files are the checkout's own (tracked and new, not ignored: ``git ls-files``), read as text; binary files are
passed over.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import ROOT

PRIVATE_SPEC = "SPEC" + ".md"  # spelled in two halves so that this file does not mention it
CITED = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)")
CITED_TEST = re.compile(r"(?<![\w/.-])tests/([\w/]+\.py)")
# after a citation: "§ Heading", "(section Heading)" or "#anchor" (as in a Markdown link)
SECTION = re.compile(r"\s*(?:'s\s+)?(?:§\s*|\(section\s+)")
ANCHOR = re.compile(r"#([\w-]+)")
CONTINUATION = re.compile(r"\s*\n\s*(?:#+|//|\*)?\s*")  # a wrapped comment or docstring line: one space
FENCE = re.compile(r"^\s*```")


@cache
def checkout_files() -> list[Path]:
    """The checkout's text files: tracked and new, not ignored (as a fresh clone would hold them, plus new work)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files can't be listed")
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    files = []
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file() and b"\0" not in path.read_bytes()[:8192]:
            files.append(path)
    return files


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def headings(doc: Path) -> list[str]:
    """The Markdown headings of ``doc``, outside code blocks, without their #s."""
    found, in_code = [], False
    for line in text(doc).splitlines():
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            found.append(line.lstrip("#").strip())
    return found


def named_heading(rest: str, titles: list[str]) -> str | None:
    """The heading ``rest`` starts with (a whole heading, not the start of a longer word), or None."""
    return next((t for t in titles if rest.startswith(t) and not rest[len(t) : len(t) + 1].isalnum()), None)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def citations() -> list[tuple[str, str, str]]:
    """Every citation of a doc: (where, the doc's name, the text right after the citation, wrapped lines joined)."""
    found = []
    for path in checkout_files():
        body = text(path)
        for match in CITED.finditer(body):
            line = body.count("\n", 0, match.start()) + 1
            after = CONTINUATION.sub(" ", body[match.end() : match.end() + 400])
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1), after))
    return found


def test_no_file_names_the_private_spec():
    """The spec the project started from is not in the repository: a citation of it sends users nowhere."""
    hits = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in checkout_files()
        for number, line in enumerate(text(path).splitlines(), 1)
        if PRIVATE_SPEC in line
    ]
    assert hits == [], f"{PRIVATE_SPEC} is cited (state what it says in docs/grpo.md and cite that): {hits}"


def test_every_cited_doc_exists():
    missing = [f"{where}: docs/{name}" for where, name, _ in citations() if not (ROOT / "docs" / name).is_file()]
    assert missing == [], f"cited docs that are not in docs/: {missing}"


def test_every_cited_test_file_exists():
    missing = [
        f"{path.relative_to(ROOT)}:{text(path).count(chr(10), 0, match.start()) + 1}: tests/{match.group(1)}"
        for path in checkout_files()
        for match in CITED_TEST.finditer(text(path))
        if not (ROOT / "tests" / match.group(1)).is_file()
    ]
    assert missing == [], f"cited test files that are not in tests/: {missing}"


def test_every_cited_section_is_a_heading_of_its_doc():
    cited, wrong = 0, []
    for where, name, after in citations():
        doc = ROOT / "docs" / name
        if not doc.is_file():
            continue  # test_every_cited_doc_exists reports it
        if section := SECTION.match(after):
            rest = after[section.end() :]
            titles = headings(doc)
            if named_heading(rest, titles) is None:
                wrong.append(f"{where}: docs/{name} § {rest[:60]!r}, not one of its headings {titles}")
            cited += 1
        elif anchor := ANCHOR.match(after):
            if anchor.group(1) not in {slug(t) for t in headings(doc)}:
                wrong.append(f"{where}: docs/{name}#{anchor.group(1)}, no heading of that anchor")
            cited += 1
    assert wrong == [], "\n".join(wrong)
    assert cited > 0  # the code cites docs/grpo.md's sections: a pattern that found none would pass anything


def test_a_section_is_read_across_a_wrapped_comment_and_only_as_a_whole_heading():
    """The check itself: a citation wrapped over two comment lines still names its heading; a heading that is only
    the start of a longer word is not the one named; anchors are GitHub's."""
    after = CONTINUATION.sub(" ", " § The reference\n    # recipe (the seed script)): and more")
    rest = after[SECTION.match(after).end() :]
    titles = ["The job", "The reference recipe (the seed script)"]
    assert named_heading(rest, titles) == "The reference recipe (the seed script)"
    assert named_heading("The jobs, all of them", titles) is None
    assert named_heading("The job, in one page", titles) == "The job"
    assert slug("What the model is learning: the Monitor's learning panel") == (
        "what-the-model-is-learning-the-monitors-learning-panel"
    )
