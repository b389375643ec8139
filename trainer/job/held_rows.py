"""What the database writer holds while the database does not answer (issue 23, item 1): the items taken from the
training loop and not yet committed, oldest first, in memory up to a bound and then in a file in the run directory.

Order is kept by spilling everything held at once: the file always holds the oldest part and memory what came after
the latest spill, so reading the file and then memory replays the items as they were handed over. The file is JSON
lines, one item each (metric and sample rows are plain dicts of JSON values: non-finite metric values are already
NULL with their text in ``raw``), fsynced on each spill so that a flush before a checkpoint can count on it.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# ("metrics", rows), ("samples", rows), ("rows", [table, rows]), ("log", (message, level)), ("progress", (...))
Item = tuple[str, Any]


def item_rows(item: Item) -> int:
    """How many rows an item will write (a log line or a progress update counts as one)."""
    kind, payload = item
    if kind == "rows":  # ("rows", [table, rows])
        return len(payload[1])
    return len(payload) if kind in ("metrics", "samples") else 1


class HeldRows:
    """Items not yet committed: ``items()`` in order, ``spill()`` to move memory to the file, ``clear()`` once
    committed. ``path`` None (a writer without a run directory) keeps everything in memory."""

    def __init__(self, path: Path | None, memory_rows: int) -> None:
        self.path, self.memory_rows = path, memory_rows
        self.memory: list[Item] = []
        self.memory_count = 0  # rows in memory
        self.file_count = 0  # rows in the file
        self._file_items: list[Item] | None = []  # the file's items as written (None: read them back from the file)
        self._spill_failed = False

    @property
    def rows(self) -> int:
        """Rows held in all."""
        return self.memory_count + self.file_count

    def __bool__(self) -> bool:
        return bool(self.memory or self.file_count)

    def add(self, item: Item) -> None:
        """Hold one more item (after everything held)."""
        self.memory.append(item)
        self.memory_count += item_rows(item)

    def over_bound(self) -> bool:
        """Whether memory holds more rows than it should."""
        return self.memory_count > self.memory_rows

    def spill(self) -> bool:
        """Append what memory holds to the file (fsynced) and empty memory; False when there is no file or it can't
        be written (the run directory was deleted, the disk is full): then memory keeps everything."""
        if self.path is None or not self.memory:
            return self.path is not None
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                for kind, payload in self.memory:
                    f.write(json.dumps([kind, payload], allow_nan=False) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except (OSError, ValueError) as exc:
            if not self._spill_failed:
                log.warning("could not keep held rows in %s (%s): holding them in memory", self.path, exc)
                self._spill_failed = True
            return False
        self._file_items = None  # the items are in the file now; drop them from memory
        self.file_count += self.memory_count
        self.memory, self.memory_count = [], 0
        return True

    def items(self) -> list[Item]:
        """Everything held, oldest first: the file's items, then memory's."""
        return self._read_file() + self.memory

    def clear(self) -> None:
        """Forget everything held (it was committed) and delete the file."""
        self.memory, self.memory_count, self.file_count, self._file_items = [], 0, 0, []
        if self.path is not None:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass

    def _read_file(self) -> list[Item]:
        if not self.file_count:
            return []
        if self._file_items is None:
            self._file_items = read_items(self.path)
        return list(self._file_items)


def read_items(path: Path) -> list[Item]:
    """The items of a held-rows file, in order ([] when there is none); a last line cut short by a kill is skipped."""
    items = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    items.append(tuple(json.loads(line)))
                except ValueError:
                    log.warning("skipped a cut line of %s", path)
    except FileNotFoundError:
        pass
    return items


def set_aside(path: Path, previous: Path) -> None:
    """Move an earlier worker's held rows out of the way of this one's (appended to ``previous`` if that exists:
    two workers in a row may have left rows)."""
    if not path.is_file():
        return
    if previous.is_file():
        with open(previous, "a", encoding="utf-8") as f:
            f.write(path.read_text(encoding="utf-8"))
        path.unlink()
    else:
        path.replace(previous)
