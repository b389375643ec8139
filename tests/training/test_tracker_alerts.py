"""Every alert of the one list that fires during training reaches the run's tracker once (issue 34 item 5): the
failure signs and notes as well as the watch's alerts, each sent when it starts to hold and not at every judgement
while it holds (trainer/job/tracker_alerts.py). In-process with a fake of trackio.alert's exact signature, and once
against trackio's real local storage in a child process (TRACKIO_DIR is read when trackio is imported)."""

from __future__ import annotations

import inspect
import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from trainer.job.tracker_alerts import AlertForwarder, trackio_forwarder

trackio = pytest.importorskip("trackio")


def _steps(forwarder: AlertForwarder, losses: dict[int, float]) -> None:
    for step, loss in sorted(losses.items()):
        forwarder.observe(step, {"loss": loss, "reward": 0.5})
    forwarder.judge()  # the end of training


def _fake_trackio(monkeypatch) -> list[tuple[str, str | None, object]]:
    sent = []

    def alert(title, text=None, level=trackio.AlertLevel.WARN, webhook_url=None):
        sent.append((title, text, level))

    assert _parameters(alert) == _parameters(trackio.alert)  # names, kinds and defaults
    monkeypatch.setattr(trackio, "alert", alert)
    return sent


def test_a_failure_sign_is_sent_once_while_it_holds_and_again_when_it_returns(monkeypatch):
    sent = _fake_trackio(monkeypatch)
    forwarder = trackio_forwarder(["trackio"])
    nan = {step: math.nan for step in range(5, 41)}  # 36 steps of NaN loss: judged at 11, 21, 31, 41 while it holds
    _steps(forwarder, {step: 0.5 for step in range(1, 81)} | nan | {65: math.nan})
    assert [(title, level) for title, _, level in sent] == [
        ("loss_nan (step 11)", trackio.AlertLevel.WARN),
        ("loss_nan (step 71)", trackio.AlertLevel.WARN),  # it cleared at step 51 and held again
    ]
    assert sent[0][1] == (
        "loss is NaN or infinite. Lower the learning rate or max_grad_norm; check the reward functions for NaN"
    )


def test_a_note_goes_to_the_tracker_as_info_once():
    sent = []
    forwarder = AlertForwarder(lambda title, text, level: sent.append((title, level)))
    _steps(forwarder, {step: 0.0 for step in range(1, 41)})
    assert sent == [("loss_zero (step 11)", "info")]  # GRPO's loss of 0 is normal: said once, as a note


def test_a_healthy_run_sends_nothing():
    sent = []
    _steps(AlertForwarder(lambda *alert: sent.append(alert)), {step: 0.3 + 0.01 * (step % 3) for step in range(1, 61)})
    assert sent == []


def test_the_sign_of_the_last_steps_is_sent_at_the_end_of_training():
    sent = []
    forwarder = AlertForwarder(lambda title, text, level: sent.append(title))
    for step in range(1, 16):
        forwarder.observe(step, {"loss": math.nan if step >= 13 else 0.5})
    assert sent == []  # judged at step 1 and 11, before the NaN
    forwarder.judge()  # what the callback's on_train_end does
    assert sent == ["loss_nan (step 15)"]


def test_a_run_that_reports_elsewhere_has_no_forwarder():
    assert trackio_forwarder(["wandb", "tensorboard"]) is None


@pytest.mark.slow
def test_alerts_reach_trackios_own_database_offline(tmp_path):
    """trackio for real (its local SQLite under TRACKIO_DIR, no server, no network): the forwarder's alerts are the
    rows trackio stores, with their levels, once each."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKIO_", "SPACE_ID"))}
    env |= {"TRACKIO_DIR": str(tmp_path / "trackio"), "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}
    script = (
        "import json, math, trackio\n"
        "from trackio.sqlite_storage import SQLiteStorage\n"
        "from trainer.job.tracker_alerts import trackio_forwarder\n"
        "trackio.init(project='grpo-studio', name='run 7', embed=False)\n"
        "forwarder = trackio_forwarder(['trackio'])\n"
        "for step in range(1, 41):\n"
        "    logs = {'loss': math.nan if 5 <= step <= 30 else 0.0}\n"
        "    trackio.log(logs)\n"
        "    forwarder.observe(step, logs)\n"
        "forwarder.judge()\n"
        "trackio.finish()\n"
        "rows = SQLiteStorage.get_alerts('grpo-studio', run_name='run 7')\n"
        "print(json.dumps(sorted((r['title'], r['level']) for r in rows)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    stored = json.loads(done.stdout.strip().splitlines()[-1])
    # NaN from step 5 (judged at 11), cleared by 41; the zero loss is a note once NaN is out of the window
    assert stored == [["loss_nan (step 11)", "warn"], ["loss_zero (step 40)", "info"]]


def _parameters(fn) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]
