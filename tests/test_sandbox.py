"""The code sandbox: hostile solutions are stopped or refused within the limit, the test process survives, and
nothing is left running. Plus the code_tests reward on the built-in code problems."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from trainer.code_tasks import CODE_PROBLEMS
from trainer.rewards import REWARDS, extract_code
from trainer.sandbox import Limits, run_many, run_tests

LIMITS = Limits(wall_seconds=3.0, cpu_seconds=2, memory_mb=256, max_processes=8)


def _leftovers(marker: str) -> list[int]:
    """Processes whose command line or environment mentions ``marker`` (a sandboxed child that outlived its run)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _run(code: str, tests=("assert True",)):
    started = time.monotonic()
    verdict = run_tests(code, list(tests), LIMITS)
    return verdict, time.monotonic() - started


def test_a_correct_solution_passes_every_test():
    problem = CODE_PROBLEMS[0]
    verdict = run_tests(problem["answer"], problem["tests"], LIMITS)
    assert (verdict.passed, verdict.total, verdict.status, verdict.score) == (4, 4, "ok", 1.0)


def test_every_builtin_reference_solution_passes():
    verdicts = run_many([(p["answer"], p["tests"]) for p in CODE_PROBLEMS], LIMITS)
    assert [v.score for v in verdicts] == [1.0] * len(CODE_PROBLEMS)


def test_infinite_loop_is_stopped_within_the_limit():
    verdict, seconds = _run("while True:\n    pass")
    assert verdict.status == "timeout" and verdict.score == 0.0
    assert seconds < LIMITS.wall_seconds + 2


def test_fork_bomb_is_contained_and_leaves_nothing_behind():
    marker = f"forkbomb-{uuid.uuid4().hex}"
    code = f"import os, sys\nsys.argv.append({marker!r})\nwhile True:\n    os.fork()"
    verdict, seconds = _run(code)
    assert verdict.score == 0.0 and seconds < LIMITS.wall_seconds + 2
    time.sleep(0.5)
    assert _leftovers(marker) == []


def test_ten_gigabyte_allocation_is_refused():
    verdict, seconds = _run("x = bytearray(10 * 1024**3)")
    assert verdict.score == 0.0 and "MemoryError" in verdict.detail and seconds < LIMITS.wall_seconds + 2


def test_writing_outside_the_working_directory_is_refused(tmp_path):
    target = tmp_path / "escaped.txt"
    verdict, _ = _run(f"open({str(target)!r}, 'w').write('x')")
    assert verdict.score == 0.0 and not target.exists()
    verdict, _ = _run("open('inside.txt', 'w').write('fine')\nassert open('inside.txt').read() == 'fine'")
    assert verdict.status == "ok"


def test_environment_secrets_are_not_inherited(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    verdict, _ = _run(
        "import os\nleaked = [k for k in os.environ if 'TOKEN' in k or 'KEY' in k]",
        ["assert leaked == []", "assert 'hf_secret' not in str(dict(__import__('os').environ))"],
    )
    assert verdict.passed == 2


def test_network_connections_are_refused():
    code = "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)"
    verdict, seconds = _run(code)
    assert verdict.score == 0.0 and "not allowed" in verdict.detail and seconds < LIMITS.wall_seconds + 2
    verdict, _ = _run("import _socket\ns = _socket.socket()\ns.connect(('127.0.0.1', 22))")
    assert verdict.score == 0.0


def test_syntax_error_scores_zero():
    verdict, _ = _run("def f(:\n  pass")
    assert verdict.status == "syntax_error" and verdict.score == 0.0


def test_code_is_taken_from_a_fence_or_the_answer_tag():
    assert extract_code("text\n```python\nx = 1\n```\nmore") == "x = 1\n"
    assert extract_code("<answer>\nx = 2\n</answer>") == "x = 2"
    assert extract_code("no code here") is None


def test_code_tests_reward_scores_a_group_in_parallel():
    reward = REWARDS["code_tests"]
    p = CODE_PROBLEMS[0]
    good = f"```python\n{p['answer']}\n```"
    partial = "```python\ndef two_sum(nums, target):\n    return [0, 1]\n```"
    completions = [good, partial, "no code", "```python\nwhile True: pass\n```"] * 4
    started = time.monotonic()
    scores = reward(prompts=[None] * 16, completions=completions, tests=[p["tests"]] * 16)
    assert scores[:4] == [1.0, 0.5, 0.0, 0.0] and scores == scores[:4] * 4
    assert time.monotonic() - started < 30
    assert reward(prompts=[None], completions=[good]) == [None]  # no tests column: not applicable


def test_test_process_survives_everything():
    assert os.getpid() > 0  # reaching here after the hostile runs above is the point
