"""The supervisor and the training process are two rooms (issue 39, item 5): trainer/supervise/ runs in the dashboard
and the CLI, so importing every module of it loads no torch and none of the training process's modules; the worker
is started by module name instead (and that name is a module that exists)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from tests.conftest import ROOT

# every module of trainer/job/ is the worker's (the slurm executor's rules, once there, are trainer/config/cluster.py)
NOT_THE_WORKERS: set[str] = set()


def test_importing_the_supervisor_loads_no_torch_and_none_of_the_training_process():
    names = sorted(f"trainer.supervise.{p.stem}" for p in (ROOT / "trainer" / "supervise").glob("*.py"))
    script = "; ".join(
        [
            "import importlib, json, sys",
            f"[importlib.import_module(name) for name in {names!r}]",
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or m.startswith('trainer.'))))",
        ]
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert "torch" not in loaded
    assert {m for m in loaded if m.startswith("trainer.job")} <= NOT_THE_WORKERS


def test_the_worker_module_the_supervisor_starts_is_there():
    from trainer.supervise.commands import WORKER, supervised, worker_command

    assert importlib.util.find_spec(WORKER[0]) is not None
    assert WORKER[0] in worker_command(3)
    served = supervised(3, worker_command(3))
    assert importlib.util.find_spec(served[served.index("-m") + 1]) is not None  # the vLLM server's supervisor
