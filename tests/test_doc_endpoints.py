"""The docs' lists of the API's endpoints are the verb table's (issue 58: docs/api.md held merge-conflict markers
and README named 15 endpoints while the server offered 17). Read from the table app/api.py builds its endpoints
from, not from a copy."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT


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
    from app.api import NAMES

    readme = (ROOT / "README.md").read_text()
    listed = readme[readme.index("Every action of the dashboard has a named endpoint") :].split(")", 1)[0]
    assert re.findall(r"`/(\w+)`", listed) == list(NAMES)
    table = re.findall(r"^\| `/(\w+)` \|", (ROOT / "docs" / "api.md").read_text(), flags=re.MULTILINE)
    assert table == list(NAMES)
