"""Whether a process exists, the one probe both the launcher's liveness check and the GPU lease's holder check use."""

from __future__ import annotations

import os


def process_exists(pid: int) -> bool:
    """Whether ``pid`` names a process (signal 0 probes without sending; a process of another user exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
