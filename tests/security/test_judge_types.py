"""The code_tests judge compares values with their types (issue 35 item 8): ``def f(x): return True`` must not pass
``assert f(1) == 1``. A bool equals only a bool, inside containers too; ints and floats compare by value; a list is
not a tuple. Judged here on plain data, as the sandbox's answers arrive (no sandbox needed)."""

from __future__ import annotations

import pytest

from trainer.scoring.judge import judge, plan


def _passes(test: str, answer) -> bool:
    try:
        judge(plan(test), lambda name, args, kwargs: answer)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize(
    ("test", "answer", "passes"),
    [
        ("assert f(1) == 1", True, False),  # the attack: a bool is not the int 1
        ("assert f(1) == 0", False, False),
        ("assert f(1) == True", 1, False),
        ("assert f(1) == True", True, True),
        ("assert f(1) == 1", 1, True),
        ("assert f(1) == 2", 2.0, True),  # a whole float is the number: a mean of [1, 3] is right
        ("assert f(1) == 0.5", 0.5, True),
        ("assert f(1) != 1", True, True),
        ("assert f(1) == [0, 1]", [False, True], False),  # recursively
        ("assert f(1) == [0, 1]", [0, 1], True),
        ("assert f(1) == [0, 1]", (0, 1), False),  # a tuple is not a list
        ("assert f(1) == {1: 'a'}", {True: "a"}, False),
        ("assert f(1) == {1, 2}", {True, 2}, False),
        ("assert f(1) == {1, 2}", {2, 1}, True),
        ("assert f(1) == {'k': [1, (2, 3)]}", {"k": [1, (2, 3)]}, True),
        ("assert 1 in f(1)", [True], False),
        ("assert 1 in f(1)", [1.0, 5], True),
        ("assert 'ab' in f(1)", "xaby", True),
        ("assert f(1) > 0", True, False),  # no ordering between a bool and a number
        ("assert f(1) >= 1", 2, True),
        ("assert f(1) is None", None, True),
    ],
)
def test_judged_values_compare_with_their_types(test, answer, passes):
    assert _passes(test, answer) is passes
