"""Count the test suite's assertions, so a change that speeds the suite up can show it asserts no less.

An assertion is an ``assert`` statement or a ``pytest.raises`` / ``pytest.fail`` call, counted in the source of
tests/ (a helper's asserts count once, however many tests call it). Usage: ``python scripts/count_assertions.py``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def count(path: Path) -> int:
    """The number of assertions in one Python file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    total = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            total += 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "pytest" and node.func.attr in ("raises", "fail"):
                total += 1
    return total


def main(root: str = "tests") -> None:
    files = sorted(Path(root).rglob("*.py"))
    per_file = {str(f): count(f) for f in files}
    for name, n in per_file.items():
        if n:
            print(f"{n:6d}  {name}")
    print(f"{sum(per_file.values()):6d}  assertions in {len(files)} files under {root}/")


if __name__ == "__main__":
    main(*sys.argv[1:])
