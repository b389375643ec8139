"""The actions on runs: validate a config, launch it, stop, resume, fork, clone and delete a run, list the runs and
describe one. The dashboard's buttons, the ``grpo-studio`` commands and the API (app/web/api.py) all call these; a rule
(the operator's path restrictions, custom reward code, what may be deleted) is applied here, once.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from app.actions.base import (
    ActionError,
    ConfigSource,
    FetchError,
    config_of,
    find_run,
    problems_message,
    read_mapping_of,
)
from app.actions.liveness import liveness_problem
from app.actions.reading import nothing_learned
from storage import queries
from storage.db import get_sessionmaker
from storage.summaries import RunSummary, run_summaries
from trainer import review
from trainer.config import RunConfig
from trainer.config.access import Access
from trainer.loading.hub import fetch_problem
from trainer.supervise.fork import ForkError, checkpoint_steps, fork_run, parse_settings
from trainer.supervise.run_files import RunFiles
from trainer.supervise.schedule import poll_slurm, reconcile
from trainer.supervise.slurm import SlurmError, queue_positions, where
from trainer.supervise.start import start_worker
from trainer.supervise.stop import stop_worker
from trainer.supervise.workers import LIVE, is_alive

# Caps every config this process validates (capped_steps).
MAX_STEPS_ENV = "GRPO_STUDIO_MAX_STEPS"
# How long a resume waits for the stopped worker to exit (it saves its adapter first) before it is queued anyway.
SHUTDOWN_WAIT_S = 120.0

# "queue": the dashboard's scheduler starts it; "detached": a worker starts now in the background; "here": the caller
# trains it in its own process (a Slurm run is submitted then, and the caller follows the job).
Start = Literal["queue", "detached", "here"]


@dataclass(frozen=True)
class Checked:
    """A config and what is wrong with it: ``problems`` stop a launch, ``warnings`` (valid but doubtful: read only
    for a valid config) and ``notes`` (ignored keys) don't."""

    config: RunConfig | None
    problems: list[str]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": not self.problems,
            "problems": self.problems,
            "warnings": self.warnings,
            "notes": self.notes,
            "config": None if self.config is None else self.config.to_dict(),
        }


@dataclass(frozen=True)
class Launched:
    """A run created from a valid config. ``started``: the worker's pid or Slurm job id when one was started now,
    None when it waits for the scheduler (or the caller trains it), "" when Slurm refused the job (``error`` says)."""

    run_id: int
    name: str
    started: int | str | None = None
    error: str | None = None
    kept_probe: bool = False
    notes: list[str] = field(default_factory=list)  # the config's ignored keys and (with ``warn``) its warnings

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "problems": [], "error": self.error}


def starting_config() -> RunConfig:
    """What a new run starts from: the reference recipe on a GPU machine, the offline tiny demo without one."""
    from trainer.presets import tiny_demo
    from trainer.supervise.gpu_lease import gpu_visible

    return tiny_demo() if not gpu_visible() else RunConfig()


def validate(source: ConfigSource, access: Access, name: str | None = None, warn: bool = True) -> Checked:
    """Every problem with a config under the operator's ``access`` rules (trainer.review.check: a path outside
    the allowed directories is refused before anything reads it, and custom reward code is neither imported nor
    accepted unless allowed). A valid config's warnings are read too (``warn``: they read a few rows of the data
    set)."""
    try:
        mapping, _ = read_mapping_of(source)
    except ActionError as exc:
        return Checked(None, exc.problems)
    if name:
        mapping["name"] = name
    if "sweep" in mapping:  # else a note ("ignored unknown setting") and one run of the base config would train
        return Checked(
            None, ["this config defines a sweep (its sweep: block): create it with grpo-studio sweep or /sweep"]
        )
    found = review.check(mapping, access)
    if found.config is None:
        return Checked(None, found.problems)
    try:
        config, notes = capped_steps(found.config, found.notes)
    except ActionError as exc:
        return Checked(None, exc.problems)
    # a capped config is checked as it will run (a max_steps past its range may be capped into it)
    problems = found.problems if config is found.config else review.check(config, access).problems
    warnings = review.warnings(config) if warn and not problems else []
    return Checked(config, problems, warnings, notes)


def capped_steps(config: RunConfig, notes: list[str]) -> tuple[RunConfig, list[str]]:
    """The config with max_steps capped at ``$GRPO_STUDIO_MAX_STEPS`` when that is set (and a note saying so): the
    docs' examples run in the test suite that way (tests/docs/test_doc_blocks.py), and so does a quick try of a long
    recipe."""
    cap = os.environ.get(MAX_STEPS_ENV, "").strip()
    if not cap:
        return config, notes
    if not cap.isdigit() or int(cap) < 1:
        raise ActionError(f"{MAX_STEPS_ENV}={cap[:20]!r}: expected a whole number of steps, at least 1")
    if config.max_steps <= int(cap):
        return config, notes
    note = f"max_steps {config.max_steps} capped at {cap} by {MAX_STEPS_ENV}"
    return replace(config, max_steps=int(cap)), [*notes, note]


def launch(
    source: ConfigSource,
    access: Access,
    *,
    name: str | None = None,
    start: Start = "queue",
    probed: dict | None = None,
    warn: bool = False,
) -> Launched:
    """Create a run from a valid config (ActionError with every problem otherwise, and nothing created). The probe's
    samples become its step 0 when ``probed`` (what app.actions.jobs.probe returned) is of this very config, and its
    share of groups that scored alike its step-0 ``probe/frac_reward_zero_std`` (trainer.insight.spread). The
    config is checked once, here: ``warn`` also reads its warnings into the result's notes (the command line's)."""
    checked = validate(source, access, name=name, warn=warn)
    if checked.problems or checked.config is None:
        raise ActionError(problems_message(checked.problems), checked.problems)
    config = checked.config
    if start != "queue" and config.executor != "slurm":
        # a worker starts now, here: what it can't fetch is refused before a run exists (a queued run hears the same
        # sentence from its worker within seconds; a Slurm node may reach the hub when this one does not)
        if problem := fetch_problem(config.model_name_or_path, config.dataset_name):
            raise FetchError(problem)
    same = probed is not None and {**probed["config"], "name": config.name} == config.to_dict()
    with get_sessionmaker().begin() as session:
        run = queries.create_run(session, config.name, config.to_dict(), total_steps=config.max_steps)
        run_id = run.id
        if same:
            from trainer.insight.spread import PROBE_KEY
            from trainer.probe.report import ProbeReport

            report = ProbeReport.from_dict(probed["report"])
            queries.add_sample_rows(session, report.sample_rows(run_id))
            # what the probe found, beside its samples: the run's "nothing can be learned" says whether it agreed
            shares = {PROBE_KEY: report.zero_std_share}
            queries.add_metric_rows(session, queries.metric_rows(run_id, 0, shares, time.time()))
        now = start == "detached" or (start == "here" and config.executor == "slurm")
        started = start_worker(session, run) if now else None
    refused = now and started is None
    return Launched(
        run_id,
        config.name,
        "" if refused else started,
        refusal(run_id) if refused else None,
        same,
        checked.notes + checked.warnings,
    )


def refusal(run_id: int) -> str:
    """Why a worker that was to start now did not (Slurm refused the job), from the run's row: its first line."""
    with get_sessionmaker().begin() as session:
        error = queries.get_run(session, run_id).error or "Slurm refused the job"
    return error.strip().splitlines()[0]


def stop(run_id: int) -> bool:
    """Ask a live run to stop at its next step (True: its worker was signalled); a run waiting for a worker is simply
    marked stopped (False). ActionError for a run that isn't live, or when Slurm doesn't answer (exit 1)."""
    try:
        with get_sessionmaker().begin() as session:
            run = find_run(session, run_id)
            if run.status not in LIVE:
                raise ActionError(f"run {run.id} is {run.status}: nothing to stop")
            return stop_worker(session, run)
    except SlurmError as exc:  # nothing was changed: the transaction rolled back
        raise ActionError(
            f"run {run_id}: could not reach Slurm ({exc}); try again when it answers", exit_code=1
        ) from None


def start_now(run_id: int) -> int | str:
    """Start a queued run's worker now, in the background, without waiting for the scheduler (``fork --detach``):
    its pid, its Slurm job id, or "" when Slurm refused the job (:func:`refusal` says why)."""
    with get_sessionmaker().begin() as session:
        run = find_run(session, run_id)
        if run.status != "queued":
            raise ActionError(f"run {run.id} is {run.status}: only a queued run starts")
        started = start_worker(session, run)
    return "" if started is None else started


def resume(run_id: int, start: Start = "queue", wait_s: float = SHUTDOWN_WAIT_S) -> int | str | None:
    """Continue a stopped or failed run from its latest checkpoint: queued for the scheduler, started now, or left for
    the caller to train (see :data:`Start`). A worker that is still shutting down (a stop was just asked) is waited
    for, up to ``wait_s``, rather than refused. Returns what :func:`launch`'s ``started`` holds."""
    deadline = time.monotonic() + wait_s
    while True:
        with get_sessionmaker().begin() as session:
            run = find_run(session, run_id)
            if not run.status.resumable:
                raise ActionError(f"run {run.id} is {run.status}: only stopped or failed runs resume")
            # a worker that trained in this very process (a foreground run before) is not one still exiting
            if not is_alive(run) or (run.pid == os.getpid() and not run.slurm_job_id):
                on_slurm = RunConfig.from_stored(run.config).executor == "slurm"
                if start == "queue":
                    queries.requeue_run(session, run)
                    queries.add_log(session, run.id, queries.RESUME_REQUESTED)
                    return None
                now = start == "detached" or on_slurm
                started = start_worker(session, run) if now else None
                return "" if now and started is None else started
        if time.monotonic() > deadline:
            raise ActionError(f"run {run_id}'s worker is still saving and exiting after {wait_s:.0f} s; try again soon")
        time.sleep(0.5)


def fork(
    run_id: int,
    step: int,
    settings: dict[str, Any] | list[str] | str,
    access: Access,
    name: str | None = None,
) -> int:
    """A new run from the run's checkpoint at ``step`` with changed settings (a mapping, ``key=value`` lines or a
    list of them), under the operator's ``access`` rules as a launch is; returns the new run's id (it is queued)."""
    if run_id in (None, "") or step in (None, ""):
        raise ActionError("pick a run and one of its saved checkpoints")
    try:
        if isinstance(settings, str):
            settings = [line for line in settings.splitlines() if line.strip()]
        changes = parse_settings(settings) if isinstance(settings, list) else dict(settings)
        if refused := access.change_problems(changes):
            raise ForkError("; ".join(refused))
        return fork_run(int(run_id), int(step), changes, name, check_rewards=access.allow_custom_rewards)
    except ForkError as exc:
        raise ActionError(str(exc)) from None


def clone(run_id: int) -> RunConfig:
    """The config of a run, renamed as a copy (``<name>-copy``), to edit and launch."""
    with get_sessionmaker().begin() as session:
        run = find_run(session, run_id)
        config, _ = config_of(dict(run.config))
    config.name = f"{config.name}-copy"
    return config


def delete(run_id: int, within_sweep: bool = False) -> str:
    """Delete a run that is not live, with its metrics, samples, log and files; returns its name. A member of an
    active sweep is refused (its sweep would ask another point in its place: stop the sweep first), unless
    ``within_sweep`` (the sweep itself is being deleted: app.actions.sweep_control)."""
    with get_sessionmaker().begin() as session:
        run = find_run(session, run_id)
        if run.status in LIVE:
            raise ActionError(f"run {run.id} is {run.status}: stop it before deleting it")
        if run.sweep_id is not None and not within_sweep and queries.sweep_active(session, run.sweep_id):
            raise ActionError(
                f"run {run.id} is a member of sweep {run.sweep_id}, which is active: deleting it would make the sweep "
                f"ask another point in its place; stop the sweep first (grpo-studio stop_sweep {run.sweep_id})"
            )
        output_dir, name = run.output_dir, run.name
        queries.delete_run(session, run.id)
    if output_dir:
        RunFiles(Path(output_dir)).remove()
    return name


# --- reading the list -------------------------------------------------------------------------------------------------
def runs(search: str | None = None, *, reconciled: bool = False) -> list[RunSummary]:
    """Every run (newest first), or those whose name contains ``search`` or whose id it is. ``reconciled``: runs
    whose worker died are marked so first (one squeue for the live Slurm jobs, before the transaction), as
    ``grpo-studio runs`` and ``/runs`` list them; the dashboard's own ticks leave that to its scheduler, which
    reconciles at every pass (trainer.supervise.schedule)."""
    if reconciled:
        states = poll_slurm()
        with get_sessionmaker().begin() as session:
            reconcile(session, states)
    with get_sessionmaker().begin() as session:
        return run_summaries(session, search=search)


def run_errors(run_ids: list[int]) -> dict[int, str]:
    """Each of these runs' error, its last line (the runs list shows one line a run); a run without one is left out."""
    with get_sessionmaker().begin() as session:
        errors = {r.id: r.error for r in queries.list_runs(session) if r.id in run_ids}
    return {i: e.strip().splitlines()[-1] for i, e in errors.items() if e and e.strip()}


def checkpoints(run_id: int) -> list[int]:
    """The steps of the run's complete checkpoints (what it can be forked at), ascending; none for a missing run."""
    return checkpoint_steps(int(run_id))


def dataset_names() -> set[str]:
    """The data sets the runs' configs name, as written there (an upload a run trains on is never removed)."""
    with get_sessionmaker().begin() as session:
        return {RunConfig.from_stored(r.config).dataset_name for r in queries.list_runs(session)}


def places(summaries: list[RunSummary]) -> dict[int, str]:
    """Where each run is ("local", a host, "slurm 12, queue #2 (Resources)"): one squeue when a run waits in
    Slurm's queue."""
    waiting = any(s.slurm_job_id and s.status == "queued" for s in summaries)
    positions = queue_positions() if waiting else {}
    return {s.id: where(s.host, s.slurm_job_id, str(s.status), positions) for s in summaries}


def run_json(summary: RunSummary, place: str = "") -> dict[str, Any]:
    """A run of the list as JSON-able values (the API's ``/runs`` and ``/run``)."""
    problem = liveness_problem(summary)
    return {
        "id": summary.id,
        "name": summary.name,
        "status": str(summary.status),
        "step": summary.current_step,
        "total_steps": summary.total_steps,
        "last_reward": summary.last_reward,
        "last_kl": summary.last_kl,
        "model": summary.model,
        "dataset": summary.dataset,
        "where": place,
        "started_at": summary.started_at.isoformat() if summary.started_at else None,
        "finished_at": summary.finished_at.isoformat() if summary.finished_at else None,
        "health": problem[1] if problem else None,
        "heldout": summary.evaluation,
        "sweep_id": summary.sweep_id,
    }


def run_detail(run_id: int) -> dict[str, Any]:
    """One run as JSON-able values: what the list says, its config, its error and, when no group of any step had a
    reward spread, the sentence that says nothing can be learned (``nothing_learned``, else None; the API's
    ``/run``)."""
    with get_sessionmaker().begin() as session:
        run = find_run(session, run_id)
        config, error = dict(run.config or {}), run.error
        (summary,) = [s for s in run_summaries(session, search=str(run.id)) if s.id == run.id]
    flat = nothing_learned(summary.id)
    return {
        **run_json(summary, places([summary])[summary.id]),
        "config": config,
        "error": error,
        "nothing_learned": flat.sentence if flat else None,
    }
