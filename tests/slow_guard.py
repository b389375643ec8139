"""The fast subset's promise, enforced: ``pytest -m "not slow"`` trains nothing and starts no worker, browser, Slurm
or PostgreSQL. A test that does any of these without ``@pytest.mark.slow`` fails, naming what it did.

Two checks, because either alone has a blind spot:
- at run time, an audit hook (PEP 578) sees every process the test (or a fixture it set up) starts, and a wrapper
  around ``transformers.Trainer.train`` sees training in the test's own process;
- at collection, a test that asks for a fixture known to train or to start a server is refused whatever ran before
  it: in a whole-suite run a session fixture may already have been set up by a slow test, so the run-time check
  would not see it.
"""

from __future__ import annotations

import re
import sys

import pytest

# Fixtures that train or start one of the heavy things themselves (tests/conftest.py).
SLOW_FIXTURES = frozenset(
    {"trained_run", "format_learner_path", "postgres_cluster", "postgres_server", "postgres_url", "slurm_cluster"}
)

# What a started process's command line holds when it is one of the heavy things (a regular expression each).
HEAVY_COMMANDS = {
    r"trainer\.job\.worker|run_worker\(": "started a training worker",
    r"(app\.cli|grpo-studio)\s+(run|fork|resume|eval|probe|build-tiny)\b": "ran a command that trains or loads a model",
    r"(app\.cli|grpo-studio)\s+serve\b": "started a dashboard server",
    r"trainer\.evaluation\.eval_job": "started an evaluation process",
    r"trainer\.probe\b": "started a probe process",
    r"playwright": "started a browser (Playwright's driver)",
    r"chromium": "started a browser",
    r"\b(initdb|pg_ctl|postgres)\b": "started PostgreSQL",
    r"\b(sbatch|squeue|sinfo|scancel|srun|scontrol)\b": "used Slurm",
}


class SlowGuard:
    """Records, for the test being run, what it did that only a slow test may do."""

    def __init__(self) -> None:
        self.watching = False
        self.seen: list[str] = []
        self._trainer_wrapped = False
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple) -> None:
        if not self._trainer_wrapped and "transformers.trainer" in sys.modules:
            self._wrap_trainer()
        if not self.watching or event != "subprocess.Popen":
            return
        command = " ".join(str(a) for a in (args[1] if isinstance(args[1], list | tuple) else [args[1]]))
        for pattern, what in HEAVY_COMMANDS.items():
            if re.search(pattern, command):
                self.seen.append(f"{what}: {command[:160]}")
                return

    def _wrap_trainer(self) -> None:
        trainer_class = getattr(sys.modules["transformers.trainer"], "Trainer", None)
        if trainer_class is None:  # the module is still being imported
            return
        self._trainer_wrapped = True
        train = trainer_class.train
        guard = self

        def watched_train(trainer, *args, **kwargs):
            if guard.watching:
                guard.seen.append(f"trained a model in the test's process ({type(trainer).__name__}.train)")
            return train(trainer, *args, **kwargs)

        trainer_class.train = watched_train


def refuse_unmarked_slow_fixtures(items) -> None:
    """Collection: an unmarked test that asks for a fixture that trains or starts a server is a usage error."""
    wrong = [
        f"{item.nodeid} uses {', '.join(sorted(SLOW_FIXTURES & set(item.fixturenames)))}"
        for item in items
        if not item.get_closest_marker("slow") and SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
    ]
    if wrong:
        raise pytest.UsageError(
            "these tests use fixtures that train or start a server but are not marked @pytest.mark.slow:\n  "
            + "\n  ".join(wrong)
        )


GUARD: SlowGuard | None = None


def pytest_configure(config) -> None:
    global GUARD
    if GUARD is None:
        GUARD = SlowGuard()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    GUARD.seen = []
    GUARD.watching = item.get_closest_marker("slow") is None
    try:
        yield
    finally:
        GUARD.watching = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown" and GUARD.seen and item.get_closest_marker("slow") is None:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} is not marked @pytest.mark.slow but it "
            + "; ".join(dict.fromkeys(GUARD.seen))
            + '. The fast subset (pytest -m "not slow") must train nothing and start no worker, browser, Slurm or'
            " PostgreSQL: mark it slow, or answer its question without that."
        )
