"""The named API driven by a real client nobody here wrote (``gradio_client``), against a real ``grpo-studio serve``
with ``--auth`` and an empty data dir: the API page lists the actions by name and none of the widgets' events; a
tiny run is launched, followed, stopped, resumed, read (metrics, samples, alerts, log) and deleted by name only."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from tests.helpers import free_port, tiny_config, wait_for

pytestmark = pytest.mark.slow

AUTH = ("ann", "secret")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """A client logged in to a dashboard started as its users start it, on a fresh data dir."""
    gradio_client = pytest.importorskip("gradio_client")
    home = tmp_path_factory.mktemp("api-home")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--auth", ":".join(AUTH)],
        cwd=ROOT,
        # its own database in the fresh data dir: the environment may still name the last test's
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "GRPO_STUDIO_HOME": str(home),
            "DATABASE_URL": f"sqlite:///{home / 'grpo-studio.db'}",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"

    def connected():
        try:
            return gradio_client.Client(url, auth=AUTH, verbose=False)
        except Exception:
            return None

    try:
        yield wait_for(connected, 120, "the dashboard to answer", interval=1.0), url
    finally:
        process.terminate()
        process.wait(30)


def api_config(**overrides) -> str:
    """A tiny run's config as the YAML text a script would send (the shipped tiny model, by its built-in name)."""
    return yaml.safe_dump(tiny_config(model_name_or_path="builtin:tiny", **overrides).to_dict())


def test_the_api_page_lists_the_actions_by_name_and_no_widget_event(client):
    api, _ = client
    endpoints = set(api.view_api(print_info=False, return_format="dict")["named_endpoints"])
    from app.web.api import NAMES  # imports gradio: here, not at collection

    assert endpoints == {f"/{name}" for name in NAMES}
    launch = api.view_api(print_info=False, return_format="dict")["named_endpoints"]["/launch"]
    assert [p["parameter_name"] for p in launch["parameters"]] == ["config"]
    assert launch["parameters"][0]["python_type"]["type"] == "str"


def test_without_the_password_nothing_answers(client):
    gradio_client = pytest.importorskip("gradio_client")
    _, url = client
    with pytest.raises(Exception):  # noqa: B017 - the client's own error for a refused login
        gradio_client.Client(url, verbose=False)


def test_an_invalid_config_lists_every_problem_and_creates_nothing(client):
    api, _ = client
    bad = api_config(num_generations=1, beta=-0.5, learning_rate=-1.0, reward_weights=[1.0, 2.0])
    checked = api.predict(bad, api_name="/validate")
    assert checked["valid"] is False and len(checked["problems"]) == 4, checked["problems"]
    launched = api.predict(bad, api_name="/launch")
    assert launched["run_id"] is None and launched["problems"] == checked["problems"]
    assert api.predict("", api_name="/runs") == []
    refused = api.predict(api_config(dataset_name="text"), api_name="/launch")  # a datasets builder name: refused
    assert refused["run_id"] is None and "owner/name" in " ".join(refused["problems"])
    # an environment of the user's own: code that would run in the dashboard, which this one was not allowed
    mine = yaml.safe_dump(
        tiny_config(model_name_or_path="builtin:tiny-tools", environment="/tmp/mine.py:Env").to_dict()
    )
    refused = api.predict(mine, api_name="/launch")
    assert refused["run_id"] is None and refused["problems"] == [
        "environment: custom environment /tmp/mine.py:Env: custom environment code runs arbitrary Python, so the "
        "dashboard only accepts it when started with --allow-custom-rewards"
    ]
    assert api.predict("", api_name="/runs") == []


def test_a_run_is_launched_followed_stopped_resumed_read_and_deleted_by_name(client):
    api, _ = client

    def status(run_id: int) -> str:
        return api.predict(run_id, api_name="/run")["status"]

    launched = api.predict(api_config(name="from-a-script", max_steps=30, save_steps=2), api_name="/launch")
    run_id = launched["run_id"]
    assert launched["problems"] == [] and launched["name"] == "from-a-script"
    wait_for(lambda: api.predict(run_id, api_name="/run")["step"] >= 3, 240, "three steps", interval=1.0)

    stopped = api.predict(run_id, api_name="/stop")
    assert stopped["stop_sent"] is True
    wait_for(lambda: status(run_id) in ("stopped", "completed", "failed"), 120, "the run to stop", interval=1.0)
    assert status(run_id) == "stopped"  # at its next step, long before its 30th
    # resumed at once: the worker may still be saving; the resume waits for it rather than refusing
    assert api.predict(run_id, api_name="/resume")["run_id"] == run_id
    wait_for(lambda: status(run_id) == "completed", 300, "the resumed run to complete", interval=1.0)

    table = api.predict(run_id, "reward,kl", -1, api_name="/metrics")
    assert list(table) == ["step", "wall_time", "reward", "kl"]
    assert table["step"] == list(range(1, 31)) and all(isinstance(r, float) for r in table["reward"])
    later = api.predict(run_id, "reward", 28, api_name="/metrics")
    assert later["step"] == [29, 30] and later["reward"] == table["reward"][-2:]
    with pytest.raises(Exception, match="no metric 'no_such_key'"):
        api.predict(run_id, "no_such_key", -1, api_name="/metrics")

    sampled = api.predict(run_id, None, 200, api_name="/samples")
    assert sampled["step"] == sampled["sampled_steps"][-1] and sampled["samples"]
    assert {"prompt", "completion", "rewards", "advantage"} <= set(sampled["samples"][0])
    assert isinstance(api.predict(run_id, api_name="/alerts"), list)
    lines = [line["message"] for line in api.predict(run_id, 0, api_name="/log")["lines"]]
    assert "resume requested" in lines and any("resuming from checkpoint-" in m for m in lines)
    listed = api.predict("from-a-script", api_name="/runs")
    assert [r["id"] for r in listed] == [run_id] and listed[0]["last_reward"] == pytest.approx(table["reward"][-1])

    with pytest.raises(Exception, match="only stopped or failed runs resume"):
        api.predict(run_id, api_name="/resume")
    assert api.predict(run_id, api_name="/delete") == {"run_id": run_id, "name": "from-a-script", "deleted": True}
    assert api.predict("", api_name="/runs") == []
    with pytest.raises(Exception, match=f"no run with id {run_id}"):
        api.predict(run_id, api_name="/run")
