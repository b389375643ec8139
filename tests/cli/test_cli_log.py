"""A foreground run's INFO lines go to the run's log file, not between the step lines on the terminal (unless
--verbose); warnings still reach the terminal (issue 37, item 7)."""

from __future__ import annotations

import io
import logging

from app.cli.log import InfoToRunLog
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import create_run, tiny_config


def _terminal() -> tuple[logging.Handler, io.StringIO]:
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    logging.getLogger().addHandler(handler)
    logging.getLogger("trainer").setLevel(logging.INFO)
    return handler, text


def _set_dir(run_id: int, path) -> None:
    with get_sessionmaker().begin() as session:
        queries.set_output_dir(session, queries.get_run(session, run_id), str(path))


def test_info_lines_go_to_the_run_log_and_warnings_to_the_terminal(tmp_path):
    run_id = create_run(tiny_config())
    handler, terminal = _terminal()
    worker = logging.getLogger("trainer.job.worker")
    try:
        with InfoToRunLog(run_id):
            worker.info("model path: before the run directory exists")  # held until the worker has made it
            (tmp_path / "run").mkdir()
            _set_dir(run_id, tmp_path / "run")
            worker.info("trainer ready in 1.00 s")
            worker.warning("a tracker is missing")
        worker.info("after the run: the terminal again")
    finally:
        logging.getLogger().removeHandler(handler)
    logged = (tmp_path / "run" / "worker.log").read_text().splitlines()
    assert [line.split(" INFO ", 1)[1] for line in logged] == [
        "model path: before the run directory exists",
        "trainer ready in 1.00 s",
    ]
    assert terminal.getvalue() == "a tracker is missing\nafter the run: the terminal again\n"


def test_verbose_keeps_the_info_lines_on_the_terminal_too(tmp_path):
    run_id = create_run(tiny_config())
    _set_dir(run_id, tmp_path)
    handler, terminal = _terminal()
    try:
        with InfoToRunLog(run_id, verbose=True):
            logging.getLogger("trainer.job.worker").info("data: builtin:arithmetic")
    finally:
        logging.getLogger().removeHandler(handler)
    assert terminal.getvalue() == "data: builtin:arithmetic\n"
    assert (tmp_path / "worker.log").read_text().endswith(" INFO data: builtin:arithmetic\n")
