"""What the command line writes reaches the operator's terminal, which gives some characters a meaning: ESC starts an
escape sequence (``ESC ] 52 ; c ; ... BEL`` writes the clipboard, others retitle the window or move the cursor), ``\\r``
rewrites the line just printed. Names, errors and log lines come from the database, where a dashboard user, an older
version or another tool may have put anything; so every CLI command writes through :class:`PrintableStream`, which
shows each control character as an escape (``\\x1b``), and table cells are made one line (trainer.safe_text).
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from typing import TextIO

from trainer.safe_text import printable


class PrintableStream(io.TextIOBase):
    """A text stream that writes ``printable(text)`` to the stream it wraps (newlines and tabs kept)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


@contextlib.contextmanager
def guarded_terminal() -> Iterator[None]:
    """This process's stdout and stderr made printable-only while the block runs (the CLI's entry point)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (s if s is None or isinstance(s, PrintableStream) else PrintableStream(s) for s in saved)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
