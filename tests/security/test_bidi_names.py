"""Format characters that flip how a name reads (issue 35 item 9): a right-to-left override and the other bidi
controls are refused in one-line settings like control characters, kept in multi-line text (right-to-left languages
use the marks), and shown as escapes on the terminal."""

from __future__ import annotations

import pytest

from trainer.safe_text import BIDI, printable, text_problem


@pytest.mark.parametrize("char", sorted(BIDI))
def test_a_bidi_control_is_refused_in_a_name(char):
    said = text_problem("name", f"run-evil{char}gnp.yaml")
    assert said is not None and said.startswith(f"name holds the format character U+{ord(char):04X} (")
    assert said.endswith("at character 9, which changes how the text around it reads: expected printable text")


def test_a_multiline_text_keeps_its_direction_marks():
    assert text_problem("system_prompt", "اكتب الجواب\u200f\nثم", multiline=True) is None


def test_the_terminal_shows_them_as_escapes():
    assert printable("run-evil\u202egnp.yaml") == "run-evil\\u202egnp.yaml"


def test_a_config_with_such_a_name_is_refused():
    from app import actions

    problems = actions.validate({"name": "run\u202eevil"}, actions.OPERATOR, warn=False).problems
    assert (
        "name holds the format character U+202E (right-to-left override) at character 4, which changes how the "
        "text around it reads: expected printable text" in problems
    )
