"""Checking a user's own code (custom rewards, tools, an environment) in a process of its own, never in the process
that asks: ``python -m trainer.scoring.user_code``, started by :func:`run_in_child`.

Importing a user's file runs its code. Checked inside the dashboard (``--allow-custom-rewards``), a reward module
that set ``os.environ[...]`` as it was imported set it in the dashboard, and every run the dashboard started
afterwards inherited it (issue 58); a global it wrote, a working directory it changed, a library it patched or a
module it left in ``sys.modules`` stayed there as well. Here the import and the dry run happen in a child that ends
with the check, so whatever the code did to its process ends with it. The child is given the asking process's
environment, working directory and ``sys.path``, so it finds and sees what the asker would have.

The request is one JSON object on the child's standard input: ``check`` (``module:function`` of this package's own
code, called with ``args``; it returns a list of problems) and ``path`` (the asker's ``sys.path``). The answer is a
JSON list on a descriptor of its own (the standard output's, duplicated before any user code runs); file descriptor 1
and ``sys.stdout`` are pointed at standard error first, so a ``print`` in the user's module never reaches the answer.
A check that has not answered after :data:`CHECK_SECONDS` is killed, and a child that ends without an answer (the
code called ``sys.exit`` or ``os._exit`` as it was imported, or was killed) is reported: each in one sentence. The
child runs in a session of its own, killed whole once it has answered: a thread or a process the code started as it was
imported neither holds the answer back nor outlives the check.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import Any

# A user's module that takes longer than this to import and score two completions (or loops forever) is refused
# rather than holding the check: generous, since a real one imports its libraries (numpy, a tokenizer) here.
CHECK_SECONDS = 120.0
MODULE = "trainer.scoring.user_code"
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_in_child(check: str, args: list[Any], setting: str) -> list[str]:
    """The problems ``check`` (``module:function``, this package's own) finds when called with ``args`` in a child
    process; a child that fails to answer gives one problem naming ``setting`` (so a form marks that field)."""
    request = json.dumps({"check": check, "args": args, "path": list(sys.path)})
    env = dict(os.environ)
    # the child must find this package even where the asker's sys.path came from elsewhere (a console script)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    # Files, not pipes, for what comes back: a process the user's code starts as it is imported inherits them, and a
    # pipe would then stay open after the child ended (waited on until the limit). Its session is killed after it.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            [sys.executable, "-m", MODULE],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            env=env,
            start_new_session=True,
        )
        try:
            child.stdin.write(request.encode())
            child.stdin.close()
            code = child.wait(timeout=CHECK_SECONDS)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            code = None
        finally:
            try:
                os.killpg(child.pid, signal.SIGKILL)  # the child (at the limit) and whatever it left behind
            except (ProcessLookupError, PermissionError):
                pass
            child.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code is None:
        return [
            f"{setting}: checking your own code did not finish within {CHECK_SECONDS:.0f} s (its import and a dry run "
            "on two sample completions): it was stopped; look for a loop or a slow download at its import"
        ]
    try:
        answer = json.loads(stdout)
    except ValueError:
        answer = None
    if isinstance(answer, list) and all(isinstance(p, str) for p in answer):
        return answer
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
    said = f": {last[:300]}" if last else ""
    return [
        f"{setting}: checking your own code ended without an answer (exit status {code}{said}); "
        "does it exit or kill its process when imported?"
    ]


def _serve() -> None:
    """The child's side: read the request, run the check with the user's output sent to standard error, write the
    answer."""
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the user's code writes to fd 1 or sys.stdout goes to standard error
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.read())
    sys.path[:] = request["path"] + [p for p in sys.path if p not in request["path"]]
    module, _, name = request["check"].partition(":")
    problems = getattr(importlib.import_module(module), name)(*request["args"])
    answer.write(json.dumps(list(problems)))
    answer.flush()
    sys.stderr.flush()
    os._exit(0)  # now: a thread the user's code left running would hold a normal exit


if __name__ == "__main__":
    _serve()
