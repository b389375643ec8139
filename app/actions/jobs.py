"""The actions that load a model: probe a config before training, evaluate a run on held-out problems, export its
adapter (a zip, merged into the base, pushed to the Hub) and its metrics (CSV or Parquet). Torch is imported by the
trainer functions these call, or by the child processes they start, never at import time."""

from __future__ import annotations

import collections
import contextlib
import csv
import errno
import itertools
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import app.actions.arguments as arguments  # the module, not the package: no import circle through app.actions
from app.actions.base import ActionError, ConfigSource, problems_message
from app.actions.reading import metrics
from app.actions.runs import validate
from storage import queries
from storage.db import get_sessionmaker, new_export_dir
from storage.models import RunStatus
from trainer.config import RunConfig
from trainer.config.access import Access

METRIC_FORMATS = (".csv", ".parquet")


class ProbeQueue:
    """A dashboard's probes, first come first served, ``slots`` at a time: each is a child process loading the
    model, so a burst of ``/probe`` calls waits in line (in this process: a probe is a request that waits for its
    answer) instead of loading a model per call. A waiting probe costs a waiting request thread; each one ahead ends
    at its timeout (trainer.probe.job.timeout_s), so the wait has an end."""

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        self.running = 0
        self.waiting: collections.deque[int] = collections.deque()
        self._tickets = itertools.count(1)
        self._changed = threading.Condition()

    def behind(self, ticket: int) -> str | None:
        """What the probe holding ``ticket`` waits for, in words, or None when it may start (call under the lock)."""
        ahead = self.waiting.index(ticket)
        if ahead == 0 and self.running < self.slots:
            return None
        running = f"{self.running} running probe{'s' * (self.running != 1)}"
        waiting = f" and {ahead} waiting before it" if ahead else ""
        return f"queued behind {running}{waiting}: {self.slots} at a time ({PROBE_SLOTS_VARIABLE})"

    @contextlib.contextmanager
    def turn(self, on_queued: Callable[[str], None] | None = None):
        """Wait for this probe's turn (``on_queued`` hears once what it waits for, when it has to wait), hold a
        slot while the block runs, then hand it to the next in line."""
        with self._changed:
            ticket = next(self._tickets)
            self.waiting.append(ticket)
            told = self.behind(ticket)
        if told and on_queued:
            on_queued(told)
        with self._changed:
            try:
                self._changed.wait_for(lambda: self.behind(ticket) is None)
            finally:
                self.waiting.remove(ticket)
            self.running += 1
            self._changed.notify_all()  # the next in line may take another free slot
        try:
            yield
        finally:
            with self._changed:
                self.running -= 1
                self._changed.notify_all()


PROBE_SLOTS_VARIABLE = "GRPO_STUDIO_PROBE_SLOTS"
_SLOTS = os.environ.get(PROBE_SLOTS_VARIABLE, "")
PROBES = ProbeQueue(int(_SLOTS) if _SLOTS.strip().isdigit() else 1)


def gpu_busy() -> str | None:
    """A message when a training run or another process holds the GPU a probe, an evaluation or Compare would load
    onto, else None (trainer.supervise.gpu_lease.gpu_busy)."""
    from trainer.supervise import gpu_lease

    if not gpu_lease.gpu_visible():
        return None
    with get_sessionmaker().begin() as session:
        return gpu_lease.gpu_busy(session)


@dataclass(frozen=True)
class Probed:
    """A probe's report, and what :func:`app.actions.runs.launch` needs to keep its samples as the run's step 0."""

    report: Any  # trainer.probe.report.ProbeReport
    kept: dict

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.report.verdict, "text": self.report.to_text(), "report": self.kept["report"]}


def probe(
    source: ConfigSource,
    access: Access,
    prompts: int = 8,
    here: bool = False,
    log=None,
    on_queued: Callable[[str], None] | None = None,
) -> Probed:
    """Sample and score a few groups of a valid config with the base model, before any training: in a child process
    (the dashboard: torch stays out of it, an out-of-memory costs the child), or ``here`` (the command line, ``log``
    hearing about progress). Probes in the dashboard wait in line for one another (:data:`PROBES`; ``on_queued``
    hears what one waits for) and end at their timeout (trainer.probe.job.timeout_s)."""
    prompts = arguments.whole("prompts", prompts, *arguments.PROBE_PROMPTS)
    checked = validate(source, access)
    if checked.problems or checked.config is None:
        raise ActionError(problems_message(checked.problems), checked.problems)
    if busy := gpu_busy():
        raise ActionError(busy, exit_code=1)
    if here:
        from trainer.probe.sampling import run_probe

        report = run_probe(checked.config, prompts, log=log)
    else:
        from trainer.probe.job import ProbeError, probe_in_child, timeout_s

        try:
            with PROBES.turn(on_queued):
                report = probe_in_child(checked.config, prompts, timeout=timeout_s())
        except ProbeError as exc:
            raise ActionError(str(exc), exit_code=1) from None
    return Probed(report, {"config": checked.config.to_dict(), "report": report.to_dict()})


def probe_each(
    configs: list[RunConfig], access: Access, prompts: int = 8, on_report: Callable[[int, Any], None] | None = None
) -> list[Any]:
    """The probe reports (trainer.probe.report.ProbeReport) of valid ``configs``, a sweep's members, in order: as
    :func:`probe` in the dashboard, but one child process for all of them, so its imports are paid once, in one turn
    of the line of probes; ``on_report(index, report)`` hears each as it is written. A config with problems, or a
    probe that fails, raises :class:`ActionError` naming its member ("member 2: ...")."""
    from trainer.probe.job import ProbeError, probe_each_in_child, timeout_s

    prompts = arguments.whole("prompts", prompts, *arguments.PROBE_PROMPTS)
    checked = []
    for index, config in enumerate(configs):
        found = validate(config, access)
        if found.problems or found.config is None:
            raise ActionError(f"member {index + 1}: {problems_message(found.problems)}", found.problems)
        checked.append(found.config)
    if busy := gpu_busy():
        raise ActionError(busy, exit_code=1)
    try:
        with PROBES.turn():
            return probe_each_in_child(checked, prompts, timeout=timeout_s(), on_report=on_report)
    except ProbeError as exc:
        raise ActionError(f"member {exc.index + 1}: the probe could not run ({exc})", exit_code=1) from None


def evaluate(
    run_id: int,
    adapter: str = "final",
    k: int = 200,
    samples: int = 4,
    here: bool = False,
    on_answers: Callable[[int, int], None] | None = None,
    announce: Callable[[], None] | None = None,
) -> Any:
    """Score base and tuned on up to ``k`` held-out problems (greedy, then ``samples`` sampled answers each): as a
    background job whose id is returned (the dashboard, the API), or ``here``, returning the results (the command
    line). The result is stored on the run either way (the Runs table's held-out column). ``announce`` is called once
    the run and its adapter are found, before the model loads (the command line says what it is about to do then,
    not before refusing a run that doesn't exist)."""
    from trainer.evaluation.evaluate import EvaluationError
    from trainer.evaluation.run_lookup import RunLookupError

    if run_id in (None, "") or not adapter:
        raise ActionError("pick a run and a checkpoint")
    run_id, adapter = arguments.run_id(run_id), arguments.text("adapter", adapter, 40)
    k, samples = (
        arguments.whole("k", k, *arguments.EVAL_K),
        arguments.whole("samples", samples, *arguments.EVAL_SAMPLES),
    )
    try:
        if here:
            from trainer.evaluation.evaluate import evaluate_run
            from trainer.evaluation.run_lookup import run_adapter

            run_adapter(int(run_id), adapter)  # torch-free: a missing run or adapter is refused first
            if announce:
                announce()

            return evaluate_run(int(run_id), int(k), int(samples), adapter, on_answers=on_answers)
        if busy := gpu_busy():
            raise ActionError(busy, exit_code=1)
        from trainer.evaluation.eval_job import start_evaluation

        return start_evaluation(int(run_id), adapter, int(k), int(samples))
    except (EvaluationError, RunLookupError) as exc:
        raise ActionError(str(exc)) from None


def evaluation_json(evaluation_id: int) -> dict[str, Any]:
    """Where an evaluation job is, as JSON-able values (the API's ``/evaluate`` answer): its status, what it is
    queued behind while it waits, its progress and its error."""
    evaluation_id = arguments.run_id(evaluation_id, "evaluation_id")
    with get_sessionmaker().begin() as session:
        return _evaluation_json(session, queries.get_evaluation(session, evaluation_id))


def latest_evaluation_json(run_id: int) -> dict[str, Any] | None:
    """:func:`evaluation_json` of the run's newest evaluation (the API's ``/run``), None when it has none; a job
    whose process died without a word reads as failed (trainer.evaluation.eval_job.evaluation_state)."""
    from trainer.evaluation.eval_job import evaluation_state

    row = evaluation_state(arguments.run_id(run_id))
    if row is None:
        return None
    with get_sessionmaker().begin() as session:
        return _evaluation_json(session, queries.get_evaluation(session, row.id))


def latest_evaluation(run_id: int) -> tuple[Any, str | None]:
    """The run's newest evaluation row (None when it has none; a job whose process died without a word reads as
    failed: trainer.evaluation.eval_job.evaluation_state) and, while it is queued, what it waits for in words."""
    from trainer.evaluation.eval_job import evaluation_state, queue_state

    row = evaluation_state(int(run_id))
    return row, queue_state(row.id) if row is not None and row.status == RunStatus.QUEUED else None


def stop_evaluation(run_id: int) -> bool:
    """Ask the run's queued or running evaluation job to stop; True if one was signalled."""
    from trainer.evaluation.eval_job import stop_evaluation

    return stop_evaluation(int(run_id))


def heldout_origin(record: dict) -> str:
    """Where an evaluation's problems came from, in words, from the record stored with its results
    (trainer.loading.heldout.describe_record)."""
    from trainer.loading.heldout import describe_record

    return describe_record(record)


def _evaluation_json(session, row) -> dict[str, Any]:
    from trainer.evaluation.eval_job import queued_behind

    if row is None:
        raise ActionError("no such evaluation")
    return {
        "evaluation_id": row.id,
        "run_id": row.run_id,
        "adapter": row.adapter,
        "status": str(row.status),
        "queued_behind": queued_behind(session, row) if row.status == RunStatus.QUEUED else None,
        "done": row.done,
        "total": row.total,
        "error": row.error,
    }


def export(
    run_id: int,
    adapter: str = "final",
    *,
    zip_to: str | Path | None = None,
    merge_into: str | Path | None = None,
    push_to: str | None = None,
    token: str | None = None,
    metrics_to: str | Path | None = None,
) -> list[str]:
    """Write what was asked: the adapter as a zip (with its model card), merged into the base model, pushed to a Hub
    repo (the merged model when ``merge_into`` is given too), the metrics as CSV or Parquet. Returns one line per
    thing written."""
    if not (zip_to or merge_into or push_to or metrics_to):
        raise ActionError("nothing to export: ask for a zip, a merged model, a Hub repo or a metrics file")
    if metrics_to is not None and Path(metrics_to).suffix.lower() not in METRIC_FORMATS:
        raise ActionError(f"{metrics_to}: a metrics file ends in .csv or .parquet")
    done = []
    if metrics_to is not None:
        rows = write_metrics(metrics(run_id), Path(metrics_to))
        done.append(f"metrics ({rows} steps) written to {metrics_to}")
    if not (zip_to or merge_into or push_to):
        return done
    if push_to is not None:
        token = (token or "").strip() or os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
        if not token:
            raise ActionError(
                "paste a Hugging Face token with write access into the token box (or start the dashboard with HF_TOKEN set)"
            )
    from trainer.evaluation.run_lookup import RunLookupError, run_adapter
    from trainer.export.adapter import merge, push, shareable_adapter, zip_adapter

    try:
        config, adapter_dir = run_adapter(int(run_id), adapter or "final")
        folder = shareable_adapter(int(run_id), config, adapter_dir, new_export_dir() / "adapter")
        if zip_to:
            done.append(f"adapter zipped to {zip_adapter(folder, Path(zip_to))}")
        if merge_into:
            folder = merge(config, adapter_dir, Path(merge_into))
            done.append(f"merged model saved to {folder}")
        if push_to:
            done.append(f"pushed to {push(folder, push_to.strip(), token)}")
    except RunLookupError as exc:  # ExportError included
        raise ActionError(str(exc)) from None
    return done


def write_metrics(table: dict[str, list], path: Path) -> int:
    """Write metric columns (:func:`app.actions.reading.metrics`) as CSV or Parquet; returns the rows written.

    The table is written beside ``path`` and moved over it once whole, so a full disk or a kill mid-write leaves
    the file that was there (or none) and never half a table that reads as a shorter run; a link at ``path`` is
    replaced, not written through, and a file replaced keeps its mode. Where nothing can be put beside it (a folder
    the user may not write to, a file bind-mounted into a container) the file is written in place, as a plain write
    would. A destination that can't be written is an :class:`ActionError` in one sentence."""
    if path.is_dir():
        raise ActionError(f"{path} is a directory: name a file in it, ending in .csv or .parquet")
    parquet = path.suffix.lower() == ".parquet"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_partials(path)
        partial = path.with_name(f"{_partial_prefix(path)}{os.getpid()}-{secrets.token_hex(4)}.partial")
        out = open(partial, "xb" if parquet else "x", **({} if parquet else {"newline": ""}))  # noqa: SIM115
    except OSError as exc:
        if _in_place(exc, path):
            return _write_in_place(table, path, parquet)
        raise ActionError(f"{path}: can't write a metrics file there ({_reason(exc)})") from None
    except ValueError as exc:  # a NUL in the path
        raise ActionError(f"{path}: can't write a metrics file there ({_reason(exc)})") from None
    try:
        with out:
            _write_table(table, out, parquet)
            out.flush()
            try:
                os.fsync(out.fileno())
            except OSError as exc:  # some FUSE mounts can't sync a file: the replace below still lands whole
                if exc.errno != errno.EINVAL:
                    raise
        _keep_mode(path, partial)
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        if _in_place(exc, path):
            return _write_in_place(table, path, parquet)
        raise ActionError(
            f"{path}: the metrics file could not be written ({_reason(exc)}); nothing was written there"
        ) from None
    return len(table["step"])


# what a folder or a mount answers when a file can be written but not put beside or replaced
_NOT_BESIDE = {errno.EACCES, errno.EPERM, errno.EBUSY, errno.EXDEV, errno.EROFS}


def _in_place(exc: OSError, path: Path) -> bool:
    """Whether a failed write beside ``path`` may be done in the file itself: it exists and the folder refused a new
    file or a replace (a full disk is not such a case: writing in place would cut the earlier file short)."""
    return exc.errno in _NOT_BESIDE and path.is_file() and not path.is_symlink() and os.access(path, os.W_OK)


def _write_in_place(table: dict[str, list], path: Path, parquet: bool) -> int:
    try:
        with open(path, "wb") if parquet else open(path, "w", newline="") as out:
            _write_table(table, out, parquet)
    except OSError as exc:
        raise ActionError(
            f"{path}: the metrics file could not be written ({_reason(exc)}); it may be cut short: export it again"
        ) from None
    return len(table["step"])


def _write_table(table: dict[str, list], out, parquet: bool) -> None:
    if parquet:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table(table), out)
        return
    writer = csv.writer(out)
    writer.writerow(list(table))
    for row in zip(*table.values(), strict=True):
        writer.writerow(["" if v is None else v for v in row])


def _partial_prefix(path: Path) -> str:
    """The start of a partial file's name beside ``path`` (a long name shortened: the whole must fit in 255 bytes)."""
    return f".{path.name[:100]}."


def _keep_mode(path: Path, partial: Path) -> None:
    """The mode (and, where allowed, the owner) of the file at ``path`` onto the table replacing it: an export kept
    private stays private."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        return
    os.chmod(partial, stat.S_IMODE(st.st_mode))
    with contextlib.suppress(PermissionError):
        os.chown(partial, st.st_uid, st.st_gid)


def _remove_stale_partials(path: Path) -> None:
    """Partial files beside ``path`` left by an export that was killed (its process is gone)."""
    from trainer.supervise.processes import pid_alive

    pattern = re.compile(re.escape(_partial_prefix(path)) + r"(\d{1,9})-[0-9a-f]{8}\.partial")
    for candidate in path.parent.iterdir():
        found = pattern.fullmatch(candidate.name)
        if found and not pid_alive(int(found.group(1))):
            with contextlib.suppress(OSError):
                candidate.unlink()


def _reason(exc: BaseException) -> str:
    """An OS error's own words ("No space left on device"), without the path the sentence already names."""
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)).rstrip(".")
