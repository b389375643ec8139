"""Work that reports as it goes, for a Gradio generator event to show: :class:`Reported` runs the work in a thread and
hands its reports over as they come, so the event can ``yield`` each to the page while the work goes on (issue 59: a
sweep's probes and Compare's two sides said nothing but a timer for minutes).

Why a thread and not the work itself written as a generator: the work's callers are the command line and the API
too, which want a plain call; the work takes a callback (``on_probe``, ``progress``) and knows nothing of Gradio.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

_DONE = object()


class Reported:
    """``work(report)`` started in a daemon thread; iterating yields each value it passes to ``report``, in order,
    until it returns; :meth:`result` then returns what it returned or raises what it raised."""

    def __init__(self, work: Callable[[Callable[[Any], None]], Any], name: str = "reported") -> None:
        self._heard: queue.Queue = queue.Queue()
        self._outcome: tuple[bool, Any] | None = None
        self._ended = False  # whether iterating has met the end of the work
        threading.Thread(target=self._run, args=(work,), name=name, daemon=True).start()

    def _run(self, work: Callable[[Callable[[Any], None]], Any]) -> None:
        try:
            self._outcome = (True, work(self._heard.put))
        except BaseException as exc:  # handed to result(), in the caller's thread
            self._outcome = (False, exc)
        finally:
            self._heard.put(_DONE)

    def __iter__(self) -> Iterator[Any]:
        while not self._ended:
            item = self._heard.get()
            if item is _DONE:
                self._ended = True
            else:
                yield item

    def result(self) -> Any:
        """What the work returned, after iterating to the end; raises what it raised."""
        for _ in self:  # reports not read yet are dropped
            pass
        ok, value = self._outcome
        if not ok:
            raise value
        return value
