"""The untrusted half of ``code_tests``: a small loop that runs inside the sandbox, next to the candidate's code.

Nobody trusts it. The candidate's code runs in this same interpreter and may rewrite any of it, patch ``json``, write
to its pipes or exit. Its only job is to make honest code easy to call: it reads call requests ("call ``two_sum``
with these arguments"), calls the function and writes back the return value as plain data. The worker decodes
whatever arrives and judges it itself (:mod:`trainer.scoring.judge`), so a rewritten loop changes nothing but the values its
own functions are reported to return, which the candidate decides anyway. It never sees a test or an expected value.

This file is also the wire format both sides share: frames of a 4-byte big-endian length and a UTF-8 JSON document.
Values are JSON with tuples, sets and dicts tagged (``{"tuple": [...]}``, ``{"set": [...]}``,
``{"dict": [[key, value], ...]}``) so that ``(1, 2)`` and ``[1, 2]`` stay as different as they are in Python, and
only exact builtin types are encoded: an ``int`` subclass whose ``__eq__`` is always True is refused, not sent.

It runs as ``python -I -S -c <this source> <fd in> <fd out> <limits...>`` and imports only the standard library.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time

_HEADER = struct.Struct(">I")
_SCALARS = (bool, int, float, str)


class WireError(ValueError):
    """A value or frame that isn't plain data in the wire format."""


def _is_scalar(value, depth: int) -> bool:
    """Whether ``value`` is None or an exact builtin scalar (passed through as is); raises WireError past 100 levels
    of nesting, on the way in and out alike."""
    if depth > 100:
        raise WireError("nested more than 100 levels deep")
    return value is None or type(value) in _SCALARS


def encode(value, depth: int = 0):
    """``value`` as JSON-ready data, if it is built of exact builtin types only; raises WireError otherwise."""
    if _is_scalar(value, depth):
        return value
    kind = type(value)
    if kind is dict:
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind in (tuple, set, frozenset):
        return {kind.__name__: [encode(v, depth + 1) for v in value]}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    raise WireError(f"{kind.__name__} is not plain data (None, bool, int, float, str, list, tuple, set, dict)")


# At most this many values (scalars and containers) in one decoded answer. A unit test's answer is a few values; the
# bound keeps what the worker does with an answer small whatever the code sends, e.g. a set of ints that all hash
# alike (n * (2**61 - 1)), which costs a quadratic number of comparisons to build or to pass to set().
MAX_VALUES = 4_000


class Budget:
    """What decoding one answer may spend: a number of values and a deadline (``time.monotonic()``), checked as it
    goes, so the job's time limit covers decoding too."""

    def __init__(self, deadline: float | None = None, values: int = MAX_VALUES) -> None:
        self.deadline, self.left = deadline, values

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise WireError(f"an answer of more than {MAX_VALUES:,} values")
        if self.deadline is not None and self.left % 64 == 0 and time.monotonic() > self.deadline:
            raise WireError("the answer took too long to decode")


def decode(data, depth: int = 0, budget: Budget | None = None):
    """The value a JSON document built by :func:`encode` stands for; raises WireError on anything else, or when it
    spends more than ``budget`` (a fresh one per answer when not given). Sets and dict keys are added one at a
    time under the budget, never handed to ``set()`` whole."""
    budget = budget or Budget()
    budget.spend()
    if _is_scalar(data, depth):
        return data
    kind = type(data)
    if kind is list:
        return [decode(v, depth + 1, budget) for v in data]
    if kind is dict and len(data) == 1:
        ((tag, items),) = data.items()
        if type(items) is list:
            try:
                if tag == "tuple":
                    return tuple(decode(v, depth + 1, budget) for v in items)
                if tag in ("set", "frozenset"):
                    members = set()
                    for v in items:
                        members.add(decode(v, depth + 1, budget))
                    return members if tag == "set" else frozenset(members)
                if tag == "dict" and all(type(p) is list and len(p) == 2 for p in items):
                    mapping = {}
                    for k, v in items:
                        mapping[decode(k, depth + 1, budget)] = decode(v, depth + 1, budget)
                    return mapping
            except TypeError as exc:  # an unhashable set member or key
                raise WireError(str(exc)) from None
    raise WireError(f"not a value in the wire format: {str(data)[:80]}")


def frame(message: dict) -> bytes:
    """One frame: length, then the JSON document."""
    body = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _limit_self(cpu_seconds: int, memory_bytes: int, max_processes: int, file_bytes: int, open_files: int) -> None:
    """Resource limits, set before a line of the candidate's code is read; it can lower them but never raise them
    (that takes CAP_SYS_RESOURCE in the host's user namespace). The process limit is set here, inside the job's own
    user namespace, so it counts this job's processes only, not every sandbox running as the same user."""
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))  # SIGXCPU, then SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def serve(argv: list[str]) -> None:
    """Read the code, run it, then answer call requests until the worker closes the pipe."""
    requests, replies, max_reply, *limits = (int(a) for a in argv)
    _limit_self(*limits)
    # The candidate's prints and tracebacks go nowhere: the replies pipe is the only way out, and it carries values.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

    def receive() -> dict:
        (size,) = _HEADER.unpack(_read_exact(requests, _HEADER.size))
        return json.loads(_read_exact(requests, size))

    def send(message: dict) -> None:
        data = frame(message)
        if len(data) > max_reply:
            data = frame({"error": f"the answer is over {max_reply} bytes"})
        while data:
            data = data[os.write(replies, data) :]

    namespace = {"__name__": "__solution__", "__builtins__": __builtins__}
    try:
        exec(compile(receive()["code"], "solution.py", "exec"), namespace)
    except SyntaxError as exc:
        send({"error": _error(exc), "kind": "syntax_error"})
        return
    except BaseException as exc:  # SystemExit and KeyboardInterrupt from the candidate too
        send({"error": _error(exc), "kind": "error"})
        return
    send({"ready": True})
    while True:
        try:
            request = receive()
        except EOFError:
            return
        try:
            func = namespace.get(request["call"])
            if not callable(func):
                raise NameError(f"name {request['call']!r} is not defined as a function")
            args = decode(request["args"])
            kwargs = decode(request["kwargs"])
            send({"value": encode(func(*args, **kwargs))})
        except BaseException as exc:
            send({"error": _error(exc)})


if __name__ == "__main__":
    serve(sys.argv[1:])
