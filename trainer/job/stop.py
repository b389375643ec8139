"""A stop request: set by SIGTERM or SIGINT, read by the training loop at its next step boundary.

Its own module, importing the standard library only, so the worker process can route the signals here before it
imports anything else (trainer.job.worker): a stop asked while a worker is still starting is then heard, not fatal.
"""

from __future__ import annotations

import logging
import signal
import threading

log = logging.getLogger(__name__)


class StopRequest:
    """Set by SIGTERM/SIGINT; the training callback ends the run at the next step boundary when it is set."""

    def __init__(self) -> None:
        self.event = threading.Event()

    @property
    def requested(self) -> bool:
        """True once a stop was asked for."""
        return self.event.is_set()

    def install(self) -> dict:
        """Route SIGTERM and SIGINT here; returns the previous handlers. A second SIGINT raises KeyboardInterrupt
        (stop now, not at the step end)."""

        def handler(signum, _frame):
            if signum == signal.SIGINT and self.requested:
                raise KeyboardInterrupt
            log.warning("received %s: stopping at the next step boundary", signal.Signals(signum).name)
            self.event.set()

        return {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
