"""Where a foreground run's own log lines go: grpo-studio's INFO lines (the model path, the data set, TRL's version,
the trainer's start-up time, the adapter saved...) into the run's ``worker.log``, where a detached worker's output
goes, and not between the step lines on the terminal; warnings and errors still show there. ``--verbose`` keeps the
INFO lines on the terminal as well.

The run's directory is made by the worker when it claims the run, after the first lines may be logged, so lines are
held in memory until the run row names it (or, if it never does, dropped at the end: the step lines and the summary
said what mattered).
"""

from __future__ import annotations

import logging
from pathlib import Path

from storage import queries
from storage.db import get_sessionmaker
from trainer.supervise.run_files import RunFiles

FORMAT = "%(asctime)s %(levelname)s %(message)s"


class RunLogFile(logging.Handler):
    """Appends the INFO lines of grpo-studio's loggers to run ``run_id``'s worker.log."""

    def __init__(self, run_id: int) -> None:
        super().__init__(logging.INFO)
        self.run_id = run_id
        self.path: Path | None = None
        self.held: list[str] = []
        self.setFormatter(logging.Formatter(FORMAT, datefmt="%Y-%m-%d %H:%M:%S"))

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING and record.name.split(".")[0] in OURS

    def emit(self, record: logging.LogRecord) -> None:
        self.held.append(self.format(record))
        if self.path is None:
            self.path = self._find()
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as log:
                log.write("\n".join(self.held) + "\n")
            self.held = []

    def _find(self) -> Path | None:
        try:
            with get_sessionmaker().begin() as session:
                run = queries.get_run(session, self.run_id)
                output_dir = run.output_dir if run else None
        except Exception:  # the database not answering: keep holding the lines
            return None
        return RunFiles(Path(output_dir)).log if output_dir and Path(output_dir).is_dir() else None


OURS = ("app", "trainer", "storage", "grpo_studio")


def _terminal_quiet(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or record.name.split(".")[0] not in OURS


class InfoToRunLog:
    """While training run ``run_id`` in the foreground: INFO lines to its log file (and off the terminal unless
    ``verbose``)."""

    def __init__(self, run_id: int, verbose: bool = False) -> None:
        self.file = RunLogFile(run_id)
        self.verbose = verbose
        self.terminals = [h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)]

    def __enter__(self) -> InfoToRunLog:
        logging.getLogger().addHandler(self.file)
        if not self.verbose:
            for handler in self.terminals:
                handler.addFilter(_terminal_quiet)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self.file)
        for handler in self.terminals:
            handler.removeFilter(_terminal_quiet)
        self.file.close()
