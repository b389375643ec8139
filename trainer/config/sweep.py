"""A sweep's definition: the ``sweep:`` block of a config file (or the CLI's ``--grid``), read and checked, and the
points it names.

A sweep is one base config and a set of settings to vary. Each swept setting is a numeric or choice field of
RunConfig, given as

- a list of values (``beta: [0.0, 0.04]``);
- a range with a count (``learning_rate: {low: 1e-5, high: 1e-4, count: 3, scale: log}``), which is the list of
  ``count`` values from ``low`` to ``high``, evenly spaced (``linear``, the default) or evenly spaced in log
  (``log``); whole-number settings are rounded;
- a search range (``temperature: {low: 0.7, high: 1.2}``, no count): any value in the bounds, for the random and
  model-based methods only (a grid has no points to take from it).

The ``method`` is ``grid`` (every combination), ``random`` (``members`` points drawn under ``seed``) or ``tpe``
(``members`` points from Optuna's TPE sampler, model-based: each point asked after the objective of the finished
ones is told, under ``seed``). The ``objective`` is a logged metric (default ``heldout/correct``, the held-out
greedy correctness of the periodic evaluation, read at its last evaluation) and its ``direction`` (max or min).
``prune`` holds the early-stopping rules' settings (trainer/sweeps/prune.py applies them; docs/sweeps.md).

Ground, like the rest of this folder: it needs nothing but RunConfig's field metadata (Optuna is imported only when
points are drawn). Every problem is one sentence naming the setting and what is expected; every member's config is
then checked with the review like any run's (app/actions/sweeps.py), before anything is created.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer.config.keys import repr_short, unknown_setting
from trainer.config.rules import range_text
from trainer.config.run_config import RunConfig
from trainer.config.values import coerce, shorten
from trainer.safe_text import text_problem

METHODS = ("grid", "random", "tpe")
DIRECTIONS = ("max", "min")
SCALES = ("linear", "log")
DEFAULT_OBJECTIVE = "heldout/correct"
# A sweep's members are runs queued one after another: 64 is a day of the demo's size, far past any grid a person
# means to launch. A 10 x 10 x 10 grid typed by mistake is refused, not queued.
MAX_MEMBERS = 64
MAX_VALUES = 32  # values of one setting (a list, or a range's count)
# What a logged metric's key is made of (TRL's keys, the worker's heldout/..., rewards/<name>/mean): a sweep's objective
# outside it names no metric, and HTML or a terminal's escape in it would reach the Sweeps page and the CLI's table.
METRIC_NAME = re.compile(r"[A-Za-z0-9_./:-]{1,200}")
SWEEP_KEYS = ("method", "members", "seed", "objective", "direction", "settings", "prune")
# Every whole number of a sweep: bounded as it is read (issue 58.4: a seed of 2**32 reached numpy's seeding and its
# traceback; a signal_window of 10**30 was stored, after which /sweeps could not be answered). The seed is what numpy
# and Optuna's samplers take; a window or a warm-up is counted in steps or evaluations, a run has at most 1,000,000.
WHOLE_BOUNDS = {"members": (0, MAX_MEMBERS), "seed": (0, 2**32 - 1)}
PRUNE_BOUNDS = {"median_warmup": (1, 1_000_000), "median_peers": (1, MAX_MEMBERS - 1), "signal_window": (1, 1_000_000)}
# Settings that name things or are machinery (where it runs, what it is called), never a point of a search.
# eval_problems: a median rule compares members' held-out scores, which must be read on the same problems
NOT_SWEPT = frozenset({"name", "executor", "backend", "vllm_mode", "eval_problems"})


@dataclass(frozen=True)
class Prune:
    """The early-stopping rules of a sweep and their thresholds; docs/sweeps.md § Pruning: the rules and their defaults
    says why each default."""

    probe: bool = True  # before training: the probe's "wasted" verdict skips the member
    median: bool = True  # at evaluation steps: worse than the median of the others at the same step
    # evaluations a member has had before the median rule may stop it (the step-0 one is the base: alike for all)
    median_warmup: int = 2
    median_peers: int = 2  # other members that reached the same evaluation step, at least
    signal: bool = True  # the learning signal gone: most groups zero-std over a window
    signal_window: int = 20  # steps the share is averaged over
    signal_share: float = 0.9  # mean frac_reward_zero_std at least this: at most one group in ten still teaches
    watch: bool = True  # a reward-hacking sign of the watch that holds now

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Dimension:
    """One swept setting: its ``values`` (a list, or a range's points), or search bounds (``values`` None)."""

    setting: str
    values: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    whole: bool = False  # a whole-number setting: searched and rounded as one

    def to_dict(self) -> Any:
        """As a ``sweep:`` block's settings write it: the list of values, or the search bounds."""
        if self.values is not None:
            return list(self.values)
        return {"low": self.low, "high": self.high, "scale": "log" if self.log else "linear"}


@dataclass(frozen=True)
class SweepSpec:
    """A sweep, checked: how points are chosen, what is optimised, which settings vary, and the pruning rules."""

    method: str
    dimensions: tuple[Dimension, ...]
    members: int = 0  # random and tpe: how many points; grid: every combination
    seed: int = 0
    objective: str = DEFAULT_OBJECTIVE
    direction: str = "max"
    prune: Prune = field(default_factory=Prune)

    @property
    def size(self) -> int:
        """How many members the sweep has."""
        if self.method == "grid":
            return math.prod(len(d.values or ()) for d in self.dimensions)
        return self.members

    def to_dict(self) -> dict[str, Any]:
        """The definition as stored on the sweep's row (and as a ``sweep:`` block reads it back)."""
        return {
            "method": self.method,
            "members": self.members,
            "seed": self.seed,
            "objective": self.objective,
            "direction": self.direction,
            "settings": {d.setting: d.to_dict() for d in self.dimensions},
            "prune": self.prune.to_dict(),
        }

    def better(self, a: float, b: float) -> bool:
        """Whether objective value ``a`` is better than ``b`` in this sweep's direction."""
        return a > b if self.direction == "max" else a < b


class SweepError(ValueError):
    """A sweep definition with problems; ``problems`` lists each in one sentence."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid sweep:\n" + "\n".join(f"  - {p}" for p in problems))


# --- reading a definition -------------------------------------------------------------------------------------------
def split(mapping: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """A config mapping's run settings and its ``sweep:`` block (None when it has none)."""
    base = dict(mapping)
    return base, base.pop("sweep", None)


def parse_grid(text: str) -> dict[str, list[str]]:
    """The CLI's ``--grid "beta=0,0.04 learning_rate=1e-5,5e-5"``: setting -> its values as text (read as the
    setting's type by :func:`parse`). Raises SweepError naming a part that is not ``setting=v1,v2``."""
    settings: dict[str, list[str]] = {}
    problems = []
    for part in text.split():
        key, sep, values = part.partition("=")
        listed = [v for v in values.split(",") if v]
        if not sep or not key or not listed:
            problems.append(f"--grid {shorten(part)}: expected setting=value1,value2 (e.g. beta=0,0.04)")
        elif key in settings:
            problems.append(f"--grid names {key} twice: give all its values in one setting=v1,v2")
        else:
            settings[key] = listed
    if not settings and not problems:
        problems.append('--grid is empty: expected settings and values, e.g. "beta=0,0.04 learning_rate=1e-5,5e-5"')
    if problems:
        raise SweepError(problems)
    return settings


def parse(block: Any, grid: Mapping[str, Sequence[Any]] | None = None) -> SweepSpec:
    """The sweep a ``sweep:`` block describes (``grid``: settings given on the command line, a grid when the block
    has no method; they replace the block's settings of the same name). Raises SweepError with every problem."""
    if block is None:
        block = {}
    if not isinstance(block, Mapping):
        raise SweepError([f"sweep: expected a mapping (method, settings, ...), got {shorten(block)}"])
    problems = [
        f"sweep.{_name(key)}: not a sweep setting (expected one of {', '.join(SWEEP_KEYS)})"
        for key in block
        if key not in SWEEP_KEYS
    ]
    method = str(block.get("method", "grid"))
    if method not in METHODS:
        problems.append(f"sweep.method {shorten(method)}: expected one of {', '.join(METHODS)}")
    searched = method in ("random", "tpe")  # a search draws its members: at least one, said in its own words
    members = _whole(block, "members", 0, [] if searched else problems)
    if searched and not 1 <= members <= MAX_MEMBERS:
        raw = shorten(block.get("members", 0))
        problems.append(f"sweep.members {raw}: {method} search needs from 1 to {MAX_MEMBERS} members")
    seed = _whole(block, "seed", 0, problems)
    objective = block.get("objective", DEFAULT_OBJECTIVE)
    if isinstance(objective, str) and (unsafe := text_problem("sweep.objective", objective)):
        problems.append(unsafe)  # ESC, OSC 52, NUL: named by code point, never stored or echoed raw
    elif not isinstance(objective, str) or not METRIC_NAME.fullmatch(objective):
        problems.append(
            f"sweep.objective {shorten(objective)}: expected a logged metric's name (at most 200 letters, digits and "
            "/ _ - . :), e.g. heldout/correct"
        )
    direction = str(block.get("direction", "max"))
    if direction not in DIRECTIONS:
        problems.append(f"sweep.direction {shorten(direction)}: expected max or min")
    settings = block.get("settings", {}) or {}
    readable = isinstance(settings, Mapping)
    if not readable:
        problems.append(
            f"sweep.settings: expected each swept setting with its values (beta: [0, 0.04]), got {shorten(settings)}"
        )
        settings = {}
    settings = {**settings, **(grid or {})}
    if not settings and readable:  # an unreadable block is said once, above
        problems.append("sweep.settings is empty: name at least one setting to sweep, e.g. beta: [0.0, 0.04]")
    dimensions = []
    for name, given in settings.items():
        dimension, found = _dimension(str(name), given, method)
        problems.extend(found)
        if dimension is not None:
            dimensions.append(dimension)
    prune = _prune(block.get("prune", {}), problems)
    spec = SweepSpec(method, tuple(dimensions), members, seed, str(objective), direction, prune)
    if not problems and method == "grid" and spec.size > MAX_MEMBERS:
        sizes = " x ".join(str(len(d.values or ())) for d in dimensions)
        problems.append(f"the grid has {spec.size} members ({sizes}): at most {MAX_MEMBERS}")
    if problems:
        raise SweepError(problems)
    return spec


def _whole(block: Mapping[str, Any], key: str, default: int, problems: list[str]) -> int:
    """The whole number ``block[key]`` within :data:`WHOLE_BOUNDS`, else ``default`` and a problem."""
    return _bounded(f"sweep.{key}", block.get(key, default), WHOLE_BOUNDS[key], default, problems)


def _bounded(name: str, value: Any, bounds: tuple[int, int], default: int, problems: list[str]) -> int:
    """``value`` read as a whole number from ``bounds[0]`` to ``bounds[1]``; else ``default``, and a problem saying
    the range."""
    try:
        number = coerce(value, int)
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or not bounds[0] <= number <= bounds[1]:
        problems.append(f"{name} {shorten(value)}: expected a whole number from {bounds[0]:,} to {bounds[1]:,}")
        return default
    return number


def _fields() -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(RunConfig)}


def sweepable() -> list[str]:
    """The settings a sweep may vary, in RunConfig's order: its numeric and choice fields, less :data:`NOT_SWEPT`
    (the New run form's Sweep section offers these)."""
    hints = typing.get_type_hints(RunConfig)
    return [
        f.name
        for f in dataclasses.fields(RunConfig)
        if f.name not in NOT_SWEPT
        and (hints[f.name] in (int, float, bool) or hints[f.name] is str and f.metadata.get("choices"))
    ]


def _dimension(name: str, given: Any, method: str) -> tuple[Dimension | None, list[str]]:
    """One swept setting read as its field's type, or the problems with it."""
    fields = _fields()
    if name not in fields:
        return None, [f"sweep.settings.{unknown_setting(name, fields)}"]
    hint = typing.get_type_hints(RunConfig)[name]
    if name not in sweepable():
        return None, [f"sweep.settings.{name}: only numeric and choice settings are swept, and {name} is neither"]
    where = f"sweep.settings.{name}"
    if isinstance(given, Mapping):
        return _range(where, name, given, hint, method)
    listed = list(given) if isinstance(given, (list, tuple)) else [given]
    if not listed or len(listed) > MAX_VALUES:
        return None, [f"{where}: expected from 1 to {MAX_VALUES} values, got {len(listed)}"]
    values = []
    for value in listed:
        try:
            values.append(coerce(value, hint))
        except OverflowError:  # beyond any setting's range: the field's says what is expected
            return None, [f"{where} {shorten(value)}: expected {_field_range(name) or _kind(hint)}"]
        except (TypeError, ValueError):
            return None, [f"{where} {shorten(value)}: expected {_kind(hint)}"]
    if len(set(values)) < len(values):
        return None, [f"{where} lists a value twice: each point of a sweep is run once"]
    return Dimension(name, tuple(values), whole=hint is int), []


def _range(where: str, name: str, given: Mapping[str, Any], hint: Any, method: str):
    """A range with a count (its points), or search bounds (random and tpe only)."""
    if hint not in (int, float):
        return None, [f"{where}: {name} takes a list of values, not a range"]
    unknown = [k for k in given if k not in ("low", "high", "count", "scale")]
    if unknown:
        return None, [f"{where}.{_name(unknown[0])}: expected low, high, count (for a range) and scale"]
    try:
        low, high = float(given["low"]), float(given["high"])
    except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: an integer of hundreds of digits
        return None, [f"{where}: a range needs low and high numbers, e.g. {{low: 1e-5, high: 1e-4}}"]
    scale = str(given.get("scale", "linear"))
    if scale not in SCALES:
        return None, [f"{where}.scale {shorten(scale)}: expected linear or log"]
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        return None, [f"{where}: low {low:g} must be below high {high:g}"]
    if scale == "log" and low <= 0:
        return None, [f"{where}: a log scale needs low above 0, got {low:g}"]
    lo, hi = (_fields()[name].metadata.get(k) for k in ("min", "max"))
    if lo is not None and low < lo or hi is not None and high > hi:
        # every point drawn from it must be a value the setting takes (a search from 1 to 1e30 gave members no config
        # could hold, and Optuna's integers of 30 digits)
        return None, [f"{where}: low {low:g} and high {high:g} must lie within {name}'s range, {range_text(lo, hi)}"]
    if "count" not in given:
        if method == "grid":
            return None, [f"{where}: a grid needs values or a range with a count; a search range suits random or tpe"]
        return Dimension(name, None, low, high, scale == "log", whole=hint is int), []
    try:
        count = coerce(given["count"], int)
    except (TypeError, ValueError, OverflowError):
        count = 0
    if not 2 <= count <= MAX_VALUES:
        return None, [f"{where}.count {shorten(given['count'])}: expected a whole number from 2 to {MAX_VALUES}"]
    points = spaced(low, high, count, scale == "log")
    values = tuple(dict.fromkeys(round(v) for v in points)) if hint is int else tuple(points)
    return Dimension(name, values, whole=hint is int), []


def spaced(low: float, high: float, count: int, log: bool = False) -> list[float]:
    """``count`` values from ``low`` to ``high`` inclusive, evenly spaced (in log when ``log``)."""
    if log:
        a, b = math.log10(low), math.log10(high)
        return [float(f"{10 ** (a + (b - a) * i / (count - 1)):.6g}") for i in range(count)]
    return [float(f"{low + (high - low) * i / (count - 1):.6g}") for i in range(count)]


def _name(key: Any) -> str:
    """A key as a message names it: as typed when it looks like a name, else quoted and shortened."""
    text = str(key)
    return text if text.isidentifier() and len(text) <= 60 else repr_short(text)


def _field_range(name: str) -> str | None:
    """RunConfig's range for ``name`` in words ("a value from 1 to 1,000,000"), None when it has none."""
    lo, hi = (_fields()[name].metadata.get(k) for k in ("min", "max"))
    return None if lo is None and hi is None else range_text(lo, hi)


def _kind(hint: Any) -> str:
    return {int: "a whole number", float: "a number", bool: "true or false", str: "one of the setting's choices"}[hint]


def _prune(given: Any, problems: list[str]) -> Prune:
    if not given:
        return Prune()
    if not isinstance(given, Mapping):
        problems.append(f"sweep.prune: expected a mapping of rule settings, got {shorten(given)}")
        return Prune()
    defaults = {f.name: f for f in dataclasses.fields(Prune)}
    values = {}
    for key, value in given.items():
        if key not in defaults:
            problems.append(f"sweep.prune.{_name(key)}: not a pruning setting (expected one of {', '.join(defaults)})")
            continue
        kind = type(defaults[key].default)
        if key in PRUNE_BOUNDS:
            values[key] = _bounded(f"sweep.prune.{key}", value, PRUNE_BOUNDS[key], defaults[key].default, problems)
            continue
        try:
            values[key] = coerce(value, kind)
        except (TypeError, ValueError, OverflowError):
            problems.append(f"sweep.prune.{key} {shorten(value)}: expected {_kind(kind)}")
    prune = Prune(**values)
    if not 0 < prune.signal_share <= 1:
        problems.append(f"sweep.prune.signal_share {prune.signal_share:g}: expected a share above 0, at most 1")
    return prune


# --- the members ----------------------------------------------------------------------------------------------------
def member_problems(spec: SweepSpec, config: RunConfig) -> list[str]:
    """What a member's config lacks for the sweep to judge it: the held-out objective needs periodic evaluation."""
    if spec.objective.startswith("heldout/") and config.eval_steps <= 0:
        return [
            f"the objective {spec.objective} is scored by the periodic held-out evaluation, which is off: set "
            "eval_steps (e.g. 10), or name a training metric as sweep.objective"
        ]
    return []


Told = Sequence[tuple[Mapping[str, Any], float]]  # (a point, its objective) of members that finished


def points(
    spec: SweepSpec, told: Told = (), count: int | None = None, used: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The points of a sweep, each a mapping setting -> value: every combination for a grid (in the settings'
    order, the last varying fastest); for random and tpe, ``count`` points (default the sweep's members) drawn by
    Optuna's sampler under the sweep's seed, after ``told`` results (tpe learns from them; random ignores them) and
    never one of ``used`` (points of members without a result: skipped, failed, still training). The same spec,
    ``told`` and ``used`` give the same points."""
    if spec.method == "grid":
        names = [d.setting for d in spec.dimensions]
        return [
            dict(zip(names, combo, strict=True)) for combo in itertools.product(*(d.values for d in spec.dimensions))
        ]
    return _asked(spec, told, spec.members if count is None else count, used)


def startup_members(spec: SweepSpec) -> int:
    """How many members are created with the sweep: every one for grid and random; for tpe its random startup
    points, a quarter of the members and at least 2 (the rest are asked one at a time as results come in)."""
    if spec.method == "tpe":
        return min(spec.members, max(2, spec.members // 4))
    return spec.size


def leans_after(spec: SweepSpec) -> int | None:
    """How many told results TPE needs before its asked points lean toward the good ones; None for grid and random.

    Optuna's TPESampler samples at random while the study holds fewer than ``n_startup_trials`` finished trials,
    COMPLETE or PRUNED (optuna 5.1 samplers/_tpe/sampler.py ``_sample_relative`` and ``sample_independent``): here
    the members told with a result (:func:`_asked`), so a point asked after fewer results than the startup members is
    as random as theirs. (A point drawn twice within one ask is told PRUNED and counts too: in a search over few
    values TPE may lean one result early.)"""
    return startup_members(spec) if spec.method == "tpe" else None


def _asked(spec: SweepSpec, told: Told, count: int, used: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = {d.setting: _distribution(d) for d in spec.dimensions}
    if spec.method == "tpe":
        sampler = optuna.samplers.TPESampler(seed=spec.seed, n_startup_trials=startup_members(spec))
    else:
        sampler = optuna.samplers.RandomSampler(seed=spec.seed)
    study = optuna.create_study(direction="maximize" if spec.direction == "max" else "minimize", sampler=sampler)
    for point, value in told:
        study.add_trial(optuna.trial.create_trial(params=dict(point), distributions=distributions, value=value))
    for point in used:  # asked before, with no result to learn from: TPE leaves failed trials out of its model
        failed = optuna.trial.TrialState.FAIL
        study.add_trial(optuna.trial.create_trial(params=dict(point), distributions=distributions, state=failed))
    seen = {_key(p) for p, _ in told} | {_key(p) for p in used}
    found: list[dict[str, Any]] = []
    # a search over few values meets a point twice: asked again (bounded), as each point runs once
    for _ in range(20 * count):
        if len(found) == count:
            break
        trial = study.ask(distributions)
        point = {d.setting: _value(d, trial.params[d.setting]) for d in spec.dimensions}
        if _key(point) in seen:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        seen.add(_key(point))
        found.append(point)
    return found


def _distribution(d: Dimension):
    import optuna

    if d.values is not None:
        return optuna.distributions.CategoricalDistribution(list(d.values))
    if d.whole:
        return optuna.distributions.IntDistribution(math.ceil(d.low), math.floor(d.high), log=d.log)
    return optuna.distributions.FloatDistribution(d.low, d.high, log=d.log)


def _value(d: Dimension, value: Any) -> Any:
    """A sampled value as the member's config holds it: a search's float kept to 4 significant digits (1.2345e-05,
    not 1.234512345e-05: the point is read in a table)."""
    if d.values is None and not d.whole:
        return float(f"{value:.4g}")
    return value


def _key(point: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in point.items()))
