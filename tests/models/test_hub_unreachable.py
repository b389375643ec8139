"""The hub out of reach is one sentence, within seconds (issue 55, item 5): the command line refuses a run whose model
or data set it can't fetch before creating it, a worker's run ends failed with that sentence as its error, and a
model already in the cache loads from it without asking the hub.

The hub here is a local port nothing listens on: a refused connection, what a machine without a network answers at
once (tests talk to this machine only: tests/suite/net_guard.py). huggingface_hub reads HF_ENDPOINT as it is imported, so
this process patches its constants, and the processes a test starts get the environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app import actions
from app.actions.base import FetchError
from storage import queries
from storage.db import get_sessionmaker
from storage.models import RunStatus
from tests.helpers import create_run, free_port, run_row, tiny_config
from trainer.loading import hub
from trainer.loading.hub import HubUnreachable, hub_access, hub_problem

QWEN = "Qwen/Qwen2.5-0.5B-Instruct"
ROOT = Path(__file__).resolve().parents[2]
INSTEAD = "use a local model folder, a .gguf file, or a built-in model (builtin:tiny)"


@pytest.fixture
def closed_hub(tmp_path, monkeypatch) -> str:
    """The hub's address a closed local port, an empty cache, offline mode off, in this process and in the processes
    the test starts; returns the address."""
    from huggingface_hub import constants

    endpoint = f"http://127.0.0.1:{free_port()}"
    home = tmp_path / "hf"
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(hub, "_answers", {})  # no answer kept from another test's hub
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(home))
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_CACHE", "HF_DATASETS_CACHE"):
        monkeypatch.delenv(name, raising=False)
    return endpoint


def cache_a_model(repo: str) -> None:
    """Put the built-in model's files in the hub cache as ``repo``, as a download leaves them (a snapshot and the
    ref that names it)."""
    from huggingface_hub import constants

    from trainer.loading.tiny import tiny_model_dir

    folder = Path(constants.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}"
    shutil.copytree(tiny_model_dir(), folder / "snapshots" / "abc")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("abc")


def test_a_hub_model_out_of_reach_is_one_sentence_before_the_load_starts(closed_hub):
    """The check names the address it tried and what to use instead; the load inside hub_access never begins."""
    sentence = hub_problem(QWEN, "model")
    assert sentence.startswith(f"can't reach the Hugging Face Hub ({closed_hub}: ")
    assert sentence.endswith(f"to download {QWEN}, and it is not in the local cache: {INSTEAD}")
    began = []
    with pytest.raises(HubUnreachable) as raised, hub_access(QWEN):
        began.append(True)
    assert str(raised.value) == sentence and not began


def test_a_hub_data_set_out_of_reach_is_the_same_sentence(closed_hub):
    from trainer.loading.data import load_problems

    with pytest.raises(HubUnreachable) as raised:
        load_problems(tiny_config(dataset_name="gsm8k"))
    assert str(raised.value).startswith(f"can't reach the Hugging Face Hub ({closed_hub}: ")
    assert "to download the data set openai/gsm8k, and it is not in the local cache: use a local .jsonl" in str(
        raised.value
    )


def test_local_and_builtin_names_ask_nothing_of_the_hub(closed_hub, tmp_path, monkeypatch):
    def asked():
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(hub, "unreachable_reason", asked)
    assert hub_problem("builtin:tiny", "model") is None and hub_problem(str(tmp_path), "model") is None
    assert hub_problem("builtin:arithmetic", "dataset") is None and hub_problem("data/x.jsonl", "dataset") is None


def test_a_cached_model_loads_from_the_cache_without_asking_the_hub_again(closed_hub, caplog):
    """huggingface_hub would retry each of the load's requests 5 times (3 min 12 s for this one): offline, none."""
    from huggingface_hub import constants
    from transformers import AutoConfig, AutoTokenizer

    cache_a_model("someone/tiny")
    assert hub_problem("someone/tiny", "model") is None  # the command line does not refuse it
    with hub_access("someone/tiny"):
        config = AutoConfig.from_pretrained("someone/tiny")
        AutoTokenizer.from_pretrained("someone/tiny")
    assert config.num_hidden_layers >= 1
    assert "is read from the local cache" in caplog.text and "Retrying" not in caplog.text
    assert constants.HF_HUB_OFFLINE is False  # offline for the load only


def test_offline_mode_and_a_missing_cache_entry_is_the_same_sentence(closed_hub, monkeypatch):
    """HF_HUB_OFFLINE=1: nothing asks the network; the check and transformers' own miss both say it in one sentence."""
    from huggingface_hub import constants
    from transformers import AutoConfig

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub, "unreachable_reason", lambda: pytest.fail("offline, the hub was asked"))
    expected = f"can't reach the Hugging Face Hub (HF_HUB_OFFLINE=1 is set) to download {QWEN}, and it is not in the "
    assert hub_problem(QWEN, "model").startswith(expected)
    with pytest.raises(HubUnreachable, match=r"^can't reach the Hugging Face Hub \(HF_HUB_OFFLINE=1 is set\)"):
        with hub_access(QWEN):
            AutoConfig.from_pretrained(QWEN)


def test_a_run_to_start_now_is_refused_before_it_exists(closed_hub):
    """The launch the command line makes: a FetchError (exit 2) and no run row; a queued one is left to its worker."""
    config = tiny_config(dataset_name="gsm8k")
    with pytest.raises(FetchError) as raised:
        actions.launch(config, actions.OPERATOR, start="detached")
    assert "to download the data set openai/gsm8k" in raised.value.message and raised.value.exit_code == 2
    with get_sessionmaker().begin() as session:
        assert queries.list_runs(session) == []


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_command_line_says_it_in_one_line_and_exits_2(closed_hub, tmp_path):
    """``grpo-studio run`` of a hub model: one line on stderr, no retries, no traceback, no run created."""
    config = tmp_path / "qwen.yaml"
    config.write_text(f"name: qwen\nmodel_name_or_path: {QWEN}\ndataset_name: builtin:arithmetic\nmax_steps: 2\n")
    done = _cli(["run", str(config)], tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"grpo-studio: can't reach the Hugging Face Hub ({closed_hub}: ") and line.endswith(INSTEAD)
    with get_sessionmaker().begin() as session:
        assert queries.list_runs(session) == []


def test_a_preset_with_offline_mode_says_it_in_one_line(closed_hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    done = _cli(["run", "gsm8k-qwen2.5-0.5b"], tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"grpo-studio: can't reach the Hugging Face Hub (HF_HUB_OFFLINE=1 is set) to download {QWEN}, and it is not "
        f"in the local cache: {INSTEAD}\n"
    )


@pytest.mark.slow
def test_a_workers_run_ends_failed_with_the_sentence_as_its_error(closed_hub, tmp_path):
    """A run the dashboard queued: its worker fails it within seconds, the error the sentence, not a traceback."""
    run_id = create_run(tiny_config(model_name_or_path=QWEN))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "trainer.job.worker", str(run_id)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr
    assert "Retrying" not in done.stderr
    run = run_row(run_id)
    assert run.status is RunStatus.FAILED
    assert run.error.startswith(f"can't reach the Hugging Face Hub ({closed_hub}: ") and run.error.endswith(INSTEAD)
