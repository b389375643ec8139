"""Text that crosses a boundary: what a config's text may hold, and text made safe to show in a terminal.

A run's name, its Slurm partition or a reward name ends up in places that give characters a meaning: a line of the
Slurm job script (a newline starts a shell command), a command line, a file name, the operator's terminal (ESC starts
an escape sequence: ``ESC ] 52`` writes the clipboard, ``\\r`` overwrites the line just printed). So a text setting
is refused when it holds

- a control character: C0 (U+0000-U+001F, NUL included), DEL (U+007F) or C1 (U+0080-U+009F, which some terminals
  read as ESC sequences); a multi-line setting (the system prompt) may hold newlines and tabs;
- a lone surrogate (U+D800-U+DFFF), which JSON's ``\\ud800`` escapes can carry and which no UTF-8 file, database or
  terminal can store;
- in a one-line setting (a name, a path), a bidirectional format character (U+202A-U+202E, U+2066-U+2069, U+200E,
  U+200F, U+061C): a right-to-left override makes ``run-evil\u202egnp.yaml`` read as another name in every list. A
  multi-line text (the system prompt, a data set's questions) may hold them: right-to-left languages use the marks.

Validation stops new values; :func:`printable` is the second line, for what the command line prints from the database
or a log (rows written by an older version or another tool, errors, log lines).
"""

from __future__ import annotations

import re
import unicodedata

# C0 (less tab and newline, which multi-line text may keep), DEL, C1, and the surrogate range.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SHOWN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def text_problem(name: str, value: str, multiline: bool = False) -> str | None:
    """What is wrong with the text ``value`` of the setting ``name``, or None: the first unsafe character, by its
    code point and position, and what the setting accepts."""
    if not (_CONTROL if multiline else _ANY_CONTROL).search(value):
        return None  # the common case, at regex speed (a data file's every question passes through here)
    for index, char in enumerate(value):
        code = ord(char)
        if multiline and char in "\t\n":
            continue
        if char in "\t\n":
            return f"{name} holds a line break or tab at character {index + 1}: expected one line of text"
        if 0xD800 <= code <= 0xDFFF:
            return f"{name} holds a lone surrogate (U+{code:04X}) at character {index + 1}: expected Unicode text"
        if code < 0x20 or 0x7F <= code <= 0x9F:
            what = "a NUL byte" if code == 0 else f"the control character U+{code:04X} ({_char_name(char)})"
            return f"{name} holds {what} at character {index + 1}: expected printable text"
        if char in BIDI and not multiline:
            return (
                f"{name} holds the format character U+{code:04X} ({_char_name(char)}) at character {index + 1}, "
                "which changes how the text around it reads: expected printable text"
            )
    return None


def printable(text: str, one_line: bool = False) -> str:
    """``text`` with every control character and lone surrogate shown as an escape (``\\x1b``, ``\\ud800``), so
    printing it can't move the cursor, rewrite the line or talk to the terminal; with ``one_line`` newlines and tabs
    too (a name or an error shown in a table row)."""
    pattern = _SHOWN if not one_line else _ANY_CONTROL  # bidi format characters always: they reorder what follows
    return pattern.sub(lambda m: _escape(m.group()), text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _char_name(char: str) -> str:
    special = {"\x1b": "ESC", "\r": "carriage return", "\x7f": "DEL", "\x07": "BEL", "\x08": "backspace"}
    if char in special:
        return special[char]
    if char in BIDI:  # "right-to-left override"
        return unicodedata.name(char).lower()
    return unicodedata.name(char, "C1 control" if ord(char) >= 0x80 else "C0 control")
