"""The built-in tools and environments, named ``builtin:NAME`` in a run's ``tools`` and ``environment``.

A tool is a plain function; TRL hands it to the model through transformers, which builds the tool's JSON schema from
its name, its type hints and its Google-style docstring (an ``Args:`` section naming every parameter), so each one
here has all three (trl 1.16.0 trainer/grpo_trainer.py:251-257, the ``tools`` argument). An environment is a class:
TRL makes one instance per rollout, calls its ``reset(**row)`` before generating, and offers its public methods other
than ``reset`` and ``get_reward`` as the rollout's tools (trl 1.16.0 trainer/grpo_trainer.py:266-277, 685-704,
2362-2375).

The calculator evaluates arithmetic by walking Python's syntax tree, never with ``eval``: a model-written expression
is text from the model, and only numbers, + - * / and parentheses (and a leading sign) are accepted.
"""

from __future__ import annotations

import ast
import operator
from decimal import Decimal, DivisionByZero, InvalidOperation, localcontext

# The operators the calculator knows; anything else in an expression is refused naming it.
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
# A cap on the expression's length and on its numbers' digits: a model may write a very long expression, and
# Decimal arithmetic on huge numbers is slow enough to hang a rollout.
MAX_EXPRESSION = 200
_PRECISION = 28


def _value(node: ast.AST) -> Decimal:
    """The value of one node of a parsed arithmetic expression (ValueError for anything but numbers and + - * /)."""
    if isinstance(node, ast.Expression):
        return _value(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Decimal(str(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ZeroDivisionError("division by zero")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        node = node.op  # name the operator (Pow, Mod, ...), not the expression around it
    raise ValueError(f"unsupported element {type(node).__name__}: only numbers, + - * / and parentheses")


def _text(value: Decimal) -> str:
    """A result as a person writes it: 4, not 4.000; 0.5, not 5E-1. A result beyond the precision's digits either way
    is written in scientific notation (1.2E+8600): written out, 195 characters of 1e308 * 1e308 * ... made a 9,000-
    character answer in the model's context (issue 58)."""
    if value and abs(value.adjusted()) >= _PRECISION:
        return f"{value.normalize():E}"
    if value == value.to_integral_value():
        return str(value.to_integral_value())
    return format(value.normalize(), "f")


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / and parentheses, on integers and decimals.

    Args:
        expression: The arithmetic expression to evaluate, for example "(3 + 4) * 2.5".

    Returns:
        The value of the expression, for example "17.5".
    """
    if len(expression) > MAX_EXPRESSION:
        raise ValueError(f"the expression is longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {exc.msg}") from None
    with localcontext() as context:
        context.prec = _PRECISION
        try:
            return _text(_value(tree))
        except (DivisionByZero, InvalidOperation) as exc:
            raise ArithmeticError(str(exc) or type(exc).__name__) from None


class CalculatorEnv:
    """An environment with one tool, ``calculate``: the calculator as an environment's method, counting the calls
    of its rollout (``calls``), which a reward can read through TRL's ``environments`` argument."""

    def __init__(self) -> None:
        self.calls = 0

    def reset(self, **kwargs) -> None:
        """Start a new rollout: no calls yet. Returns None, so the prompt is left as it is."""
        self.calls = 0

    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression with + - * / and parentheses, on integers and decimals.

        Args:
            expression: The arithmetic expression to evaluate, for example "(3 + 4) * 2.5".

        Returns:
            The value of the expression, for example "17.5".
        """
        self.calls += 1
        return calculator(expression)


# The registry: what ``builtin:NAME`` names in a config's ``tools`` and ``environment``.
TOOLS = {"calculator": calculator}
ENVIRONMENTS = {"calculator": CalculatorEnv}
