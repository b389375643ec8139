"""Reading a run config file that nobody vetted: a YAML or JSON mapping, bounded in every direction.

Config files come from users of the dashboard (Import) and from the command line, so a hostile or broken file must
cost little and say clearly what is wrong:

- at most ``MAX_CONFIG_BYTES`` (a real config is a few KB; a 50 MB one would be stored on every run row);
- UTF-8 text: binary files and UTF-16/32 are refused by name rather than parsed as garbage;
- YAML aliases are allowed (recipes use anchors) but the *expanded* document is measured before anything walks it,
  so a 351-byte "billion laughs" is refused in milliseconds instead of exhausting memory; the parser itself stops at
  ``MAX_NODES`` nodes (a 1 MB flow list of 500,000 numbers took 10 CPU-seconds and 400 MB to build before it was
  measured);
- nesting deeper than ``MAX_DEPTH`` is refused before the parser recurses into it (a flat mapping needs 2 levels);
- errors name the file and line and never echo a whole value back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_CONFIG_BYTES = 1_000_000
MAX_NODES = 100_000  # scalars, lists and mappings after alias expansion; a real config has a few hundred
MAX_DEPTH = 20
# Brackets counted before parsing (quoted text included, so far above MAX_DEPTH): PyYAML's composer recurses a few
# frames per level and would hit Python's recursion limit at a few hundred.
MAX_BRACKET_DEPTH = 100


class ConfigFileError(ValueError):
    """A config file that can't be read as a mapping of settings; the message is one sentence for the user."""


def read_mapping(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML or JSON config file (JSON when the name ends in .json)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigFileError(f"{path}: no such file" if not path.exists() else f"{path}: not a regular file")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigFileError(
            f"{path}: {size / 1e6:.1f} MB is too large for a run config (at most {MAX_CONFIG_BYTES // 1_000_000} MB)"
        )
    text = decode_text(path.read_bytes(), str(path))
    _check_depth(text, str(path))
    data = _parse_json(text, path) if path.suffix.lower() == ".json" else _parse_yaml(text, path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path}: expected a mapping of setting names to values, got {_kind(data)}")
    return data


def text_size_problem(text: str) -> str | None:
    """Why config text (pasted, or sent to the API) is too large to read, or None: the same bound as a file's."""
    size = len(text.encode())
    return None if size <= MAX_CONFIG_BYTES else f"the config text is {size / 1e6:.1f} MB: at most 1 MB"


def write_mapping(path: str | Path, mapping: dict[str, Any]) -> None:
    """Write a config mapping as YAML, keys in the mapping's order (or as JSON when the name ends in .json)."""
    if str(path).endswith(".json"):
        Path(path).write_text(json.dumps(mapping, indent=2) + "\n")
    else:
        import yaml

        Path(path).write_text(yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True))


def decode_text(raw: bytes, where: str) -> str:
    """``raw`` as UTF-8 text, or a ConfigFileError naming what the bytes look like instead."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or raw[:200].count(b"\x00") > 0:
        kind = "UTF-16/32 text" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or raw[1:2] == b"\x00" else "binary data"
        raise ConfigFileError(f"{where}: holds {kind}, not UTF-8 text; save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigFileError(
            f"{where}: line {line} is not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the file as UTF-8"
        ) from None


def _check_depth(text: str, where: str) -> None:
    """Refuse bracket nesting beyond MAX_BRACKET_DEPTH before a recursive parser meets it (flow style is the only way to nest
    deeply in a few bytes; block style costs indentation per level and is caught by the node walk below)."""
    depth = 0
    for index, char in enumerate(text):
        if char in "[{":
            depth += 1
            if depth > MAX_BRACKET_DEPTH:
                line = text.count("\n", 0, index) + 1
                raise ConfigFileError(f"{where}: line {line}: nested more than {MAX_DEPTH} levels deep")
        elif char in "]}":
            depth = max(0, depth - 1)


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"{path}: line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise ConfigFileError(f"{path}: nested too deeply") from None
    except ValueError as exc:  # a number of over 4,300 digits (Python's int conversion limit)
        raise ConfigFileError(f"{path}: {_value_error(exc)}") from None


def _value_error(exc: ValueError) -> str:
    """A ValueError from a parser in the user's words: the only one a parser raises on valid syntax is Python's
    limit on the digits of an integer."""
    if "digits" in str(exc):
        return "holds a number with more than 4,300 digits; a setting's value is a few digits long"
    return f"holds a value that can't be read ({str(exc)[:120]})"


def _parse_yaml(text: str, path: Path) -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        """PyYAML's safe loader, stopping at MAX_NODES nodes composed (an alias is one: its expansion is measured
        afterwards, by _measure)."""

        composed = 0

        def compose_node(self, parent, index):
            self.composed += 1
            if self.composed > MAX_NODES:
                raise ConfigFileError(f"{path}: holds more than {MAX_NODES:,} values; a run config is a flat mapping")
            return super().compose_node(parent, index)

    try:
        loader = Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _measure(node, str(path))
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigFileError(f"{path}: {where}not valid YAML ({exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"{path}: not valid YAML ({str(exc)[:200]})") from None
    except RecursionError:
        raise ConfigFileError(f"{path}: nested too deeply") from None
    except ConfigFileError:  # a ValueError too: said as it is, not as a value that can't be read
        raise
    except ValueError as exc:  # a number of over 4,300 digits, or a date PyYAML can't build
        raise ConfigFileError(f"{path}: {_value_error(exc)}") from None


def _measure(root: Any, where: str) -> None:
    """Count the nodes of the document as it would be after alias expansion (shared nodes counted once per use,
    computed once per node) and its depth; refuse it before construction when either is too large."""
    import yaml

    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    pending: set[int] = set()  # nodes whose children are being measured: meeting one again means a cycle
    # Iterative post-order walk: a recursive one could itself hit the recursion limit on hostile input.
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if not expanded and key in pending:
            raise ConfigFileError(f"{where}: a YAML alias refers to itself; a run config is a flat mapping")
        children: list[Any] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if not expanded and children:
            pending.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        pending.discard(key)
        sizes[key] = 1 + sum(sizes[id(c)] for c in children)
        depths[key] = 1 + max((depths[id(c)] for c in children), default=0)
        if sizes[key] > MAX_NODES:
            raise ConfigFileError(
                f"{where}: expands to more than {MAX_NODES:,} values (YAML aliases nested inside each other?); "
                "a run config is a flat mapping of settings"
            )
        if depths[key] > MAX_DEPTH:
            raise ConfigFileError(f"{where}: nested more than {MAX_DEPTH} levels deep")


def _kind(value: Any) -> str:
    return {list: "a list", str: "text", int: "a number", float: "a number", bool: "true/false"}.get(
        type(value), type(value).__name__
    )


# The reader's bounds in the child: the work a config of MAX_CONFIG_BYTES at MAX_NODES costs is about 2.3 CPU-seconds
# (pure-Python PyYAML, on the 2-core machine this was measured on), so 20 is far above any real config and still bounds
# a hostile one; memory the same way.
READ_CPU_SECONDS = 20
READ_MEMORY_MB = 512


def read_mapping_isolated(
    path: str | Path, cpu_seconds: int = READ_CPU_SECONDS, memory_mb: int = READ_MEMORY_MB
) -> dict[str, Any]:
    """:func:`read_mapping` in a child process with a limit on its CPU time and memory: the dashboard's Import and the
    API's config texts use this so that parsing a user's file never holds the server's interpreter (and its other
    users) while it runs.

    The limit is on work, never on the wall clock: a 10 s wall-clock limit refused a valid 1.5 KB config on a loaded
    machine, where the child's start alone took that long (issue 58.7). What a config may cost is bounded by its size
    and node count (read_mapping) and by the CPU-seconds the child may use; waiting for a CPU costs none of them. The
    child reads a regular file (read_mapping checks that first), so it has nothing to wait for but a CPU."""
    import signal
    import subprocess
    import sys

    def limits() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))

    done = subprocess.run([sys.executable, "-I", __file__, str(path)], capture_output=True, preexec_fn=limits)
    reply = done.stdout.decode("utf-8", "replace")
    kind, _, body = reply.partition("\n")
    if kind == "ok":
        return json.loads(body)
    if kind == "error":
        raise ConfigFileError(body)
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise ConfigFileError(
            f"{path}: reading it used more than its {cpu_seconds} CPU-seconds; a run config is a few KB"
        )
    raise ConfigFileError(f"{path}: could not be read (the reader ran out of memory)")


if __name__ == "__main__":  # the child of read_mapping_isolated
    import sys

    try:
        mapping = read_mapping(sys.argv[1])
    except ConfigFileError as exc:
        sys.stdout.write(f"error\n{exc}")
    else:
        sys.stdout.write("ok\n" + json.dumps(mapping, default=str))
