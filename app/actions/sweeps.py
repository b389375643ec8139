"""The actions on sweeps (issue 41): create one from a config with a ``sweep:`` block (or a grid given on the command
line), and read the sweeps and one sweep's table.

A sweep is created whole or not at all: its definition is read (trainer/config/sweep.py), the base config and every
member's config are checked with the review like any run's (app.actions.runs.validate, under the operator's access
rules), and, when the sweep's ``prune.probe`` is on, each member's point is probed (app.actions.jobs.probe: a child
process with the base model, seconds on the tiny one) before anything is written. Then the sweep's row and one queued
run per member are written in one transaction; a member the probe found wasted is written already stopped, with the
probe's reason, so the table shows every point. A TPE sweep starts with its random startup members only; the
scheduler's pass asks each next point once their results are in (trainer/sweeps/tending.py). The members queue like any run: the dashboard's scheduler starts them
under its concurrency limit, and tends them (trainer/sweeps/tending.py).

Why the probe runs here and not when the scheduler first takes a member: the scheduling pass holds the lock that
starting runs takes (storage.queries.lock_scheduling) and runs every 2 s in the dashboard's thread, where a model
loading for seconds to minutes would hold every other start; here the user who asked for the sweep waits for it, and
sees the skipped points at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.actions.base import ActionError, ConfigSource, problems_message, read_mapping_of
from app.actions.runs import validate
from storage import queries
from storage import sweeps as sweep_rows
from storage.db import get_sessionmaker
from trainer.config import RunConfig
from trainer.config import sweep as sweeps_config
from trainer.config.access import Access
from trainer.sweeps.prune import Stop, probe_skip


@dataclass(frozen=True)
class Created:
    """A member created: its run, its point, and why the probe skipped it (None: queued to train)."""

    run_id: int
    name: str
    point: dict[str, Any]
    skipped: str | None = None


@dataclass(frozen=True)
class Swept:
    """A sweep created, with its members in the order of its points, and notes (ignored keys of the config)."""

    sweep_id: int
    name: str
    method: str
    objective: str
    direction: str
    members: list[Created]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "sweep_id": self.sweep_id,
            "name": self.name,
            "method": self.method,
            "objective": self.objective,
            "direction": self.direction,
            "members": [vars(m) for m in self.members],
            "problems": [],
        }


def sweep(
    source: ConfigSource,
    access: Access,
    grid: str | Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    probe: bool = True,
    prompts: int = 8,
    on_probe: Callable[[ProbeNews], None] | None = None,
) -> Swept:
    """Create a sweep from a config whose ``sweep:`` block (or ``grid``: the CLI's ``"beta=0,0.04 lr=..."``, or a
    mapping of settings to values) says what varies; ActionError with every problem, and nothing created, when the
    definition, the base config or any member's config is invalid, or a probe cannot run. ``probe``: False skips the
    probe rule whatever the sweep says (the caller probed already); ``on_probe`` hears how far the probes are
    (:class:`ProbeNews`) before the first and as each finishes."""
    mapping, _ = read_mapping_of(source)
    base, block = sweeps_config.split(mapping)
    if name:
        base["name"] = name
    if block is None and not grid:
        raise ActionError("the config has no sweep: block and no grid was given: say what to sweep (docs/sweeps.md)")
    try:
        settings = sweeps_config.parse_grid(grid) if isinstance(grid, str) else grid
        spec = sweeps_config.parse(block, settings)
    except sweeps_config.SweepError as exc:
        raise ActionError(problems_message(exc.problems), exc.problems) from None
    checked = validate(base, access, warn=False)
    if checked.problems or checked.config is None:
        raise ActionError(problems_message(checked.problems), checked.problems)
    base_config = checked.config
    members = _members(spec, base_config, access)
    skips = {}
    if probe and spec.prune.probe:
        configs, points = [c for _, c in members], [p for p, _ in members]
        skips = probe_verdicts(configs, access, prompts, points, on_probe)
    with get_sessionmaker().begin() as session:
        row = sweep_rows.create_sweep(
            session, base_config.name, spec.to_dict(), base_config.to_dict(), spec.objective, spec.direction
        )
        created = []
        for index, (point, config) in enumerate(members):
            run = queries.create_run(
                session, config.name, config.to_dict(), config.max_steps, sweep_id=row.id, sweep_point=point
            )
            stop = skips.get(index)
            if stop is not None:
                queries.sweep_stopped(session, run, stop.reason)
            created.append(Created(run.id, config.name, point, stop.reason if stop else None))
        sweep_id = row.id
    return Swept(sweep_id, base_config.name, spec.method, spec.objective, spec.direction, created, checked.notes)


def _members(spec: sweeps_config.SweepSpec, base: RunConfig, access: Access) -> list[tuple[dict, RunConfig]]:
    """Each point with its member's config, every one checked (ActionError naming each member's problems)."""
    found, each = [], []
    for index, point in enumerate(sweeps_config.points(spec, count=sweeps_config.startup_members(spec)), 1):
        member = {**base.to_dict(), **point, "name": f"{base.name}-{index}"}
        checked = validate(member, access, warn=False)
        extra = sweeps_config.member_problems(spec, checked.config) if checked.config else []
        each.append((index, point, checked.problems + extra))
        if checked.config is not None:
            found.append((point, checked.config))
    # a problem every member has is the sweep's (the objective needs eval_steps): said once, not once a member
    shared = [p for p in each[0][2] if all(p in found_ for _, _, found_ in each)] if each else []
    problems = shared + [
        f"member {index} ({point_text(point)}): {p}" for index, point, found_ in each for p in found_ if p not in shared
    ]
    if problems:
        raise ActionError(problems_message(problems), problems)
    return found


def point_text(point: Mapping[str, Any]) -> str:
    """A point as a table shows it: ``beta=0.04 learning_rate=5e-05``."""
    return " ".join(
        f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in point.items()
    )


@dataclass(frozen=True)
class ProbeFound:
    """What one member's probe found: its verdict ("ok", "risky" or "wasted"), the share of its prompts whose group
    of answers scored apart (what the run learns from), and why the sweep skips it (None: it trains)."""

    verdict: str
    signal_share: float
    skipped: str | None = None


@dataclass(frozen=True)
class ProbeNews:
    """How far a sweep's probes are, for whoever waits on them: the points in the order they are probed, and what
    the probes of the first ``len(found)`` of them found. The point probed now is ``points[len(found)]``."""

    points: list[dict[str, Any]]
    found: list[ProbeFound] = field(default_factory=list)


def probe_verdicts(
    configs: list[RunConfig],
    access: Access,
    prompts: int,
    points: list[dict[str, Any]] | None = None,
    on_probe: Callable[[ProbeNews], None] | None = None,
) -> dict[int, Stop]:
    """The probe rule over each member's config: the index of each member the probe found wasted, with its stop.
    The probes are app.actions.jobs.probe_each's (one child process for all, in the dashboard's line of probes).
    ``on_probe`` hears the news of ``points`` (the members' points) before the first probe and after each."""
    from app.actions.jobs import probe_each

    news = ProbeNews(list(points or [{} for _ in configs]))

    def heard(index: int, report: Any) -> None:
        if on_probe is None or index < len(news.found):
            return
        stop = probe_skip(report.verdict, [r.message for r in report.risks if r.fatal])
        news.found.append(ProbeFound(report.verdict, report.signal_share, stop.reason if stop else None))
        on_probe(ProbeNews(news.points, list(news.found)))

    if on_probe is not None:
        on_probe(ProbeNews(news.points))
    skips = {}
    for index, report in enumerate(probe_each(configs, access, prompts, heard)):
        heard(index, report)  # one the child's file did not show while it ran (its last write) is heard here
        stop = probe_skip(report.verdict, [r.message for r in report.risks if r.fatal])
        if stop is not None:
            skips[index] = stop
    return skips


# --- reading --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemberRow:
    """One member in a sweep's table."""

    run_id: int
    name: str
    point: dict[str, Any]
    status: str
    step: int
    total_steps: int
    objective_now: float | None
    objective_best: float | None
    reward: float | None
    kl: float | None
    stop_reason: str | None
    error: str | None
    best: bool = False  # the member whose objective at its last evaluation is the sweep's best
    seconds: float | None = None  # how long it has trained (to now while it trains); None before it started


@dataclass(frozen=True)
class SweepSummary:
    """A sweep as the list shows it: what it searches, how far it is, and its best member so far."""

    id: int
    name: str
    state: str
    method: str
    objective: str
    direction: str
    members: int
    ended: int
    best_run_id: int | None
    best_value: float | None
    created_at: datetime | None


@dataclass(frozen=True)
class SweepTable:
    """One sweep: its summary, its definition and one row per member."""

    summary: SweepSummary
    definition: dict[str, Any]
    rows: list[MemberRow]
    # each member's objective at each logged step, (step, value) oldest first, by run id: the Sweeps view's curves
    # (not in to_json: /metrics reads a member's whole series)
    curves: dict[int, list[tuple[int, float]]] = field(default_factory=dict)
    leaning: str = ""  # a TPE sweep's sentence on whether its asked points lean on results yet (tpe_note)

    def to_json(self) -> dict[str, Any]:
        return {
            **summary_json(self.summary),
            "definition": self.definition,
            "rows": [vars(r) for r in self.rows],
            "leaning": self.leaning,
        }


def tpe_note(definition: Mapping[str, Any], told: int) -> str:
    """Whether a TPE sweep's asked points lean toward the good ones yet, after ``told`` results (members ended
    with a trained objective), in one sentence; empty for grid and random (trainer.config.sweep.leans_after)."""
    try:
        leans = sweeps_config.leans_after(sweeps_config.parse(dict(definition)))
    except sweeps_config.SweepError:  # a definition stored by another version
        return ""
    if leans is None:
        return ""
    if told < leans:
        return (
            f"TPE draws at random until it is told {leans} results (members that ended with a trained objective): "
            f"{told} so far, so a point asked now is as random as the startup members'."
        )
    return f"TPE leans toward the good points: it is told {told} results (it draws at random until {leans})."


def _table(session, row) -> SweepTable:
    members = sweep_rows.members(session, row)
    valued = [m for m in members if m.objective_now is not None]
    pick = max if row.direction == "max" else min
    best = pick(valued, key=lambda m: m.objective_now) if valued else None
    rows = [
        MemberRow(
            m.run_id,
            m.name,
            m.point,
            str(m.status),
            m.current_step,
            m.total_steps,
            m.objective_now,
            m.objective_best(row.direction),
            m.reward,
            m.kl,
            m.stop_reason,
            m.error,
            best is not None and m.run_id == best.run_id,
            _seconds(m.started_at, m.finished_at),
        )
        for m in members
    ]
    summary = SweepSummary(
        row.id,
        row.name,
        row.state,
        str(row.definition.get("method", "")),
        row.objective,
        row.direction,
        len(members),
        sum(1 for m in members if m.status.terminal),
        best.run_id if best else None,
        best.objective_now if best else None,
        row.created_at,
    )
    told = sum(1 for m in members if m.status.terminal and m.objective)
    curves = {m.run_id: list(m.objective) for m in members}
    return SweepTable(summary, dict(row.definition), rows, curves, tpe_note(row.definition, told))


def _seconds(started: datetime | None, finished: datetime | None) -> float | None:
    """Seconds from ``started`` to ``finished`` (to now while unfinished); the database hands back naive UTC."""
    if started is None:
        return None
    start = started if started.tzinfo else started.replace(tzinfo=UTC)
    end = finished or datetime.now(UTC)
    end = end if end.tzinfo else end.replace(tzinfo=UTC)
    return max(0.0, (end - start).total_seconds())


def sweepable() -> list[str]:
    """The settings a sweep may vary (trainer.config.sweep.sweepable), for the New run form's Sweep section."""
    return sweeps_config.sweepable()


def sweeps() -> list[SweepSummary]:
    """Every sweep, newest first."""
    with get_sessionmaker().begin() as session:
        return [_table(session, row).summary for row in sweep_rows.list_sweeps(session)]


def sweep_detail(sweep_id: int) -> SweepTable:
    """One sweep's table; ActionError for an id that names no sweep."""
    try:
        wanted = int(sweep_id)
    except (TypeError, ValueError):
        raise ActionError(f"sweep id {sweep_id!r}: expected a whole number, as grpo-studio sweeps lists it") from None
    with get_sessionmaker().begin() as session:
        row = sweep_rows.get_sweep(session, wanted)
        if row is None:
            raise ActionError(f"no sweep with id {wanted}")
        return _table(session, row)


def summary_json(summary: SweepSummary) -> dict[str, Any]:
    """A sweep of the list as JSON-able values (the API's ``/sweeps``)."""
    values = dict(vars(summary))
    values["created_at"] = summary.created_at.isoformat() if summary.created_at else None
    return values
