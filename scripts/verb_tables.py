"""Write the verb table's lists into the docs: docs/cli.md's commands, docs/api.md's endpoints and README's list of
endpoints, each between two marker comments.

The table (app/actions/verbs.py) says which verbs a surface offers, in which order, under which names and with which
parameters; a doc says in prose what each one does. So a row's names are generated (the command with its arguments,
the endpoint with its parameters) and its prose is kept from the doc's row for the same verb, found by the verb's
name: editing the prose by hand is how a row is written, and a regenerated doc keeps it. A verb the doc has no row
for gets its help line as its prose (write a better sentence in the doc then); a verb the table no longer holds
loses its row. docs/api.md's parameters cell is prose too (each parameter's notes in brackets) as long as it names
the verb's parameters, in order; when it does not, it is generated again from the table.

    python scripts/verb_tables.py            print the generated sections
    python scripts/verb_tables.py --write    rewrite them in the docs
    python scripts/verb_tables.py --check    exit 1 when a doc's section is not what the table gives

tests/docs/test_doc_endpoints.py runs the check, so the docs cannot drift from the table.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: app/ is imported from the checkout it sits in

from app.actions import verbs  # noqa: E402 - after the checkout is on the path

BEGIN = "<!-- generated from app/actions/verbs.py by scripts/verb_tables.py: begin -->"
END = "<!-- generated from app/actions/verbs.py by scripts/verb_tables.py: end -->"
COMMAND = "python scripts/verb_tables.py --write"
CLI_DOC, API_DOC, README = Path("docs/cli.md"), Path("docs/api.md"), Path("README.md")
CLI_HEAD = "| command | what it does |\n|---|---|"
API_HEAD = "| endpoint | parameters | answer |\n|---|---|---|"
WIDTH = 120  # the docs' line length (README's list is wrapped to it)


def cells(row: str) -> list[str]:
    """A Markdown table row's cells, an escaped ``\\|`` kept inside its cell."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip()[1:-1])]


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def section(page: str) -> str:
    """The text between ``page``'s markers."""
    if BEGIN not in page or END not in page:
        raise ValueError(f"no {BEGIN} ... {END} markers to write between")
    return page.split(BEGIN, 1)[1].split(END, 1)[0]


def replace_section(page: str, text: str) -> str:
    """``page`` with ``text`` between its markers."""
    head, rest = page.split(BEGIN, 1)
    return f"{head}{BEGIN}{text}{END}{rest.split(END, 1)[1]}"


def _rows(page: str) -> list[list[str]]:
    """The rows of the table between ``page``'s markers, its header and rule left out."""
    lines = [line for line in section(page).splitlines() if line.startswith("|")]
    return [cells(line) for line in lines[2:]]


def synopsis(verb: verbs.Verb) -> str:
    """``grpo-studio VERB`` with its arguments: a positional in capitals, an option with its default (or what it
    takes), a switch, a repeatable option with ``...``; square brackets round what may be left out."""
    words = [f"grpo-studio {verb.name}"]
    for param in verb.cli_params:
        flags, keywords = param.flags or (f"--{param.name.replace('_', '-')}",), param.options
        shown = keywords.get("metavar") or param.name.upper()
        if param.default is verbs.REQUIRED and not param.flags:
            words.append(shown)
        elif keywords.get("action") == "store_true":
            words.append(f"[{flags[0]}]")
        elif keywords.get("required"):
            words.append(f"{flags[0]} {shown}")
        elif keywords.get("action") == "append":
            words.append(f"[{flags[0]} {shown} ...]")
        else:
            default = keywords.get("default", param.default)
            given = shown if default in (None, "", verbs.REQUIRED) or callable(default) else default
            words.append(f"[{flags[0]} {given}]")
    return " ".join(words)


def _key(cell: str) -> str:
    """The verb a row's first cell is of: the command's name, or the endpoint's."""
    words = cell.strip("`").split()
    return words[1] if words[0] == "grpo-studio" else words[0].lstrip("/")


def cli_table(written: Sequence[Sequence[str]], table: Iterable[verbs.Verb] = verbs.VERBS) -> str:
    """docs/cli.md's commands: one row per verb on the CLI, in the table's order, its prose kept from ``written``;
    the rows that are no command (``--version``, ``COMMAND --help``) stay last as written."""
    prose = {_key(row[0]): row[1] for row in written}
    rows = [_row(f"`{synopsis(v)}`", prose.get(v.name, v.help)) for v in table if verbs.CLI in v.surfaces]
    rows += [_row(*row) for row in written if _key(row[0]).startswith("-")]
    return "\n".join([CLI_HEAD, *rows])


def _named(cell: str) -> list[str]:
    """The parameters a parameters cell names: its backquoted words outside brackets (notes stay inside them)."""
    outside, depth = [], 0
    for char in cell:
        depth += char == "("
        if not depth:
            outside.append(char)
        depth -= char == ")" and depth > 0
    return re.findall(r"`(\w+)`", "".join(outside))


def parameters(verb: verbs.Verb) -> str:
    """A verb's parameters as docs/api.md lists them where it has no prose for them: each name, its default in
    brackets."""
    return ", ".join(
        f"`{p.name}`" if p.default is verbs.REQUIRED else f"`{p.name}` ({p.default!r})" for p in verb.api_params
    )


def api_table(written: Sequence[Sequence[str]], table: Iterable[verbs.Verb] = verbs.VERBS) -> str:
    """docs/api.md's endpoints: one row per verb on the API, in the table's order, its parameters cell and answer kept
    from ``written`` (the parameters cell only while it names the verb's parameters, in order)."""
    kept = {_key(row[0]): row[1:] for row in written}
    rows = []
    for verb in table:
        if verbs.API not in verb.surfaces:
            continue
        params, answer = kept.get(verb.name, (parameters(verb), verb.help))
        if _named(params) != [p.name for p in verb.api_params]:
            params = parameters(verb)
        rows.append(_row(f"`/{verb.name}`", params, answer))
    return "\n".join([API_HEAD, *rows])


def endpoint_list(table: Iterable[verbs.Verb] = verbs.VERBS) -> str:
    """README's list of the endpoints, wrapped to the docs' width."""
    names = [f"`/{v.name}`" for v in table if verbs.API in v.surfaces]
    listed = f"{', '.join(names)}: {len(names)} in all"
    return textwrap.fill(listed, WIDTH, break_long_words=False, break_on_hyphens=False)


def generated(root: Path = ROOT, table: Sequence[verbs.Verb] = verbs.VERBS) -> dict[Path, str]:
    """Each doc as the table writes it (its prose as it is now)."""
    pages = {path: (root / path).read_text(encoding="utf-8") for path in (CLI_DOC, API_DOC, README)}
    return {
        CLI_DOC: replace_section(pages[CLI_DOC], f"\n{cli_table(_rows(pages[CLI_DOC]), table)}\n"),
        API_DOC: replace_section(pages[API_DOC], f"\n{api_table(_rows(pages[API_DOC]), table)}\n"),
        README: replace_section(pages[README], f"\n{endpoint_list(table)}"),  # inline: the sentence goes on after END
    }


def main(argv: list[str] | None = None) -> int:
    """The command line: print the sections, write them into the docs (--write), or check the docs (--check)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="rewrite the docs' generated sections")
    action.add_argument("--check", action="store_true", help="exit 1 when a doc's section is stale")
    args = parser.parse_args(argv)
    wanted = generated()
    if not (args.write or args.check):
        for path, page in wanted.items():
            sys.stdout.write(f"{path}:{section(page)}\n\n")
        return 0
    stale = [path for path, page in wanted.items() if (ROOT / path).read_text(encoding="utf-8") != page]
    if args.check:
        for path in stale:
            print(f"{path}'s list of the verbs is not the table's: run `{COMMAND}`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        (ROOT / path).write_text(wanted[path], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
