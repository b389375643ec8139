"""Local data files (.jsonl, .json, .csv, .parquet), read by grpo-studio itself so that a broken file gets a message
that names the line or column and says what is expected, and so that validation and preview read only the head.

``datasets`` would read these too, but its errors for a bad line or a wrong encoding are several screens of Arrow
internals, and it converts the whole file before the first row is available (17 s of dashboard CPU for a 1M-row CSV
on every Validate). Here a check reads at most ``HEAD_ROWS`` rows; the row count comes from Parquet metadata or a
byte count of line ends. The worker reads the whole file through the same functions.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from trainer.safe_text import text_problem

SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
HEAD_ROWS = 1_000
# A JSON array is parsed whole (its head can't be read alone), so it costs memory by the size of the file: kept small;
# larger data sets belong in JSONL or Parquet, which are read row by row.
MAX_JSON_ARRAY_BYTES = 50_000_000
# One line of a JSONL or CSV file is one example (a GSM8K one is ~1 KB); reading stops at this many bytes of a line, so
# a 300 MB file of one line is refused in one sentence instead of being read into memory whole.
MAX_LINE_BYTES = 1_000_000
# Parquet is read in batches of this many rows, each checked for what it decompresses to before it is read further.
PARQUET_BATCH = 256
MAX_BATCH_BYTES = 64_000_000


class DataFileError(ValueError):
    """A data file that can't be used as asked; the message says what is wrong, where, and what is expected."""


@dataclass(frozen=True)
class FileSummary:
    """What validation and preview need: the columns, the first rows, and about how many rows there are."""

    columns: list[str]
    head: list[dict]
    rows: int


def read_rows(path: Path, limit: int | None = None) -> Iterator[dict]:
    """The rows of a data file as dicts, at most ``limit`` of them; raises :class:`DataFileError` naming the line."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DataFileError(f"{path}: expected a {', '.join(SUFFIXES)} file")
    if not path.is_file():
        raise DataFileError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise DataFileError(f"{path}: the file is empty; expected one row per training example")
    if suffix == ".parquet":
        return _parquet_rows(path, limit)
    _check_text(path)
    if suffix == ".csv":
        return _csv_rows(path, limit)
    return _json_rows(path, limit)


def summarize(path: Path, question_column: str, answer_column: str) -> FileSummary:
    """Check a data file against the column mapping, reading only its head; raises :class:`DataFileError`."""
    path = Path(path)
    head = list(read_rows(path, HEAD_ROWS))
    if not head:
        what = "a header but no rows" if path.suffix.lower() == ".csv" else "no rows"
        raise DataFileError(f"{path}: the file has {what}; expected one row per training example")
    columns = list(head[0])
    missing = [c for c in (question_column, answer_column) if c not in columns]
    if missing:
        raise DataFileError(
            f"{path} has no column {', '.join(map(repr, missing))}; its columns are {', '.join(columns[:20])} "
            "(set question_column / answer_column)"
        )
    for index, row in enumerate(head):
        for column in (question_column, answer_column):
            check_value(path, index + 1, column, row.get(column))
    return FileSummary(columns, head, _count_rows(path, len(head)))


def check_value(path: Path, row: int, column: str, value: object) -> None:
    """Refuse an empty question or answer, or one that is a list or a mapping (a nested JSON value, a Parquet list or
    struct column): a question is text, an answer text or a number."""
    if value in (None, ""):
        raise DataFileError(f"{path}: row {row} has an empty {column!r}; every row needs a value")
    if not isinstance(value, (str, int, float)):
        kind = {list: "a list", dict: "a mapping (struct)", tuple: "a list"}.get(type(value), type(value).__name__)
        raise DataFileError(f"{path}: row {row}: {column!r} is {kind}; expected text (or a number for an answer)")
    # what a prompt may hold (line breaks and tabs, and a CSV's \r\n) but no NUL, escape or other control character:
    # the text reaches the model's prompt, the database (PostgreSQL stores no NUL) and the dashboard
    if isinstance(value, str) and (problem := text_problem(repr(column), value.replace("\r", ""), multiline=True)):
        raise DataFileError(f"{path}: row {row}: {problem}")


# --- formats --------------------------------------------------------------------------------------------------------
def _check_text(path: Path) -> None:
    with path.open("rb") as f:
        start = f.read(4096)
    if start.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(start) > 1 and start[1:2] == b"\x00"):
        raise DataFileError(f"{path}: the file is UTF-16 text; save it as UTF-8")
    if b"\x00" in start:
        raise DataFileError(f"{path}: the file holds binary data, not {path.suffix} text")


def decode_utf8(raw: bytes, path: Path) -> str:
    """A whole file's bytes as UTF-8 text, naming the line of a byte that isn't (the config files' rule)."""
    from trainer.config.file import ConfigFileError, decode_text

    try:
        return decode_text(raw, str(path))
    except ConfigFileError as exc:
        raise DataFileError(str(exc)) from None


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file, with the line named when a byte isn't UTF-8 (a latin-1 file, say)."""
    with path.open("rb") as f:
        for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES:
                raise DataFileError(
                    f"{path}: line {number} is longer than {MAX_LINE_BYTES // 1_000_000} MB; expected one example "
                    "per line (a question and its answer)"
                )
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise DataFileError(
                    f"{path}: line {number} is not UTF-8 text (byte 0x{raw[exc.start]:02x}; latin-1?); save it as UTF-8"
                ) from None


def _json_rows(path: Path, limit: int | None) -> Iterator[dict]:
    if path.suffix.lower() == ".json" and _starts_with_bracket(path):  # one array of objects, not one per line
        yield from islice(_json_array(path), limit)
        return
    count = 0
    for number, text in _lines(path):
        if limit is not None and count >= limit:
            return
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except (ValueError, RecursionError) as exc:
            detail = _json_problem(exc)
            raise DataFileError(
                f"{path}: line {number} is not valid JSON ({detail}); expected one object per line"
            ) from None
        if not isinstance(row, dict):
            raise DataFileError(f"{path}: line {number} is a JSON {type(row).__name__}; expected one object per line")
        _check_strings(row, path, f"line {number}")
        count += 1
        yield row


def _json_problem(exc: Exception) -> str:
    """What the JSON parser found, in words: a syntax error, nesting, or Python's 4,300-digit limit on integers."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return "a number with more than 4,300 digits" if "digits" in str(exc) else str(exc)[:120]


def _check_strings(row: dict, path: Path, where: str) -> None:
    """Refuse a row whose text holds a lone surrogate (JSON's ``\\ud800`` escapes can carry one; no UTF-8 file,
    tokenizer or database can store it)."""
    for column, value in row.items():
        if isinstance(value, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise DataFileError(
                f"{path}: {where}: {str(column)[:40]!r} holds a lone surrogate (a \\ud800-\\udfff escape "
                "without its pair); expected Unicode text"
            )


def _starts_with_bracket(path: Path) -> bool:
    """Whether a file's first character after white space (and a BOM) is ``[``, reading no more than that."""
    with path.open("rb") as f:
        while chunk := f.read(4096):
            text = chunk.lstrip(b" \t\r\n").removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
            if text:
                return text.startswith(b"[")
    return False


def _json_array(path: Path) -> Iterator[dict]:
    if path.stat().st_size > MAX_JSON_ARRAY_BYTES:
        raise DataFileError(f"{path}: a JSON array over {MAX_JSON_ARRAY_BYTES // 1_000_000} MB; use JSONL instead")
    try:  # the size is capped above; a one-line array is not held to the 1 MB line limit of JSONL
        rows = json.loads(decode_utf8(path.read_bytes(), path))
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}: line {exc.lineno} is not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise DataFileError(f"{path}: not valid JSON ({_json_problem(exc)})") from None
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataFileError(f"{path}: item {index + 1} of the array is not an object with named columns")
        _check_strings(row, path, f"item {index + 1} of the array")
        yield row


def _csv_rows(path: Path, limit: int | None) -> Iterator[dict]:
    stream = io.TextIOWrapper(_Utf8Lines(path), encoding="utf-8", newline="")
    reader = csv.reader(stream)
    try:
        header = next(reader, None)
        if header is None:
            return
        for count, values in enumerate(reader):
            if limit is not None and count >= limit:
                return
            if not values:
                continue
            if len(values) != len(header):
                raise DataFileError(
                    f"{path}: line {reader.line_num} has {len(values)} fields but the header has {len(header)}"
                )
            yield dict(zip(header, values))
    except csv.Error as exc:
        raise DataFileError(f"{path}: line {reader.line_num}: {exc}") from None
    finally:
        stream.close()


class _Utf8Lines(io.RawIOBase):
    """The file's bytes, checked line by line so that a bad byte is reported with its line number."""

    def __init__(self, path: Path) -> None:
        self._lines = _lines(path)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:
        while not self._buffer:
            line = next(self._lines, None)
            if line is None:
                return 0
            self._buffer = line[1].encode()
        n = min(len(target), len(self._buffer))
        target[:n], self._buffer = self._buffer[:n], self._buffer[n:]
        return n


def _parquet_rows(path: Path, limit: int | None) -> Iterator[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(f"{path}: not a Parquet file ({str(exc)[:120]})") from None
    count = 0
    for batch in parquet.iter_batches(batch_size=min(limit or PARQUET_BATCH, PARQUET_BATCH)):
        _check_parquet_batch(batch, path, count)
        for row in batch.to_pylist():
            if limit is not None and count >= limit:
                return
            count += 1
            yield row


def _check_parquet_batch(batch, path: Path, before: int) -> None:
    """Refuse a batch before it becomes Python objects if a value is over MAX_LINE_BYTES or the batch would be over
    MAX_BATCH_BYTES: Parquet compresses and dictionary-encodes, so a 782-byte file can hold a thousand copies of a
    1 MB string that ``to_pylist`` would make a gigabyte of."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = 0
    for name, column in zip(batch.schema.names, batch.columns):
        values = column.dictionary if pa.types.is_dictionary(column.type) else column
        if (
            pa.types.is_string(values.type)
            or pa.types.is_binary(values.type)
            or pa.types.is_large_string(values.type)
            or pa.types.is_large_binary(values.type)
        ):
            longest = pc.max(pc.binary_length(values)).as_py() or 0
            if longest > MAX_LINE_BYTES:
                raise DataFileError(
                    f"{path}: a value of column {str(name)[:40]!r} near row {before + 1} is longer than "
                    f"{MAX_LINE_BYTES // 1_000_000} MB; expected one example per row (a question and its answer)"
                )
            total += longest * len(column)
        else:
            total += values.nbytes if not pa.types.is_dictionary(column.type) else values.nbytes * len(column)
    if total > MAX_BATCH_BYTES:
        raise DataFileError(
            f"{path}: rows {before + 1}-{before + batch.num_rows} would take over {MAX_BATCH_BYTES // 1_000_000} MB "
            "of memory once decompressed; expected a few KB per example"
        )


def _count_rows(path: Path, seen: int) -> int:
    """Rows in the whole file without parsing it: Parquet's metadata, else line ends (a CSV's header not counted;
    a quoted field with line breaks makes it an estimate, which is all the preview says)."""
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    if seen < HEAD_ROWS:
        return seen
    lines = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            lines += chunk.count(b"\n")
    return max(seen, lines - (path.suffix.lower() == ".csv"))
