"""The suite's scheduler (tests/suite/xdist_lanes.py), driven through a whole run with stand-ins for pytest-xdist's worker
processes that keep its contract (``gateway.id``, ``send_runtest_some``, ``shutdown``, ``shutting_down``): with three
processes the tests marked ``waits`` run in the last one and nowhere else; with two, or with no waiting test in the
run, every process takes any group; every test runs exactly once, its group on one process, in collection order."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.suite.xdist_lanes import LaneScheduling

COLLECTION = [
    "suite/test_fast.py::test_a@suite.test_fast",
    "suite/test_fast.py::test_b@suite.test_fast",
    "suite/test_slurm.py::test_limit@waits:slurm-time-limit",
    "suite/test_slurm.py::test_array@waits:slurm-time-limit",
    "suite/test_other.py::test_c@suite.test_other",
    "suite/test_slurm.py::test_requeue@waits:slurm-requeue",
    "suite/test_browser.py::test_d@suite.test_browser",
    "suite/test_browser.py::test_e@suite.test_browser",
    "suite/test_browser.py::test_f@suite.test_browser",
    "suite/test_faults.py::test_lock@a-module-mark_waits:suite.test_faults",  # xdist joins a test's group names
    "suite/test_learning.py::test_g@suite.test_learning",
]


class Worker:
    """A stand-in for xdist's WorkerController: the indexes it was sent, in order. Like the real worker
    (xdist/remote.py, ``run_one_test``), it starts a test only once another index is queued behind it or it was told
    to shut down."""

    def __init__(self, number: int) -> None:
        self.gateway = SimpleNamespace(id=f"gw{number}")
        self.sent: list[int] = []
        self.done: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes) -> None:
        assert not self.shutting_down, f"{self.gateway.id} was sent work after it was shut down"
        assert indexes, f"{self.gateway.id} was sent no test: it would never report back"
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True

    def pending(self) -> list[int]:
        return [i for i in self.sent if i not in self.done]

    def can_run(self) -> bool:
        return len(self.pending()) >= 2 or (self.shutting_down and bool(self.pending()))


def scheduler(workers: list[Worker], collection=COLLECTION) -> LaneScheduling:
    config = SimpleNamespace(
        getvalue=lambda name: {"tx": [f"{len(workers)}*popen"]}[name],
        option=SimpleNamespace(loadscopereorder=True),
    )
    sched = LaneScheduling(config)
    for worker in reversed(workers):  # ready in another order than their numbers
        add(sched, worker, collection)
    sched.schedule()
    return sched


def add(sched: LaneScheduling, worker: Worker, collection=COLLECTION) -> None:
    """What xdist does with a process that is ready and has collected."""
    sched.add_node(worker)
    sched.add_node_collection(worker, list(collection))


def complete(sched: LaneScheduling, worker: Worker) -> None:
    """The worker's next test reports."""
    index = worker.pending()[0]
    worker.done.append(index)
    sched.mark_test_complete(worker, index)


def run_to_the_end(sched: LaneScheduling, workers: list[Worker]) -> None:
    """Complete the workers' tests one at a time, round robin, as their reports would arrive; fails where no worker
    can go on (the run would hang)."""
    while any(w.pending() for w in workers):
        runnable = [w for w in workers if w.can_run()]
        assert runnable, f"the run hangs: {[(w.gateway.id, w.pending(), w.shutting_down) for w in workers]}"
        for worker in runnable:
            complete(sched, worker)
    assert sched.tests_finished and all(w.shutting_down for w in workers)


def groups(worker: Worker, collection=COLLECTION) -> list[str]:
    """The groups ``worker`` ran, in the order it got them."""
    return list(dict.fromkeys(collection[i].split("@")[1] for i in worker.sent))


def test_with_three_processes_the_last_runs_the_waiting_groups_and_nothing_else():
    workers = [Worker(0), Worker(1), Worker(2)]
    sched = scheduler(workers)
    assert sched.waiter is workers[2]
    run_to_the_end(sched, workers)
    assert groups(workers[2]) == [
        "waits:slurm-time-limit",
        "waits:slurm-requeue",
        "a-module-mark_waits:suite.test_faults",
    ]
    others = groups(workers[0]) + groups(workers[1])
    assert sorted(others) == sorted(
        ["suite.test_fast", "suite.test_other", "suite.test_browser", "suite.test_learning"]
    )
    assert sorted(workers[0].sent + workers[1].sent + workers[2].sent) == list(range(len(COLLECTION)))


def test_groups_are_handed_out_in_collection_order_not_by_their_size():
    workers = [Worker(0), Worker(1), Worker(2)]
    sched = scheduler(workers)
    run_to_the_end(sched, workers)
    first = [COLLECTION[w.sent[0]].split("@")[1] for w in workers[:2]]
    assert "suite.test_fast" in first  # the browser group has more tests, but was collected later


@pytest.mark.parametrize("count", [1, 2])
def test_with_fewer_than_three_processes_there_is_no_waiting_lane(count):
    workers = [Worker(n) for n in range(count)]
    sched = scheduler(workers)
    assert sched.waiter is None
    run_to_the_end(sched, workers)
    assert sorted(sum((w.sent for w in workers), [])) == list(range(len(COLLECTION)))


def test_a_run_without_waiting_tests_uses_every_process_for_the_work():
    collection = [nodeid for nodeid in COLLECTION if "waits:" not in nodeid]
    workers = [Worker(0), Worker(1), Worker(2)]
    sched = scheduler(workers, collection)
    assert sched.waiter is None
    run_to_the_end(sched, workers)
    assert all(w.sent for w in workers)


def test_when_the_waiting_lanes_process_is_gone_the_others_take_its_groups():
    workers = [Worker(0), Worker(1), Worker(2)]
    sched = scheduler(workers)
    crashed = workers[2]
    complete(sched, crashed)
    assert sched.remove_node(crashed) is not None  # it had tests left: they go back to the queue
    run_to_the_end(sched, workers[:2])
    ran = {COLLECTION[i].split("@")[1] for w in workers[:2] for i in w.sent}
    assert {"waits:slurm-requeue", "a-module-mark_waits:suite.test_faults"} <= ran


def test_a_waiting_lane_that_crashes_after_the_others_ended_is_finished_by_its_replacement():
    """The work lanes have run everything and shut down when the waiting lane's process dies with units queued
    (xdist puts back all of its units, the finished ones too); xdist starts a replacement, which runs what is left
    once each, without hanging on a finished unit or a lone test."""
    workers = [Worker(0), Worker(1), Worker(2)]
    sched = scheduler(workers)
    waiter = workers[2]
    while not all(w.shutting_down and not w.pending() for w in workers[:2]):
        for worker in workers[:2]:
            if worker.can_run():
                complete(sched, worker)
    for _ in range(3):  # the first waiting unit (two tests) and the start of the next
        complete(sched, waiter)
    sched.remove_node(waiter)  # crashed: the test it was on is reported as failed by xdist
    replacement = Worker(3)
    add(sched, replacement)
    sched.schedule()
    run_to_the_end(sched, [replacement])
    runs = [i for w in workers + [replacement] for i in w.done]  # the crashed test ran again, on the replacement
    assert sorted(runs) == list(range(len(COLLECTION)))


def test_a_run_of_nothing_but_waiting_tests_spreads_them_over_every_process():
    collection = [nodeid for nodeid in COLLECTION if "waits:" in nodeid]
    workers = [Worker(0), Worker(1), Worker(2)]
    sched = scheduler(workers, collection)
    assert sched.waiter is None
    run_to_the_end(sched, workers)
    assert sum(bool(w.sent) for w in workers) >= 2  # not all on the one process a lane would have had
