"""``--help`` teaches by example: each subcommand's help ends with real examples (each parses as that command), and
the top level says where data lives and how to start (issue 37, item 6)."""

from __future__ import annotations

import argparse
import shlex

from app.cli.main import EXAMPLES, _parser


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_subcommands_help_ends_with_examples_that_parse():
    commands = _subcommands()
    assert set(EXAMPLES) == set(commands)
    for name, parser in commands.items():
        help_text = parser.format_help()
        tail = help_text.rstrip().rsplit("examples:\n", 1)[1].splitlines()
        assert [line.strip() for line in tail] == EXAMPLES[name], name
        for example in EXAMPLES[name]:
            argv = shlex.split(example)
            assert argv[:2] == ["grpo-studio", name]
            args = _parser().parse_args(argv[1:])  # exits (fails the test) on an example that doesn't parse
            assert args.func is parser.get_default("func"), example


def test_the_top_level_help_says_where_data_lives_and_how_to_start():
    text = _parser().format_help()
    assert "$GRPO_STUDIO_HOME (default ~/.grpo-studio)" in text
    start = text.split("start here:\n", 1)[1].splitlines()
    assert [line.split("  ")[1] for line in start[:2]] == ["grpo-studio run tiny-offline", "grpo-studio serve"]
