"""What the command line prints, kept apart from its argument parsing: while ``grpo-studio run`` trains in the
foreground, one line per step with the reward, the KL and an ETA, read from the database the worker writes (the same
numbers the dashboard shows), a warning the first time no group has had a reward spread (trainer.insight.spread), and
a summary at the end; the evaluation table; the version; which log lines show.

TRL's own output (a ~1.5 KB dict per step, tqdm bars) stays off: the worker runs with show_progress=False.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import numpy as np
from sqlalchemy.exc import SQLAlchemyError

from app.actions.monitor_state import duration, eta
from storage import queries
from storage.db import get_sessionmaker, is_transient
from trainer.insight.spread import KEYS as SPREAD_KEYS
from trainer.insight.spread import NoSpread, no_spread
from trainer.supervise.run_files import RunFiles
from trainer.version import version  # noqa: F401 - the CLI's --version and banner

if TYPE_CHECKING:
    from app.actions import ActionError

POLL_SECONDS = 1.0


def quiet_logging() -> None:
    """grpo-studio's own log lines at INFO, everything else (httpx's request lines, Alembic's plugin list, Gradio)
    only when it warns."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    for ours in ("app", "trainer", "storage", "grpo_studio"):
        logging.getLogger(ours).setLevel(logging.INFO)


# Library chatter that says nothing about a run: transformers deprecating the gradient_checkpointing names that TRL
# still calls (harmless until transformers 6; the start of each message), and the load/map progress bars of
# transformers and datasets.
HARMLESS_WARNINGS = tuple(
    f"`{name}` is deprecated"
    for name in (
        "gradient_checkpointing",
        "is_gradient_checkpointing",
        "gradient_checkpointing_enable",
        "gradient_checkpointing_disable",
    )
)


def quiet_libraries() -> None:
    """Silence the known-harmless warnings and the libraries' progress bars in this process and in every worker it
    starts (through the environment they inherit: PYTHONWARNINGS is read when a worker's interpreter starts)."""
    import os
    import re
    import warnings

    for message in HARMLESS_WARNINGS:
        warnings.filterwarnings("ignore", message=re.escape(message), category=FutureWarning)
    rules = [f"ignore:{message}:FutureWarning" for message in HARMLESS_WARNINGS]
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS", ""), *rules]))
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


def step_line(step: int, total: int, values: dict[str, float], eta_seconds: float | None) -> str:
    """One progress line, e.g. "step   12/40   reward 0.531   KL 0.00123   ETA 1m20s"."""
    width = len(str(total))
    parts = [f"step {step:>{width}}/{total}"]
    if "reward" in values:
        parts.append(f"reward {values['reward']:.3f}")
    if "kl" in values:
        parts.append(f"KL {values['kl']:.3g}")
    if "heldout/correct" in values:
        parts.append(f"held-out {values['heldout/correct']:.1%}")
    if eta_seconds is not None and step < total:
        parts.append(f"ETA {duration(eta_seconds)}")
    return "   ".join(parts)


class ProgressPrinter(threading.Thread):
    """Polls the run's metrics once a second and prints a line for each step that arrived; :meth:`finish` prints
    what is left and the summary."""

    def __init__(self, run_id: int, out: TextIO | None = None, interval: float = POLL_SECONDS) -> None:
        super().__init__(name="grpo-studio-progress", daemon=True)
        self.run_id, self.out, self.interval = run_id, out or sys.stdout, interval
        self.last_step = -1
        self.rewards: list[float] = []
        self.correctness: list[float] = []  # the correctness reward's own mean per step, when the run has one
        self.heldout: list[tuple[int, float]] = []  # (step, greedy held-out correctness) of each evaluation
        self.logged: list[tuple[int, float, float]] = []  # the reward's points: their wall times give the pace
        # what trainer.insight.spread reads, key -> step -> value (a step read twice is kept once), and whether its
        # "nothing can be learned" was printed: once, the first time it holds
        self.spread: dict[str, dict[int, float]] = {}
        self.warned = False
        self.outage = False  # the database could not be read at the last tick (said once, not at every tick)
        self.finished = threading.Event()

    def run(self) -> None:
        while not self.finished.wait(self.interval):
            self.poll_or_wait()

    def poll_or_wait(self) -> bool:
        """:meth:`poll`, or, where the database can't be read (a PostgreSQL server restarting), one line saying so
        and that it keeps trying: the next tick reads every step since the last one printed, so nothing is lost.
        Whether the poll went through."""
        try:
            self.poll()
        except SQLAlchemyError as exc:
            self.unreachable(exc)
            return False
        self.outage = False
        return True

    def unreachable(self, exc: Exception) -> None:
        """Say once per outage that the database can't be read, in one line (the thread's traceback was 100)."""
        if not self.outage:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:200]
            what = "can't be reached" if is_transient(exc) else "can't be read"
            print(
                f"run {self.run_id}: the database {what} ({reason}); still following, trying again every "
                f"{self.interval:g} s: nothing is lost, the steps meanwhile are printed when it answers",
                file=self.out,
                flush=True,
            )
        self.outage = True

    def poll(self) -> None:
        """Print one line per new step (a step counts once its reward is written)."""
        with get_sessionmaker().begin() as session:
            run = queries.get_run(session, self.run_id)
            fresh = queries.metrics_since(session, self.run_id, self.last_step)
        if run is None:
            return
        for key in SPREAD_KEYS:
            for step, value, _ in fresh.get(key, []):
                self.spread.setdefault(key, {})[step] = value
        if self.last_step < 0 and fresh.get("heldout/correct", [(None,)])[0][0] == 0:
            # the base model's held-out score, measured before step 1: the curve's first point
            (_, correct, _), *_ = fresh["heldout/correct"]
            print(
                f"step {0:>{len(str(run.total_steps))}}/{run.total_steps}   held-out {correct:.1%} (before training)",
                file=self.out,
                flush=True,
            )
            self.heldout.append((0, correct))
            self.last_step = 0
        if "reward" not in fresh:
            return
        by_step: dict[int, dict[str, float]] = {}
        for key in ("reward", "kl", "step_time", "heldout/correct", CORRECTNESS_KEY):
            for step, value, _ in fresh.get(key, []):
                by_step.setdefault(step, {})[key] = value
        self.logged += fresh["reward"]
        done = max(step for step, _, _ in fresh["reward"])
        self.heldout += [
            (s, v["heldout/correct"]) for s, v in sorted(by_step.items()) if "heldout/correct" in v and 0 < s <= done
        ]
        for step in sorted(s for s, values in by_step.items() if "reward" in values and s <= done):
            self.rewards.append(by_step[step]["reward"])
            if CORRECTNESS_KEY in by_step[step]:
                self.correctness.append(by_step[step][CORRECTNESS_KEY])
            so_far = np.asarray([p for p in self.logged if p[0] <= step])
            left = eta(run.total_steps - step, 0.0, step, so_far)
            print(step_line(step, run.total_steps, by_step[step], left), file=self.out, flush=True)
        self.last_step = done
        flat = None if self.warned else no_spread({k: sorted(v.items()) for k, v in self.spread.items()})
        if flat is not None:
            print(f"warning: {flat.sentence}", file=self.out, flush=True)
            self.warned = True

    def finish(self, status: str) -> None:
        """Stop polling, print the steps not printed yet, then one summary line per fact."""
        from app.actions import nothing_learned  # the verdict /run gives, on every stored step

        self.finished.set()
        if self.is_alive():
            self.join()
        while not self.poll_or_wait():  # the summary needs the database: waited for as the ticks wait
            time.sleep(self.interval)
        with get_sessionmaker().begin() as session:
            run = queries.get_run(session, self.run_id)
            output_dir = run.output_dir if run else None
            error = run.error if run else None
            config = dict(run.config or {}) if run else {}
        lines = summary(
            self.run_id,
            status,
            self.rewards,
            output_dir,
            error,
            self.heldout,
            self.correctness,
            flat=nothing_learned(self.run_id) if run else None,
            no_heldout=heldout_missing(config),
        )
        print(lines, file=self.out, flush=True)


def heldout_missing(config: dict) -> str | None:
    """Why ``grpo-studio eval`` has no held-out problems to score this run's config on (None: it has, or may have),
    as validation decides it (trainer.review.heldout.missing_heldout); None for a config that no longer
    reads."""
    from trainer.config import RunConfig
    from trainer.review.heldout import missing_heldout

    try:
        return missing_heldout(RunConfig.from_dict(config)[0])
    except Exception:  # noqa: BLE001 - a config stored by another version: the summary goes on without the answer
        return None


# The correctness reward's own mean per step, as TRL logs it (rewards/<name>/mean): the reward the demo is about.
CORRECTNESS_KEY = "rewards/correctness/mean"


def summary(
    run_id: int,
    status: str,
    rewards: list[float],
    output_dir: str | None,
    error: str | None,
    heldout: list[tuple[int, float]] = (),
    correctness: list[float] = (),
    flat: NoSpread | None = None,
    no_heldout: str | None = None,
) -> str:
    """The last lines of a foreground run: its status; first what it is for, held-out correctness from the first
    evaluation to the last and the correctness reward's own move; then the summed reward (means of the first and
    last five steps, fewer in a short run); that nothing can be learned when no group had a reward spread
    (``flat``: trainer.insight.spread); where the adapter is, or the error's last line; and what to run next: what
    to change for a run that learned nothing, else the held-out evaluation (only where the data has held-out
    problems: ``no_heldout`` says why not) and the dashboard."""
    lines = [f"run {run_id} {status}"]
    if len(heldout) > 1:
        (first_step, first), (last_step, last) = heldout[0], heldout[-1]
        lines.append(f"  held-out correctness {first:.1%} → {last:.1%} (greedy, step {first_step} → {last_step})")
    for label, series in (("correctness reward", list(correctness)), ("reward", rewards)):
        window = min(5, len(series) // 2)
        if window:
            head, tail = np.mean(series[:window]), np.mean(series[-window:])
            what = "sum of every reward, " if label == "reward" and correctness else ""
            lines.append(
                f"  {label} {head:.3f} → {tail:.3f} ({what}mean of the first and last {window} of {len(series)} steps)"
            )
    if flat is not None:
        lines.append(f"  warning: {flat.sentence}")
    adapter = RunFiles(Path(output_dir)).adapter if output_dir else None
    if adapter is not None and adapter.is_dir():
        lines.append(f"  adapter: {adapter}")
    if error:
        lines.append(f"  error: {error.strip().splitlines()[-1]}")
    monitor = f"grpo-studio serve and open http://127.0.0.1:7860/?tab=monitor&run={run_id}"
    if flat is not None:  # an adapter that learned nothing is not worth evaluating: what to change is
        lines.append(f"  next: {flat.hint} (grpo-studio probe CONFIG samples and scores a few groups in seconds)")
    elif adapter is not None and adapter.is_dir() and no_heldout:
        lines.append(f"  next: {monitor} (no held-out evaluation: {no_heldout})")
    elif adapter is not None and adapter.is_dir():
        lines.append(f"  next: grpo-studio eval {run_id} (base vs tuned on held-out problems), or {monitor}")
    return "\n".join(lines)


def evaluation_lines(results: dict, run_id: int, adapter: str, samples: int) -> list[str]:
    """``grpo-studio eval``'s table: each held-out measure for base and tuned, side by side."""
    lines: list[str] = []
    base, tuned = results["base"], results["tuned"]
    lines.append(f"run {run_id}, adapter {adapter}, {results['problems']} held-out problems")
    if "heldout" in results:  # where they came from (evaluations stored before issue 24 don't say)
        from trainer.loading.heldout import describe_record

        lines.append(f"  ({describe_record(results['heldout'])})")
    rows = [("correct (greedy)", "correct"), (f"pass@1 ({samples} samples)", "pass_at_1"), ("format", "format")]
    for label, key in rows:
        if base[key] is not None:
            lines.append(f"  {label:<24} base {base[key]:7.1%}  →  tuned {tuned[key]:7.1%}")
    lines.append(
        f"  {'mean length (tokens)':<24} base {base['mean_length']:7.1f}  →  tuned {tuned['mean_length']:7.1f}"
    )
    for name in base["rewards"]:
        b, t = base["rewards"][name], tuned["rewards"][name]
        if b is not None and t is not None:
            lines.append(f"  {'reward ' + name:<24} base {b:7.3f}  →  tuned {t:7.3f}")
    return lines


def foreground(run_id: int, verbose: bool = False) -> int:
    """Train in this process, printing one line per step (ProgressPrinter) and a summary; TRL's own per-step
    output stays off, and grpo-studio's INFO lines go to the run's log file unless ``verbose`` (app.cli.log)."""
    quiet_libraries()
    from app.cli.log import InfoToRunLog
    from storage.models import RunStatus
    from trainer.job.worker import run_worker

    printer = ProgressPrinter(run_id)
    printer.start()
    try:
        with InfoToRunLog(run_id, verbose):
            status = run_worker(run_id, show_progress=False)
    finally:
        printer.finished.set()
    printer.finish(str(status))
    return {RunStatus.COMPLETED: 0, RunStatus.STOPPED: 130}.get(status, 1)


class Progress:
    """A progress line on stderr for a long wait (``grpo-studio eval``): what is done of what, and an ETA from the
    pace so far; at most one line every ``every`` seconds, and the last one always."""

    def __init__(self, what: str, every: float = 5.0, out: TextIO | None = None) -> None:
        import time

        self.what, self.every, self.out = what, every, out or sys.stderr
        self.started = self.shown = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        import time

        now = time.monotonic()
        if done < total and now - self.shown < self.every:
            return
        self.shown = now
        left = (now - self.started) / done * (total - done) if done else None
        tail = f", about {duration(left)} left" if left is not None and done < total else ""
        print(f"{self.what}: {done}/{total}{tail}", file=self.out, flush=True)


def follow(run_id: int, poll: float = POLL_SECONDS) -> int:
    """A run trained elsewhere (a Slurm job): print its steps from the database as ``run`` does for a local one, until
    it ends. Ctrl-C asks the job to stop (the worker saves its adapter); a second Ctrl-C leaves it running."""

    from app import actions
    from storage.models import RunStatus

    printer = ProgressPrinter(run_id)
    printer.start()
    stopping = False
    while True:
        try:
            try:
                with get_sessionmaker().begin() as session:
                    status = queries.get_run(session, run_id).status
            except SQLAlchemyError as exc:  # said in one line, as the printer says it; asked again
                printer.unreachable(exc)
                time.sleep(poll)
                continue
            if status.terminal:
                break
            time.sleep(poll)
        except KeyboardInterrupt:
            if stopping:
                print(f"run {run_id} goes on without being followed: grpo-studio runs shows it", flush=True)
                printer.finished.set()
                return 130
            stopping = True
            try:  # the stop `grpo-studio stop` asks, refused as it refuses (Slurm not answering: one sentence)
                actions.stop(run_id)
            except actions.ActionError as exc:
                printer.finished.set()
                return refused(exc)
            print(
                f"run {run_id}: stop requested; waiting for it to save and end (Ctrl-C again to leave it)", flush=True
            )
    printer.finish(str(status))
    return {RunStatus.COMPLETED: 0, RunStatus.STOPPED: 130}.get(status, 1)


def refused(exc: ActionError) -> int:
    """Print an action's refusal (every problem of a config, one a line) and return its exit code."""
    if len(exc.problems) > 1 or exc.problems != [exc.message]:
        print(f"grpo-studio: {exc.message}:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
    else:
        print(f"grpo-studio: {exc.message}", file=sys.stderr)
    return exc.exit_code


def started_text(started: int | str | None) -> str:
    """What start_worker started: a local pid, or a Slurm job id (None: Slurm refused it; the run says why)."""
    if isinstance(started, int):
        return f"pid {started}"
    return f"Slurm job {started}" if started else "Slurm refused the job: see grpo-studio runs"
