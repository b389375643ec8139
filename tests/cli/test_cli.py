"""The command line as a user reads it: --version, help for every argument, an empty run list that says how to start,
one progress line per step instead of TRL's dict, and `serve` saying where to open the dashboard."""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from app.cli.main import _parser, main, version
from app.cli.output import ProgressPrinter, step_line, summary
from tests.conftest import ROOT
from tests.helpers import free_port, wait_for


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"grpo-studio {version()}" and re.fullmatch(r"\d+\.\d+\.\d+", version())


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_argument_has_help_text():
    """run_id, --port and the rest: `grpo-studio CMD --help` explains every argument, defaults included."""
    missing = [
        f"{name} {action.dest}"
        for name, parser in _subcommands().items()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()
    ]
    assert missing == []
    serve = _subcommands()["serve"].format_help()
    assert "default 7860" in serve and "default 1" in serve
    silent = [  # an argument with a default names it in its help (a flag's default, off, goes without saying)
        f"{name} {action.dest}"
        for name, parser in _subcommands().items()
        for action in parser._actions
        if action.default not in (None, False, [], argparse.SUPPRESS) and "default" not in (action.help or "")
    ]
    assert silent == []


def test_a_preset_runs_by_name_anywhere(tmp_path, monkeypatch, capsys):
    """`grpo-studio run tiny-offline` needs no examples/ folder (a wheel install has none); `presets` lists it."""
    from trainer.presets import TINY_DEMO, PresetNotFound, resolve_preset

    monkeypatch.chdir(tmp_path)
    assert resolve_preset("tiny-offline") == TINY_DEMO == resolve_preset("tiny-offline.yaml")
    with pytest.raises(PresetNotFound, match="no-such-preset: no such file or preset; the presets are "):
        resolve_preset("no-such-preset")  # (was: the name unchanged, then "no such file"; issue 37.3)
    (tmp_path / "tiny-offline").write_text("max_steps: 3\n")  # a file of that name in the working directory wins
    assert resolve_preset("tiny-offline") == Path("tiny-offline")
    assert main(["presets"]) == 0
    listed = capsys.readouterr().out
    assert "tiny-offline" in listed and "builtin:tiny" in listed and "gsm8k-llama3b" in listed


def test_runs_on_an_empty_database_says_how_to_start_one(capsys):
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "No runs yet" in out and "grpo-studio run tiny-offline" in out  # a preset's name works from a wheel too


def test_a_reader_that_leaves_early_ends_the_command_quietly(tmp_path):
    """`grpo-studio presets | head -1`: the reader closes the pipe before the list is written; the command ends with
    a shell's SIGPIPE status and says nothing on stderr (it printed a BrokenPipeError traceback)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "presets"],
            cwd=ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "GRPO_STUDIO_HOME": str(tmp_path)},
        )
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141


def test_step_line_and_summary_read_as_one_line_each():
    assert step_line(7, 40, {"reward": 0.5312, "kl": 0.00123, "step_time": 2.0}, 80) == (
        "step  7/40   reward 0.531   KL 0.00123   ETA 1m20s"
    )
    assert step_line(40, 40, {"reward": 1.0}, 0) == "step 40/40   reward 1.000"
    text = summary(3, "failed", [0.1, 0.2, 0.3, 0.5], None, "Traceback ...\nValueError: boom\n")
    assert text.splitlines() == [
        "run 3 failed",
        "  reward 0.150 → 0.400 (mean of the first and last 2 of 4 steps)",
        "  error: ValueError: boom",
    ]
    assert step_line(10, 40, {"reward": 1.0, "heldout/correct": 0.79}, None) == (
        "step 10/40   reward 1.000   held-out 79.0%"
    )
    text = summary(
        4, "completed", [3.6, 3.7, 3.8, 3.9], None, None, [(0, 0.79), (10, 0.9), (20, 0.99)], [1.2, 1.4, 1.6, 1.9]
    )
    assert text.splitlines() == [
        "run 4 completed",
        "  held-out correctness 79.0% → 99.0% (greedy, step 0 → 20)",
        "  correctness reward 1.300 → 1.750 (mean of the first and last 2 of 4 steps)",
        "  reward 3.650 → 3.850 (sum of every reward, mean of the first and last 2 of 4 steps)",
    ]


@pytest.mark.slow
def test_progress_printer_prints_one_line_per_step_from_the_database(trained_run):
    """What `grpo-studio run` shows while training, read back from a real run: a line per step with its reward and
    KL, then the summary with the adapter's place; nothing of TRL's per-step dict."""
    run_id, config, _ = trained_run
    out = io.StringIO()
    printer = ProgressPrinter(run_id, out)
    printer.finish("completed")
    lines = out.getvalue().splitlines()
    steps = [line for line in lines if line.startswith("step ")]
    assert [int(re.match(r"step (\d+)/6", line).group(1)) for line in steps] == list(range(1, config.max_steps + 1))
    assert all(re.search(r"reward -?\d+\.\d{3}   KL ", line) for line in steps)
    # no ETA from the slow first step alone; then one from the pace between steps; none at the end
    assert "ETA" not in steps[0] and "ETA" in steps[1] and "ETA" not in steps[-1]
    assert lines[len(steps)] == f"run {run_id} completed" and lines[-2].startswith("  adapter: ")
    assert lines[-1] == (
        f"  next: grpo-studio eval {run_id} (base vs tuned on held-out problems), or grpo-studio serve and open "
        f"http://127.0.0.1:7860/?tab=monitor&run={run_id}"
    )
    assert "{" not in out.getvalue()  # no dict of TRL's logs


@pytest.mark.slow
def test_serve_says_where_to_open_the_dashboard():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        first = process.stdout.readline()
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/"), 60, "the dashboard")
    finally:
        process.terminate()
        rest = process.communicate(timeout=30)[0]
    assert f"open http://127.0.0.1:{port}/ in a browser" in first
    assert "share=True" not in rest and "HTTP Request" not in rest


def test_known_harmless_warnings_are_silenced_in_the_workers_too(monkeypatch):
    """The worker processes inherit the filter: transformers' gradient_checkpointing deprecation goes, others stay."""
    import warnings

    from app.cli.output import quiet_libraries

    monkeypatch.setenv("PYTHONWARNINGS", "")
    for name in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        monkeypatch.delenv(name, raising=False)
    with warnings.catch_warnings():
        quiet_libraries()
        env = dict(os.environ)
    code = (
        "import warnings\n"
        "warnings.warn('`gradient_checkpointing_enable` is deprecated and will be removed in v6.', FutureWarning)\n"
        "warnings.warn('something else changes', FutureWarning)\n"
    )
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "gradient_checkpointing" not in child.stderr and "something else changes" in child.stderr
    assert env["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "1"


def test_progress_printer_shows_the_base_models_heldout_score_before_step_one():
    """The demo scores the base model on held-out problems before training (its curve's first point): the line
    for it comes at once, not after the first step, and the summary starts from it."""
    from storage import queries
    from storage.db import get_sessionmaker
    from tests.helpers import create_run, tiny_config

    run_id = create_run(tiny_config(max_steps=2))
    out = io.StringIO()
    printer = ProgressPrinter(run_id, out)
    with get_sessionmaker().begin() as s:
        queries.add_metric_rows(s, queries.metric_rows(run_id, 0, {"heldout/correct": 0.79}, 1.0))
    printer.poll()
    assert out.getvalue() == "step 0/2   held-out 79.0% (before training)\n"
    with get_sessionmaker().begin() as s:
        for step, logs in ((1, {"reward": 3.5}), (2, {"reward": 3.9, "heldout/correct": 0.9})):
            queries.add_metric_rows(s, queries.metric_rows(run_id, step, logs, 1.0 + step))
    printer.finish("completed")
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("step 1/2   reward 3.500") and lines[2] == "step 2/2   reward 3.900   held-out 90.0%"
    assert "  held-out correctness 79.0% → 90.0% (greedy, step 0 → 2)" in lines


def test_a_long_wait_prints_progress_with_an_eta(monkeypatch):
    import app.cli.output as cli_output

    now = [0.0]
    monkeypatch.setattr("time.monotonic", lambda: now[0])
    out = io.StringIO()
    progress = cli_output.Progress("answers", every=5.0, out=out)
    for done, at in ((10, 2.0), (20, 6.0), (30, 7.0), (40, 8.0)):
        now[0] = at
        progress(done, 40)
    # a line at most every 5 s (at 6 s: 20 done in 6 s, 20 left), and the last one always
    assert out.getvalue().splitlines() == ["answers: 20/40, about 6s left", "answers: 40/40"]


def test_a_model_about_to_be_downloaded_is_announced(tmp_path, monkeypatch):
    """A first run of a hub model downloads it for minutes: the log says so first; a cached or local one, nothing."""
    from trainer.loading.hub import announce_download

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    said = []
    assert announce_download("someone/some-model", said.append)
    assert said[0].startswith("downloading someone/some-model from the Hugging Face Hub: the first use of it here")
    cached = tmp_path / "hub" / "models--someone--cached" / "snapshots" / "abc"
    cached.mkdir(parents=True)
    (cached / "config.json").write_text("{}")
    (tmp_path / "hub" / "models--someone--cached" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--cached" / "refs" / "main").write_text("abc")
    assert not announce_download("someone/cached", said.append)
    assert not announce_download("builtin:tiny", said.append) and not announce_download(str(tmp_path), said.append)
    assert len(said) == 1


def _down(reason: str = "connection failed: Connection refused"):
    """What SQLAlchemy raises while a PostgreSQL server restarts (psycopg's error, wrapped)."""
    from sqlalchemy.exc import OperationalError

    return OperationalError("SELECT", {}, Exception(reason))


def test_the_progress_printer_says_an_unreachable_database_once_and_loses_no_step(monkeypatch):
    """Issue 58: a foreground run's progress thread printed a 100-line traceback while PostgreSQL restarted (and
    printed nothing more). Now one line while it is down, then every step written meanwhile."""
    from storage import queries
    from storage.db import get_sessionmaker
    from tests.helpers import create_run, tiny_config

    run_id = create_run(tiny_config(max_steps=3))
    out = io.StringIO()
    printer = ProgressPrinter(run_id, out)

    def write(step: int, reward: float) -> None:
        with get_sessionmaker().begin() as s:
            queries.add_metric_rows(s, queries.metric_rows(run_id, step, {"reward": reward}, float(step)))

    write(1, 1.5)
    assert printer.poll_or_wait() is True
    real = queries.metrics_since
    monkeypatch.setattr(queries, "metrics_since", lambda *a: (_ for _ in ()).throw(_down()))
    write(2, 2.5)  # the worker's writes go on (it retries its own): these are read once the database answers
    assert [printer.poll_or_wait(), printer.poll_or_wait(), printer.poll_or_wait()] == [False, False, False]
    monkeypatch.setattr(queries, "metrics_since", real)
    write(3, 3.5)
    assert printer.poll_or_wait() is True

    lines = out.getvalue().splitlines()
    assert lines[0].startswith("step 1/3   reward 1.500")
    assert lines[1] == (
        f"run {run_id}: the database can't be reached (connection failed: Connection refused); still following, "
        "trying again every 1 s: nothing is lost, the steps meanwhile are printed when it answers"
    )
    assert [line.split("   ")[:2] for line in lines[2:]] == [["step 2/3", "reward 2.500"], ["step 3/3", "reward 3.500"]]
    assert len(lines) == 4


def test_following_a_run_through_a_database_outage_prints_one_line_and_the_summary(monkeypatch, capsys):
    """`grpo-studio launch`'s follow loop reads the run's status: an outage there is the same one line, no
    traceback, and the run is followed to its end."""
    import app.cli.output as cli_output
    from storage import queries
    from storage.db import get_sessionmaker
    from storage.models import RunStatus
    from tests.helpers import create_run, tiny_config

    run_id = create_run(tiny_config(max_steps=1))
    with get_sessionmaker().begin() as s:
        queries.add_metric_rows(s, queries.metric_rows(run_id, 1, {"reward": 2.0}, 1.0))
        queries.finish_run(s, queries.get_run(s, run_id), RunStatus.COMPLETED)
    real, failures = queries.get_run, iter(range(3))  # the first three reads of the run fail

    def get_run(session, rid):
        if next(failures, None) is not None:
            raise _down("server closed the connection unexpectedly")
        return real(session, rid)

    monkeypatch.setattr(queries, "get_run", get_run)
    monkeypatch.setattr(cli_output.ProgressPrinter, "start", lambda self: None)  # its ticks: the test above

    assert cli_output.follow(run_id, poll=0.01) == 0

    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if "database" in line] == [
        f"run {run_id}: the database can't be reached (server closed the connection unexpectedly); still following, "
        "trying again every 1 s: nothing is lost, the steps meanwhile are printed when it answers"
    ]
    assert out[1].startswith("step 1/1   reward 2.000") and f"run {run_id} completed" in out
    assert "Traceback" not in "\n".join(out)
