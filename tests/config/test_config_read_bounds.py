"""Reading a config is bounded by its size and the work it costs, never by the wall clock (issue 58.7): a 10 s
wall-clock limit refused a valid 1.5 KB config on a loaded machine, where the reading child's start alone took that
long. A child that waits for a CPU costs nothing; one that works too long, or a document with too many values, is
one sentence."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import psutil
import pytest

from tests.helpers import tiny_config, wait_for
from trainer.config.file import MAX_NODES, ConfigFileError, read_mapping, read_mapping_isolated


def test_a_flow_list_of_half_a_million_values_is_refused_while_it_is_parsed(tmp_path):
    """1 MB of ``[1,1,...]``: PyYAML built all 500,000 nodes (10 CPU-seconds, 400 MB) before they were counted."""
    path = tmp_path / "flow.yaml"
    path.write_text("x: [" + ",".join(["1"] * 499_000) + "]\n")
    with pytest.raises(ConfigFileError) as refused:
        read_mapping(path)
    assert str(refused.value) == f"{path}: holds more than {MAX_NODES:,} values; a run config is a flat mapping"


def test_a_reader_that_works_past_its_cpu_time_is_one_sentence(tmp_path):
    path = tmp_path / "flow.yaml"
    path.write_text("x: [" + ",".join(["1"] * 99_000) + "]\n")  # under MAX_NODES: parsed whole, about a CPU-second
    with pytest.raises(ConfigFileError) as refused:
        read_mapping_isolated(path, cpu_seconds=0)  # 0: the limit is reached by the child's start
    assert str(refused.value) == f"{path}: reading it used more than its 0 CPU-seconds; a run config is a few KB"


@pytest.mark.slow  # holds the reader stopped for longer than the old limit
def test_a_reader_held_up_longer_than_any_wall_clock_limit_still_reads_the_config(tmp_path, monkeypatch):
    """The child stops itself (SIGSTOP) as it starts, before Python is run in it, and is let go after 12 s, past the
    old 10 s limit: as a machine at load 23 held its start. The config it reads is a real one, about 1.5 KB."""
    path = tmp_path / "run.yaml"
    tiny_config(name="held-up").save(path)
    assert 1_000 < path.stat().st_size < 3_000
    run = subprocess.run

    def held_at_start(*args, preexec_fn, **kwargs):
        def stop_first():
            preexec_fn()
            os.kill(os.getpid(), signal.SIGSTOP)

        return run(*args, preexec_fn=stop_first, **kwargs)

    monkeypatch.setattr(subprocess, "run", held_at_start)
    result: dict = {}
    reader = threading.Thread(target=lambda: result.update(read_mapping_isolated(path)))
    reader.start()
    me = psutil.Process(os.getpid())
    stopped = wait_for(
        lambda: next((p for p in me.children() if p.status() == psutil.STATUS_STOPPED), None), 60, "the held child"
    )
    time.sleep(12)  # the fault: a child that waits, not a duration asserted
    assert reader.is_alive()  # still waiting for it, not refused
    stopped.send_signal(signal.SIGCONT)
    reader.join(timeout=120)
    assert result["name"] == "held-up" and result["max_steps"] == tiny_config().max_steps
