"""Which pytest-xdist process runs which group: the tests that mostly wait get a process of their own.

A few slow tests spend most of their time waiting, not computing: Slurm's shortest time limit (three minutes), an
outside lock held on the database for 46 s, a frozen worker, a PostgreSQL restart. Measured alone on a quiet machine
(the Slurm, fault, job-limit and outage modules): 345 s of wall time for 121 CPU-s. On two processes each of these
waits held one of the two cores' processes while the core idled; the suite's two cores were busy 68 % of a run.

So with ``-n 3`` or more the last process is the *waiting lane*: it runs the groups of tests marked
``@pytest.mark.waits`` (tests/conftest.py names their groups ``waits:...``), one after another, and nothing else; the
other processes run every other group. Two cores then run two processes' work and, beside it, the waits. With fewer
than three processes, or a run with no waiting test in it (the fast subset) or nothing but waiting tests, or once the
waiting lane's process is gone (a crash; its replacement takes any group), every process takes any group, as
pytest-xdist's own ``loadgroup`` does.

Groups are handed out in the order they were collected (tests/conftest.py puts the modules without slow tests
first), not reordered by their number of tests as ``loadgroup`` does: the fast modules' failures then show within
the first minute.
"""

from __future__ import annotations

from collections import OrderedDict

from xdist.scheduler import LoadGroupScheduling

WAITS_PREFIX = "waits:"  # the xdist group of a test marked @pytest.mark.waits starts with this


def waiting(scope: str) -> bool:
    """Whether the work unit ``scope`` is one of the waiting lane's. pytest-xdist names a unit by every group mark
    its tests carry, sorted and joined with "_" (a module's mark beside the test's own, say), so the waiting mark's
    name is looked for anywhere in it."""
    return WAITS_PREFIX in scope


class LaneScheduling(LoadGroupScheduling):
    """``loadgroup`` with a waiting lane (the module's docstring): ``waiter`` is the process that runs only the
    waiting groups, None when there is no such lane."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self.waiter = None

    def schedule(self) -> None:
        """The first call builds the queue in collection order, picks the waiting lane and hands out the first
        units; later calls (a process added after a crash) hand out more."""
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self._reschedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.registered_collections.values())))
        if not self.collection:
            return
        queue: OrderedDict[str, dict[str, bool]] = OrderedDict()
        for nodeid in self.collection:
            queue.setdefault(self._split_scope(nodeid), {})[nodeid] = False
        self.workqueue = queue
        if len(self.nodes) >= 3 and any(map(waiting, queue)) and not all(map(waiting, queue)):
            # the last process by its number: the same one in every run, whichever was ready first
            self.waiter = max(self.nodes, key=lambda node: _number(node.gateway.id))
        for node in self.nodes:
            self._reschedule(node)

    def _takes(self, node, scope: str) -> bool:
        """Whether ``node`` may run the unit ``scope``."""
        if self.waiter is None or self.waiter not in self.assigned_work:  # no lane, or its process is gone
            return True
        return waiting(scope) == (node is self.waiter)

    def _next_unit(self, node) -> str | None:
        """The first queued unit ``node`` may run. A unit whose tests have all run is dropped on the way: xdist's
        ``remove_node`` puts a crashed process's every unit back in the queue, finished ones too."""
        for scope, work_unit in list(self.workqueue.items()):
            if all(work_unit.values()):
                del self.workqueue[scope]
            elif self._takes(node, scope):
                return scope
        return None

    def _assign_work_unit(self, node) -> None:
        """Give ``node`` the first queued unit it may run, if any."""
        scope = self._next_unit(node)
        if scope is None:
            return
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

    def _reschedule(self, node) -> None:
        """As ``loadgroup``'s: another unit when ``node`` has two tests or fewer left (more while it has fewer than
        two), and a shutdown once nothing queued is for it. A worker starts a test only when another is queued behind
        it or it was told to shut down, so a node is never left holding a single test with neither (after a crash, a
        replacement would wait on it forever)."""
        if node.shutting_down:
            return
        if self._pending_of(self.assigned_work[node]) <= 2:
            self._assign_work_unit(node)
        while self._pending_of(self.assigned_work[node]) < 2 and self._next_unit(node) is not None:
            self._assign_work_unit(node)
        if self._next_unit(node) is None:
            node.shutdown()  # it finishes what it has first


def _number(gateway_id: str) -> int:
    """gw0 -> 0, gw12 -> 12 (anything else sorts first)."""
    digits = gateway_id.removeprefix("gw")
    return int(digits) if digits.isdigit() else -1
