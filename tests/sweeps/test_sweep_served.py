"""A sweep through the named API of a real served dashboard (issue 41), driven by ``gradio_client``, with real
detached workers started by the dashboard's scheduler, and one sweep answering several questions:

- hostile values (a broken grid, an unknown setting, a grid too large, values of the wrong type, a grid or a
  config that is not text) answer one sentence each and create nothing;
- a 2 x 2 grid created with ``/sweep`` is four queued members, listed by ``/runs`` with their sweep and read back
  by ``/sweeps``;
- the dashboard is killed (SIGKILL) while the first member trains and started again: the queued members still run
  and the sweep ends finished;
- the second member's worker is killed (SIGKILL): that member fails with its error in the table, and the others go
  on;
- the two members whose every group scores alike (top_p 0.01 keeps only the likeliest token, so every answer of a
  group is the same) are stopped by the signal rule during training, with the reason in their log and the table,
  and their adapter saved by the normal stop path.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from storage import queries
from storage.db import get_sessionmaker
from tests.conftest import ROOT
from tests.helpers import free_port, run_row, tiny_config, wait_for
from trainer.supervise.run_files import RunFiles

pytestmark = pytest.mark.slow

ENDED = ("completed", "failed", "stopped")
# A window of 8 steps and a share of 1: only a member all of whose groups scored alike eight steps running is
# stopped. The top_p 0.01 members always are. A sampling member at top_p 1 practically never: the shipped model
# answers about 3 in 4 right, so a group of 4 is alike about 1 time in 3, and 16 groups alike in a row about 1 in 10^8
# (with a window of 3, 6 groups, about 1 in 700 a step: a clean-clone CI run saw one stopped at step 36).
PRUNE = {"probe": False, "median": False, "signal_window": 8, "signal_share": 1.0}
# Each member's length. The signal rule can speak from step 8, and the dashboard tends its sweeps every 2 s: at 16
# steps (0.2 s a step) a loaded machine's pass came after both top_p 0.01 members had ended (a clean-clone run on
# three pytest-xdist processes); 48 leaves them 40 steps, several passes, to be stopped in.
MAX_STEPS = 48


class Dashboard:
    """``grpo-studio serve`` in a process of its own, on this module's database and the session's data dir (the
    built-in model is built there once)."""

    def __init__(self, studio_home: Path, database_url: str) -> None:
        gradio_client = pytest.importorskip("gradio_client")
        port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            cwd=ROOT,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "GRPO_STUDIO_HOME": str(studio_home),
                "DATABASE_URL": database_url,
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def connected():
            try:
                return gradio_client.Client(f"http://127.0.0.1:{port}/", verbose=False)
            except Exception:
                return None

        self.client = wait_for(connected, 120, "the dashboard to answer", interval=1.0)

    def predict(self, *args, api_name: str):
        return self.client.predict(*args, api_name=api_name)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(30)


@pytest.fixture(scope="module")
def served(module_database, studio_home, tiny_model_path):
    dashboard = Dashboard(studio_home, module_database)
    yield dashboard
    dashboard.close()


def _config(**sweep) -> str:
    """A tiny run's config as a script would send it, with a ``sweep:`` block (the grid comes as /sweep's grid)."""
    # MAX_STEPS: room for the dashboard's 2 s tending pass to stop the members whose signal is gone before they end.
    # learning_rate: at the helpers' 1e-3 a top_p 1 member learns to answer every group right within the run (no
    # signal left, so the rule rightly stops it); at 1e-4 it stays near the shipped model's 3 in 4.
    base = tiny_config(
        model_name_or_path="builtin:tiny", name="served", max_steps=MAX_STEPS, save_steps=400, learning_rate=1e-4
    )
    return yaml.safe_dump({**base.to_dict(), "sweep": {"objective": "reward", "prune": PRUNE, **sweep}})


@pytest.mark.parametrize(
    ("config", "grid", "said"),
    [
        (_config(), "beta", "--grid 'beta': expected setting=value1,value2 (e.g. beta=0,0.04)"),
        (_config(), "lr=1e-5,1e-4", "sweep.settings.lr: no such setting; did you mean learning_rate?"),
        (_config(), "beta=0,0.01,0.02,0.03,0.04,0.05,0.06,0.07,0.08 top_p=" + ",".join(f"0.{i}" for i in range(1, 9)),
         "the grid has 72 members (9 x 8): at most 64"),
        (_config(), "beta=high,0", "sweep.settings.beta 'high': expected a number"),
        (_config(), "num_generations=2.5,4", "sweep.settings.num_generations '2.5': expected a whole number"),
        (_config(settings="beta"), "", "sweep.settings: expected each swept setting with its values"),
        (_config(method="tpe", members=1000, settings={"beta": {"low": 0, "high": 1}}), "",
         "sweep.members 1000: tpe search needs from 1 to 64 members"),
        ("{{{", "beta=0,1", "the config text: line 1, column 4: not valid YAML"),
    ],
    ids=["grid-part", "unknown-setting", "huge-grid", "not-a-number", "not-whole", "settings-text", "tpe-1000", "yaml"],
)  # fmt: skip
def test_a_hostile_sweep_answers_one_sentence_and_creates_nothing(served, config, grid, said):
    answer = served.predict(config, grid, api_name="/sweep")
    assert answer["sweep_id"] is None and answer["members"] == []
    assert len(answer["problems"]) == 1 and answer["problems"][0].startswith(said), answer["problems"]
    assert served.predict(None, api_name="/sweeps") == {"sweeps": []} and served.predict("", api_name="/runs") == []


@pytest.mark.parametrize(
    ("grid", "said"),
    [
        ("beta=" + ",".join(str(i / 1e6) for i in range(100_000)), "grid must be at most 2,000 characters"),
        (5, "grid must be text, got 5"),
        (["beta=0,1"], "grid must be text"),
    ],
    ids=["100k-values", "a-number", "a-list"],
)
def test_a_grid_that_is_not_sweep_text_is_refused_before_it_is_read(served, grid, said):
    with pytest.raises(Exception, match=said):
        served.predict(_config(), grid, api_name="/sweep")
    assert served.predict(None, api_name="/sweeps") == {"sweeps": []} and served.predict("", api_name="/runs") == []


@pytest.fixture(scope="module")
def swept(served, module_database, studio_home):
    """The 2 x 2 grid over top_p (1, 0.01) and beta (0, 0.04), created with /sweep and trained one member at a time
    by the dashboard's scheduler; the dashboard SIGKILLed while the first member trains and served again, the second
    member's worker SIGKILLed. Returns (/sweep's answer, the dashboard that saw it end)."""
    answer = served.predict(_config(), "top_p=1.0,0.01 beta=0,0.04", api_name="/sweep")
    assert answer["problems"] == [], answer["problems"]
    first, second, *_ = (m["run_id"] for m in answer["members"])
    again = None
    try:
        wait_for(lambda: run_row(first).current_step >= 1, 300, "the first member to train")
        served.process.send_signal(signal.SIGKILL)  # the dashboard dies mid-sweep; the first member's worker goes on
        served.process.wait(30)
        assert [run_row(m["run_id"]).status for m in answer["members"]] == ["running", "queued", "queued", "queued"]
        again = Dashboard(studio_home, module_database)
        wait_for(lambda: run_row(second).current_step >= 1, 300, "the second member to train")
        os.kill(run_row(second).pid, signal.SIGKILL)
        ids = [m["run_id"] for m in answer["members"]]
        wait_for(lambda: all(run_row(i).status in ENDED for i in ids), 600, "every member to end")
        wait_for(lambda: again.predict(answer["sweep_id"], api_name="/sweeps")["state"] == "finished", 60, "the end")
        yield answer, again
    finally:
        if again is not None:
            again.close()
        for member in answer["members"]:  # a worker a failed test left behind
            row = run_row(member["run_id"])
            if row.status not in ENDED and row.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(row.pid, signal.SIGKILL)


@pytest.mark.timeout(1200)  # the first to ask for the sweep trains it: four members and two dashboard starts
def test_the_members_are_runs_that_know_their_sweep(swept):
    answer, dashboard = swept
    ids = [m["run_id"] for m in answer["members"]]
    assert [m["point"] for m in answer["members"]] == [
        {"top_p": 1.0, "beta": 0.0},
        {"top_p": 1.0, "beta": 0.04},
        {"top_p": 0.01, "beta": 0.0},
        {"top_p": 0.01, "beta": 0.04},
    ]
    listed = dashboard.predict("served-", api_name="/runs")
    assert sorted((r["id"], r["sweep_id"]) for r in listed) == [(i, answer["sweep_id"]) for i in ids]
    (summary,) = dashboard.predict(None, api_name="/sweeps")["sweeps"]
    assert (summary["id"], summary["members"], summary["ended"], summary["state"]) == (
        answer["sweep_id"],
        4,
        4,
        "finished",
    )


def test_the_queued_members_ran_after_the_dashboard_was_killed_and_served_again(swept):
    answer, dashboard = swept
    rows = dashboard.predict(answer["sweep_id"], api_name="/sweeps")["rows"]
    first = rows[0]
    assert (first["status"], first["step"], first["stop_reason"]) == ("completed", MAX_STEPS, None)
    with get_sessionmaker().begin() as s:  # one at a time, the later ones started by the dashboard served again
        runs = [queries.get_run(s, r["run_id"]) for r in rows]
        assert all(later.started_at >= runs[0].finished_at for later in runs[1:])


def test_a_member_killed_fails_with_its_error_in_the_table_and_the_others_go_on(swept):
    answer, dashboard = swept
    rows = dashboard.predict(answer["sweep_id"], api_name="/sweeps")["rows"]
    killed = rows[1]
    assert killed["status"] == "failed" and killed["error"].startswith("worker exited unexpectedly")
    assert killed["stop_reason"] is None
    assert [r["status"] for r in rows[2:]] == ["stopped", "stopped"]  # the next members still ran


def test_the_members_whose_groups_all_score_alike_are_stopped_by_the_signal_rule(swept):
    answer, dashboard = swept
    for row in dashboard.predict(answer["sweep_id"], api_name="/sweeps")["rows"][2:]:
        reason = row["stop_reason"]
        assert row["status"] == "stopped" and 8 <= row["step"] < MAX_STEPS, row
        said = re.fullmatch(
            r"stopped at step (\d+): 100% of groups scored alike over the last 8 steps( \(.*\))?, so their "
            r"advantages are 0: the learning signal is gone",
            reason or "",
        )
        assert said and 8 <= int(said.group(1)) <= row["step"], reason  # judged at that step; the worker stops after
        lines = [line["message"] for line in dashboard.predict(row["run_id"], 0, api_name="/log")["lines"]]
        assert f"sweep: {reason}" in lines
        files = RunFiles(Path(run_row(row["run_id"]).output_dir))
        assert "final" in files.saved_adapters()  # the normal stop path: the worker saved its adapter
