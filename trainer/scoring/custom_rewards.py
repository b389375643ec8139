"""Custom rewards: a user's own ``path/to/file.py:function`` (or ``package.module:function``) in a run's
``reward_funcs``, imported and dry-run on two sample completions before a run uses it, so a broken one is reported when
the config is checked rather than at the first training step.

Importing a file runs its code: the dashboard accepts custom rewards only with ``--allow-custom-rewards``
(SECURITY.md), and checks them in a child process (:func:`custom_reward_errors_in_child`, trainer.scoring.user_code),
so what a module does to its process as it is imported (an environment variable set, a global written) never reaches
the dashboard or the runs it starts. Only the run's worker imports them into its own process, to train with them.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

RewardFunc = Callable[..., list[float | None]]

_DRY_RUN = [
    "<reasoning>\n2 + 2 = 4\n</reasoning>\n<answer>\n4\n</answer>",
    "I am not sure.",
]


def import_object(spec: str, what: str = "custom reward", kind: str = "function") -> object:
    """The object ``spec`` names, ``path/to/file.py:name`` or ``module:name``, imported: the one loader of a user's
    own code, for custom rewards and for tools and environments (trainer.tools.loading). Raises ValueError naming
    ``what`` and what is wrong: no such file, not importable, no ``kind`` (function, class) of that name."""
    target, _, name = spec.rpartition(":")
    try:
        if target.endswith(".py"):
            path = Path(target).expanduser()
            if not path.is_file():
                raise ValueError(f"{what} {spec!r}: no such file {target}")
            module_spec = importlib.util.spec_from_file_location(f"grpo_studio_custom_{path.stem}", path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_spec.name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"{what} {spec!r}: could not import {target}: {type(exc).__name__}: {exc}") from exc
    if not hasattr(module, name):
        raise ValueError(f"{what} {spec!r}: {target} has no {kind} {name}")
    return getattr(module, name)


def custom_reward_errors_in_child(specs: list[str]) -> list[str]:
    """Every problem :func:`load_custom_reward` finds with ``specs``, each ``reward_funcs: ...``, found in a child
    process (trainer.scoring.user_code): nothing the user's code does as it is imported or dry-run stays here."""
    from trainer.scoring.user_code import run_in_child

    return run_in_child(f"{__name__}:custom_reward_errors", [list(specs)], "reward_funcs") if specs else []


def custom_reward_errors(specs: list[str]) -> list[str]:
    """Every problem :func:`load_custom_reward` finds with ``specs`` in this process: the child's side of
    :func:`custom_reward_errors_in_child`."""
    found = []
    for spec in specs:
        try:
            load_custom_reward(spec)
        except ValueError as exc:
            found.append(f"reward_funcs: {exc}")
    return found


@lru_cache(maxsize=64)
def load_custom_reward(spec: str) -> RewardFunc:
    """Import ``path/to/file.py:function`` or ``module:function`` and dry-run it on two sample completions.

    Raises ValueError naming what is wrong: not importable, not callable, wrong signature, or not one float/None per
    completion.
    """
    target, _, func_name = spec.rpartition(":")
    func = import_object(spec)
    if not callable(func):
        raise ValueError(f"custom reward {spec!r}: {target} has no function {func_name}")
    params = inspect.signature(func).parameters
    if "completions" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise ValueError(
            f"custom reward {spec!r}: expected f(prompts, completions, **kwargs), got {func_name}{inspect.signature(func)}"
        )
    try:
        result = func(prompts=["What is 2 + 2?"] * 2, completions=list(_DRY_RUN), answer=["4", "4"])
    except Exception as exc:
        raise ValueError(
            f"custom reward {spec!r}: failed on two sample completions: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(result, (list, tuple)) or len(result) != 2:
        raise ValueError(f"custom reward {spec!r}: expected a list with one score per completion (2), got {result!r}")
    if not all(r is None or (isinstance(r, (int, float)) and not isinstance(r, bool)) for r in result):
        raise ValueError(f"custom reward {spec!r}: expected a float or None per completion, got {result!r}")
    return func
