"""A user's own reward or tool is checked in a child process (trainer.scoring.user_code): what its module does as it
is imported (issue 58: an environment variable set, a global written, a module left behind) never reaches the process
that checks it, the dashboard, nor the runs the dashboard starts afterwards; a broken one is still reported in one
sentence."""

from __future__ import annotations

import builtins
import os
import sys

import pytest

from tests.helpers import tiny_config
from trainer import review
from trainer.config.access import Access
from trainer.scoring import user_code

ALLOWED = Access(allow_custom_rewards=True, any_path=True)  # a dashboard started with --allow-custom-rewards

# A module that changes its process as it is imported, then says it did (to a file: its answer is its pid), and
# writes to its standard output both ways (the answer must still come through).
MEDDLING = """
import builtins, os, pathlib, sys
os.environ["GRPO_STUDIO_LEAKED_BY_REWARD"] = "set at import"
builtins.GRPO_STUDIO_LEAKED_GLOBAL = 1
pathlib.Path({marker!r}).write_text(str(os.getpid()))
print("hello from the reward's import")
os.write(1, b"raw bytes on fd 1")

def short(prompts, completions, **kwargs):
    return [1.0 if len(c) < 20 else 0.0 for c in completions]

def add(a: int, b: int) -> int:
    '''Add two numbers.

    Args:
        a: The first.
        b: The second.
    '''
    return a + b
"""


def _meddling(tmp_path) -> tuple[str, object]:
    marker = tmp_path / "imported-by"
    path = tmp_path / "meddling.py"
    path.write_text(MEDDLING.format(marker=str(marker)))
    return str(path), marker


def _assert_clean() -> None:
    from trainer.supervise.start import detached_env

    assert "GRPO_STUDIO_LEAKED_BY_REWARD" not in os.environ
    assert "GRPO_STUDIO_LEAKED_BY_REWARD" not in detached_env()  # the environment of every run started from here
    assert not hasattr(builtins, "GRPO_STUDIO_LEAKED_GLOBAL")
    assert [name for name in sys.modules if name.startswith("grpo_studio_custom_meddling")] == []


def test_a_custom_rewards_import_changes_only_the_child_that_checks_it(tmp_path):
    path, marker = _meddling(tmp_path)
    config = tiny_config(reward_funcs=["correctness", f"{path}:short"], reward_weights=[1.0, 1.0])

    assert review.check(config.to_dict(), ALLOWED).problems == []  # valid, print and all

    checked_in = int(marker.read_text())
    assert checked_in != os.getpid()  # it was imported, elsewhere
    _assert_clean()


def test_a_custom_tools_import_changes_only_the_child_that_checks_it(tmp_path):
    path, marker = _meddling(tmp_path)
    config = tiny_config(tools=[f"{path}:add", f"{path}:short"])  # short: no docstring (the template then unread)

    found = review.check(config.to_dict(), ALLOWED).problems

    assert found == [
        f"tools: {path}:short: transformers cannot build the schema of short from its signature and docstring: "
        "Cannot generate JSON schema for short because it has no docstring!"
    ]
    assert int(marker.read_text()) != os.getpid()
    _assert_clean()


@pytest.mark.parametrize(
    ("source", "sentence"),
    [
        (
            "import no_such_module_here\n",
            "reward_funcs: custom reward '{spec}': could not import {path}: ModuleNotFoundError: "
            "No module named 'no_such_module_here'",
        ),
        (
            "def f(prompts, completions, **kw):\n    return [1.0]\n",
            "reward_funcs: custom reward '{spec}': expected a list with one score per completion (2), got [1.0]",
        ),
        (
            "import sys\nprint('leaving')\nsys.exit(3)\n",
            "reward_funcs: checking your own code ended without an answer (exit status 3: leaving); does it exit or "
            "kill its process when imported?",
        ),
        (
            "import os\nos._exit(0)\n",
            "reward_funcs: checking your own code ended without an answer (exit status 0); does it exit or kill its "
            "process when imported?",
        ),
    ],
    ids=["import-fails", "wrong-count", "sys-exit", "os-exit"],
)
def test_a_broken_custom_reward_is_reported_in_one_sentence(tmp_path, source, sentence):
    path = tmp_path / "broken.py"
    path.write_text(source)
    spec = f"{path}:f"
    found = review.check(tiny_config(reward_funcs=[spec]).to_dict(), ALLOWED).problems
    assert found == [sentence.format(spec=spec, path=path)]


def test_a_reward_whose_import_never_ends_is_stopped_and_said(tmp_path, monkeypatch):
    monkeypatch.setattr(user_code, "CHECK_SECONDS", 1.0)  # the real limit is 120 s
    path = tmp_path / "slow.py"
    path.write_text("import time\ntime.sleep(600)\n")
    found = review.check(tiny_config(reward_funcs=[f"{path}:f"]).to_dict(), ALLOWED).problems
    assert found == [
        "reward_funcs: checking your own code did not finish within 1 s (its import and a dry run on two sample "
        "completions): it was stopped; look for a loop or a slow download at its import"
    ]


def test_a_module_found_on_the_askers_sys_path_is_found_by_the_child(tmp_path, monkeypatch):
    """``package.module:function`` resolves as it did in the asking process (its sys.path, not the child's)."""
    (tmp_path / "site" / "my_rewards").mkdir(parents=True)
    (tmp_path / "site" / "my_rewards" / "__init__.py").write_text(
        "def f(prompts, completions, **kw):\n    return [0.5 for _ in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert review.check(tiny_config(reward_funcs=["my_rewards:f"]).to_dict(), ALLOWED).problems == []
    assert review.check(tiny_config(reward_funcs=["my_rewards:g"]).to_dict(), ALLOWED).problems == [
        "reward_funcs: custom reward 'my_rewards:g': my_rewards has no function g"
    ]


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie waiting for its reaper counts as ended)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_thread_or_process_left_running_at_import_neither_holds_the_answer_nor_outlives_the_check(
    tmp_path, monkeypatch
):
    """A module that starts a non-daemon thread (which holds a normal interpreter exit) and a process inheriting the
    child's output (which would hold a pipe open): the check answers, and the process is ended with it."""
    import time

    monkeypatch.setattr(user_code, "CHECK_SECONDS", 60.0)  # held back, the answer would be this limit's sentence
    marker = tmp_path / "left-running"
    path = tmp_path / "lingering.py"
    path.write_text(
        "import pathlib, subprocess, threading, time\n"
        "threading.Thread(target=time.sleep, args=(600,)).start()\n"
        "left = subprocess.Popen(['sleep', '600'])\n"
        f"pathlib.Path({str(marker)!r}).write_text(str(left.pid))\n"
        "def f(prompts, completions, **kw):\n    return [1.0, 0.0]\n"
    )
    assert review.check(tiny_config(reward_funcs=[f"{path}:f"]).to_dict(), ALLOWED).problems == []
    left = int(marker.read_text())
    while not _gone(left):  # killed with the child's session (pytest-timeout bounds the wait)
        time.sleep(0.05)
