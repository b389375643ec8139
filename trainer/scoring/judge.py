"""The trusted half of ``code_tests``: what each unit test asks of the candidate, and whether its answers pass.

A test is a line such as ``assert two_sum([2, 7], 9) == [0, 1]``. It is parsed and evaluated here, in the worker,
and never shown to the candidate: the sandbox only ever receives "call ``two_sum`` with ``([2, 7], 9)``" and sends
back a value as plain data (:mod:`trainer.scoring.sandbox_server`). Everything else in the assert, the comparison included,
is evaluated here on that decoded data, so nothing the candidate defines (an ``__eq__`` that is always True, a patched
``json``, a forged result line, a rewritten ``__main__``) takes part in the verdict.

What a test may contain: literals; calls to the candidate's functions, with arguments built from the same;
indexing and slicing; comparisons (``== != < <= > >= in``, ``not in``, ``is``/``is not``); ``and``/``or``/``not``;
``+ - * / // %`` on numbers; and a few pure builtins (``abs``, ``len``, ``sorted``, ...) and ``math.isclose``, except
in a test that calls nothing else, where ``max(3, 5)`` means the candidate's own ``max``. One
``assert`` (its message is ignored) or one bare expression, which passes when it raises nothing. Anything else
(assignments, several statements, methods of a result, lambdas) could only be judged by running trusted code next to
the candidate's, so such a test counts as failed, and the reason is logged once per test.
"""

from __future__ import annotations

import ast
import logging
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)

# Pure functions evaluated here on plain data. Their cost is bounded by the reply size cap: no range(), no **.
TRUSTED_FUNCTIONS: dict[str, Callable] = {
    f.__name__: f
    for f in (abs, all, any, bool, float, int, len, list, max, min, round, set, sorted, str, sum, tuple, frozenset)
}
_ISCLOSE = ("math", "isclose")


def typed(value: Any) -> Any:
    """``value`` as the judge compares it: each value tagged with its kind, recursively, so that Python's ``True ==
    1`` (a bool is an int), ``{1: "a"} == {True: "a"}`` and ``[0] == [False]`` don't hold here: ``def f(x): return
    True`` must not pass ``assert f(1) == 1``. A bool equals only a bool; ints and floats compare by value with each
    other (``2.0 == 2``: a mean that is whole is still right), not with bools; a list only equals a list and a tuple
    a tuple; sets and dicts compare their tagged members. Hashable, so a set's comparison stays linear."""
    kind = type(value)
    if kind is bool:
        return ("bool", value)
    if kind in (int, float):
        return ("number", value)
    if kind in (list, tuple):
        return (kind.__name__, tuple(typed(v) for v in value))
    if kind in (set, frozenset):
        return ("set", frozenset(typed(v) for v in value))
    if kind is dict:
        return ("dict", frozenset((typed(k), typed(v)) for k, v in value.items()))
    return (kind.__name__, value)  # None, str and anything a trusted builtin returned (a slice, a range)


def _equal(a: Any, b: Any) -> bool:
    return typed(a) == typed(b)


def _member(a: Any, b: Any) -> bool:
    """``a in b`` with :func:`typed` equality (a substring test for two strings, as Python's)."""
    if isinstance(a, str) and isinstance(b, str):
        return a in b
    if isinstance(b, dict):
        b = list(b)
    if isinstance(b, (list, tuple, set, frozenset)):
        wanted = typed(a)
        return any(typed(member) == wanted for member in b)
    return a in b


def _ordered(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """An ordering that holds between numbers, or between two bools, never between a bool and a number."""
    return lambda a, b: (type(a) is bool) == (type(b) is bool) and compare(a, b)


_COMPARE = {
    ast.Eq: _equal,
    ast.NotEq: lambda a, b: not _equal(a, b),
    ast.Lt: _ordered(operator.lt),
    ast.LtE: _ordered(operator.le),
    ast.Gt: _ordered(operator.gt),
    ast.GtE: _ordered(operator.ge),
    ast.In: _member,
    ast.NotIn: lambda a, b: not _member(a, b),
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_NUMBERS = (bool, int, float)

# Asks the sandbox to call the candidate's function ``name(*args, **kwargs)``; returns the decoded value or raises
# CandidateError.
Caller = Callable[[str, list, dict], Any]


class Unsupported(ValueError):
    """A test this judge can't evaluate without running trusted code in the candidate's interpreter."""


class CandidateError(Exception):
    """A candidate call that raised, returned something that isn't plain data, or whose answer was malformed."""


@dataclass(frozen=True)
class Plan:
    """A parsed test: the expression to evaluate and whether it is an assert (truth required) or a bare expression."""

    expression: ast.expr
    is_assert: bool
    # The builtins evaluated here. Empty when the test calls nothing else: then `assert max(3, 5) == 5` tests the
    # candidate's own max(), and answering it with Python's would pass it whatever the candidate wrote.
    trusted: frozenset[str]


@lru_cache(maxsize=4096)
def plan(test: str) -> Plan:
    """The plan for one test's source; raises Unsupported with the reason (and logs it once per test)."""
    try:
        tree = ast.parse(test.strip(), mode="exec")
        if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Assert, ast.Expr)):
            raise Unsupported("a test must be one assert statement or one expression")
        statement = tree.body[0]
        expression = statement.test if isinstance(statement, ast.Assert) else statement.value
        _check(expression)
        called = {n.func.id for n in ast.walk(expression) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        trusted = frozenset(TRUSTED_FUNCTIONS) if called - set(TRUSTED_FUNCTIONS) else frozenset()
        return Plan(expression, isinstance(statement, ast.Assert), trusted)
    except (SyntaxError, Unsupported, RecursionError) as exc:
        reason = str(exc) if isinstance(exc, Unsupported) else f"{type(exc).__name__}: {exc}"
        log.warning("code_tests: can't judge the test %r outside the sandbox (%s); it counts as failed", test, reason)
        raise Unsupported(reason) from None


def _check(node: ast.AST) -> None:
    """Raise Unsupported unless every node of ``node`` is one the evaluator handles."""
    if isinstance(node, ast.Constant):
        return
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        children = node.elts
    elif isinstance(node, ast.Dict):
        if None in node.keys:
            raise Unsupported("** inside a dict literal")
        children = [*node.keys, *node.values]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
        children = [node.operand]
    elif isinstance(node, ast.BoolOp):
        children = node.values
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        children = [node.left, node.right]
    elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        children = [node.left, *node.comparators]
    elif isinstance(node, ast.Subscript):
        children = [node.value, node.slice]
    elif isinstance(node, ast.Slice):
        children = [part for part in (node.lower, node.upper, node.step) if part is not None]
    elif isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) or _dotted(node.func) == _ISCLOSE):
            raise Unsupported(f"calls {ast.unparse(node.func)}: only plain function names can be called")
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Unsupported("* or ** arguments")
        children = [*node.args, *(k.value for k in node.keywords)]
    else:
        raise Unsupported(f"{ast.unparse(node)!r} is a {type(node).__name__}, which a test may not contain")
    for child in children:
        _check(child)


def _dotted(node: ast.expr) -> tuple[str, ...]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return (node.value.id, node.attr)
    return ()


def judge(test_plan: Plan, call: Caller) -> None:
    """Evaluate one test, calling the candidate through ``call``; returns if it passes, raises AssertionError
    (or CandidateError, or whatever the evaluation raised on odd data, e.g. TypeError) if it fails."""
    value = _evaluate(test_plan.expression, call, test_plan.trusted)
    if test_plan.is_assert and not value:
        raise AssertionError(f"{ast.unparse(test_plan.expression)[:120]} is false")


def _evaluate(node: ast.expr, call: Caller, trusted: frozenset[str]) -> Any:
    match node:
        case ast.Constant(value=value):
            return value
        case ast.List(elts=elts):
            return [_evaluate(e, call, trusted) for e in elts]
        case ast.Tuple(elts=elts):
            return tuple(_evaluate(e, call, trusted) for e in elts)
        case ast.Set(elts=elts):
            return {_evaluate(e, call, trusted) for e in elts}
        case ast.Dict(keys=keys, values=values):
            return {_evaluate(k, call, trusted): _evaluate(v, call, trusted) for k, v in zip(keys, values)}
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return not _evaluate(operand, call, trusted)
        case ast.UnaryOp(op=op, operand=operand):
            number = _number(_evaluate(operand, call, trusted))
            return -number if isinstance(op, ast.USub) else +number
        case ast.BoolOp(op=op, values=values):
            result = None
            for part in values:  # short-circuits like Python: `and` stops at the first false part
                result = _evaluate(part, call, trusted)
                if bool(result) != isinstance(op, ast.And):
                    break
            return result
        case ast.BinOp(left=left, op=op, right=right):
            return _ARITHMETIC[type(op)](
                _number(_evaluate(left, call, trusted)), _number(_evaluate(right, call, trusted))
            )
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            before = _evaluate(left, call, trusted)
            for op, comparator in zip(ops, comparators):
                after = _evaluate(comparator, call, trusted)
                if not _COMPARE[type(op)](before, after):
                    return False
                before = after
            return True
        case ast.Subscript(value=value, slice=index):
            return _evaluate(value, call, trusted)[_evaluate(index, call, trusted)]
        case ast.Slice(lower=lower, upper=upper, step=step):
            return slice(*(None if part is None else _evaluate(part, call, trusted) for part in (lower, upper, step)))
        case ast.Call(func=func, args=args, keywords=keywords):
            values = [_evaluate(a, call, trusted) for a in args]
            named = {k.arg: _evaluate(k.value, call, trusted) for k in keywords}
            if _dotted(func) == _ISCLOSE:
                return math.isclose(*(_number(v) for v in values), **{k: _number(v) for k, v in named.items()})
            if func.id in trusted:
                return TRUSTED_FUNCTIONS[func.id](*values, **named)
            return call(func.id, values, named)
    raise Unsupported(type(node).__name__)  # _check lets nothing else through


def _number(value: Any) -> int | float:
    """``value`` if it is a number: arithmetic on a string or list the candidate chose could be made arbitrarily
    expensive (``"x" * n``), so it isn't offered."""
    if type(value) not in _NUMBERS:
        raise TypeError(f"arithmetic on a {type(value).__name__}")
    return value
