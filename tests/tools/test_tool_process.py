"""Issue 58.2: a user's tool can't hang a run. Every call runs in the run's tool process (trainer.tools.process),
killed at the call's limit or at once when the run is asked to stop: an ``async`` tool that blocks its event loop
(which ``asyncio.wait_for`` could not interrupt) and a sync tool that hangs each answer the limit's error, leave no
thread behind (the old wrapper left one per hung call), and Stop ends a call that has no limit in sight. The tools are
real files imported by the child, as a run's are; each writes its process id where the test can check it ended."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from pathlib import Path

import pytest

from trainer.tools.limits import LOST
from trainer.tools.loading import trainer_arguments
from trainer.tools.process import STOPPED

TOOLS = '''
import asyncio, os, subprocess, sys, time
from pathlib import Path

MARK = Path(os.environ["TOOL_MARKS"])


def _mark(name):
    (MARK / name).write_text(str(os.getpid()))


async def block(seconds: float) -> str:
    """Block the event loop as a careless async tool does (time.sleep, not asyncio.sleep).

    Args:
        seconds: How long.
    """
    _mark("block")
    time.sleep(seconds)
    return "woke"


def hang(seconds: float) -> str:
    """Sleep.

    Args:
        seconds: How long.
    """
    _mark("hang")
    time.sleep(seconds)
    return "woke"


def spawn(seconds: float) -> str:
    """Start a process that outlives the call, then hang.

    Args:
        seconds: How long.
    """
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    (MARK / "grandchild").write_text(str(child.pid))
    time.sleep(seconds)
    return "woke"


def hog(megabytes: int) -> str:
    """Allocate memory.

    Args:
        megabytes: How much.
    """
    return str(len(bytearray(megabytes * 1024 * 1024)))


def flood(megabytes: int) -> str:
    """Answer with a long text.

    Args:
        megabytes: How long.
    """
    return "x" * (megabytes * 1024 * 1024)


def chatty(text: str) -> str:
    """Print, then answer.

    Args:
        text: What to say.
    """
    print("noise on stdout " * 100)
    os.environ["SET_BY_A_TOOL"] = "1"
    return text


class Counter:
    """Counts its calls; one call of it hangs.

    Args: none.
    """

    def __init__(self):
        self.calls = 0

    def reset(self, **row):
        self.calls = 0

    def count(self, seconds: float) -> str:
        """Count a call, after sleeping.

        Args:
            seconds: How long.
        """
        self.calls += 1
        time.sleep(seconds)
        return str(self.calls)

    def get_reward(self) -> float:
        return float(self.calls)
'''


@pytest.fixture
def tools(tmp_path, monkeypatch) -> Path:
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("TOOL_MARKS", str(marks))  # the child inherits it
    path = tmp_path / "user_tools.py"
    path.write_text(TOOLS)
    return path


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie not yet reaped by its parent counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _pid(tools: Path, name: str) -> int:
    return int((tools.parent / "marks" / name).read_text())


def test_a_blocking_async_tool_answers_the_limit_and_its_process_is_killed(tools):
    before = threading.active_count()
    block = trainer_arguments([f"{tools}:block"], "", 0.3)["tools"][0]
    assert block(3600) == "error: the tool took longer than 0.3 s"
    assert _gone(_pid(tools, "block"))
    assert block(0) == "woke"  # a fresh process answers the next call
    assert threading.active_count() == before


def test_a_hanging_sync_tool_leaves_no_thread_per_call(tools):
    """The audit's count: 32 threads became 54 in 3 steps with a thread per hung call."""
    before = threading.active_count()
    hang = trainer_arguments([f"{tools}:hang"], "", 0.2)["tools"][0]
    pids = []
    for _ in range(5):
        assert hang(3600) == "error: the tool took longer than 0.2 s"
        pids.append(_pid(tools, "hang"))
        assert threading.active_count() == before
    assert len(set(pids)) == 5 and all(_gone(pid) for pid in pids)


@pytest.mark.parametrize("name", ["block", "hang"])
def test_stop_ends_a_call_with_no_limit_in_sight(tools, name):
    """tool_timeout_s at its largest (an hour): only the run's stop request, set while the tool blocks, ends the
    call, and its process with it."""
    stop = threading.Event()
    tool = trainer_arguments([f"{tools}:{name}"], "", 3600.0, stop)["tools"][0]
    mark = tools.parent / "marks" / name

    def stop_once_called():
        while not mark.exists():
            time.sleep(0.05)
        stop.set()

    asker = threading.Thread(target=stop_once_called)
    asker.start()
    assert tool(3600) == STOPPED
    asker.join()
    assert _gone(_pid(tools, name))
    assert tool(0) == STOPPED  # a stopping run calls no tool again


def test_a_process_the_tool_started_is_killed_with_it(tools):
    spawn = trainer_arguments([f"{tools}:spawn"], "", 0.5)["tools"][0]
    assert spawn(3600) == "error: the tool took longer than 0.5 s"
    grandchild = _pid(tools, "grandchild")
    for _ in range(100):  # SIGKILL to the group is delivered at once; /proc may show it a moment later
        if _gone(grandchild):
            break
        time.sleep(0.05)
    assert _gone(grandchild)


def test_a_tool_is_bounded_in_memory_and_in_the_size_of_its_answer(tools):
    hog, flood = trainer_arguments([f"{tools}:hog", f"{tools}:flood"], "", 30.0)["tools"]
    assert hog(8192) == "error: MemoryError"  # 8 GiB against the child's 4 GiB address space
    assert hog(1) == str(1024 * 1024)
    assert flood(20) == "error: the tool's answer is larger than 16 MiB"
    assert flood(1) == "x" * 1024 * 1024


def test_a_tools_print_and_environment_stay_in_its_process(tools):
    chatty = trainer_arguments([f"{tools}:chatty"], "", 5.0)["tools"][0]
    assert chatty("hello") == "hello" and chatty("again") == "again"  # its stdout never reached the replies
    assert "SET_BY_A_TOOL" not in os.environ


def test_an_environment_keeps_its_state_in_the_process_and_says_when_a_kill_lost_it(tools):
    env_class = trainer_arguments([], f"{tools}:Counter", 0.5)["environment_factory"]
    assert env_class.__name__ == "Counter"
    first, second = env_class(), env_class()
    assert first.count(0) == "1" and first.count(0) == "2" and second.count(0) == "1"
    assert (first.calls, second.calls, first.get_reward()) == (2, 1, 2.0)
    assert second.count(3600) == "error: the tool took longer than 0.5 s"  # kills the process: both lose their state
    assert first.count(0) == LOST and first.get_reward() is None
    with pytest.raises(AttributeError, match="lost when a call ran past its limit"):
        first.calls  # noqa: B018 - the read is the test
    assert first.reset(question="next") is None and first.count(0) == "1"  # reset makes it afresh
    first.calls = 5  # a write reaches the instance too
    assert first.get_reward() == 5.0


@pytest.mark.slow
def test_stop_ends_a_run_whose_async_tool_blocks(tools, tmp_path, monkeypatch):
    """The audit's run: every completion calls an async tool that blocks for an hour (tool_timeout_s an hour too);
    Stop, asked once the tool is blocking, ends the run ``stopped`` after its first step instead of never. The tiny
    model writes no tool call itself, so TRL's parser reads one in each first-pass completion (as
    tests/tools/test_tools_training.py does)."""
    import trl.trainer.grpo_trainer as grpo_trainer

    from tests.helpers import create_run, run_row, tiny_with_tool_template
    from tests.tools.test_tools_training import one_step
    from trainer.job.stop import StopRequest
    from trainer.job.worker import run_worker

    parsed = {"calls": 0}

    def parse(tokenizer, ids, prefix=None, tools=None):
        parsed["calls"] += 1
        if parsed["calls"] <= 4:
            call = {"type": "function", "function": {"name": "block", "arguments": {"seconds": 3600}}}
            return {"role": "assistant", "content": "", "tool_calls": [call]}
        return {"role": "assistant", "content": "done"}

    monkeypatch.setattr(grpo_trainer, "parse_response", parse)
    model = tiny_with_tool_template(tmp_path / "tiny-qwen-template")
    config = one_step(model, tools=[f"{tools}:block"], tool_timeout_s=3600.0, name="blocked")
    config = dataclasses.replace(config, max_steps=3)  # a second step that must never run
    run_id = create_run(config)
    stop = StopRequest()
    mark = tools.parent / "marks" / "block"

    def stop_once_blocked():
        while not mark.exists():
            time.sleep(0.1)
        stop.event.set()  # what SIGTERM's handler does (trainer.job.stop)

    asker = threading.Thread(target=stop_once_blocked, daemon=True)
    asker.start()
    status = run_worker(run_id, stop=stop)
    asker.join()
    run = run_row(run_id)
    assert (str(status), run.status, run.current_step) == ("stopped", "stopped", 1)
    assert _gone(_pid(tools, "block"))
