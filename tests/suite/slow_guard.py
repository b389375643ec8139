"""The fast subset's promise, enforced: ``pytest -m "not slow"`` trains nothing and starts no worker, browser, Slurm
or PostgreSQL. A test that does any of these without ``@pytest.mark.slow`` fails, naming what it did.

Two checks, because either alone has a blind spot:
- at run time, an audit hook (PEP 578) sees every process the test (or a fixture it set up) starts, and a wrapper
  around ``transformers.Trainer.train`` sees training in the test's own process;
- at collection, a test that asks for a fixture known to train or to start a server is refused whatever ran before
  it: in a whole-suite run a session fixture may already have been set up by a slow test, so the run-time check
  would not see it.
What a module- or session-scoped fixture runs as it is torn down (PostgreSQL's stop, say) is not charged to the test
whose teardown it happens to follow: the last test of a module or of an xdist worker's share did not start it.
"""

from __future__ import annotations

import sys

import pytest

# Fixtures that train or start one of the heavy things themselves (tests/conftest.py).
SLOW_FIXTURES = frozenset(
    {"trained_run", "format_learner_path", "postgres_cluster", "postgres_server", "postgres_url", "slurm_cluster"}
)

# The heavy things, by what a started process runs: a Python module (``python -m M``), code that trains
# (``python -c`` holding one of these calls), or a program (by its name; Slurm's and PostgreSQL's only where they
# resolve to the installed programs, since tests of the Slurm executor put fakes of the same names on PATH).
HEAVY_MODULES = {
    "trainer.job.worker": "started a training worker",
    "trainer.job.warm_start": "started a training worker",
    "trainer.evaluation.eval_job": "started an evaluation process",
    "trainer.probe": "started a probe process",
}
# `grpo-studio serve` starts a dashboard. Not `run`, `fork` or `resume`: the tests of their refusals are fast, and a
# foreground run trains in the command's own process, out of this guard's sight: a test that lets one train is marked
# slow by hand.
HEAVY_CLI = {"serve"}
# A worker forked by the launcher's warm parent starts no process here: trainer.supervise.warm_start raises this audit
# event instead, naming the command the parent was forked from (a real worker's is heavy, a test's stand-in not).
WARM_START = "grpo_studio.warm_start"
HEAVY_CODE = ("run_worker(", "start_worker(", "GRPOTrainer(")
BROWSERS = {"chromium", "chromium-browser", "chrome", "headless_shell"}
INSTALLED = {
    **dict.fromkeys(("initdb", "pg_ctl", "postgres"), "started PostgreSQL"),
    **dict.fromkeys(("sbatch", "squeue", "sinfo", "scancel", "srun", "scontrol", "sacct"), "used Slurm"),
}


def heavy(program: str, argv: list[str], env: dict | None) -> str | None:
    """What the process ``argv`` (``program`` resolved as Popen does) is, if it is one of the heavy things."""
    import os
    import shutil

    name = os.path.basename(str(argv[0]) if argv else program)
    rest = [str(a) for a in argv[1:]]
    if name in ("runuser", "sudo", "setsid", "nice", "timeout") and "--" in rest:  # a wrapper: what it runs
        inner = rest[rest.index("--") + 1 :]
        return heavy(inner[0], inner, env) if inner else None
    if "python" in name:
        if "-m" in rest and rest.index("-m") + 1 < len(rest):
            module, *more = rest[rest.index("-m") + 1 :]
            if module in HEAVY_MODULES:
                return HEAVY_MODULES[module]
            if module == "app.cli.main" and HEAVY_CLI & set(more[:1]):
                return "started a dashboard server (grpo-studio serve)"
        if (
            "-c" in rest
            and rest.index("-c") + 1 < len(rest)
            and any(c in rest[rest.index("-c") + 1] for c in HEAVY_CODE)
        ):
            return "started a training worker (python -c)"
        return None
    if name == "grpo-studio" and HEAVY_CLI & set(rest[:1]):
        return "started a dashboard server (grpo-studio serve)"
    if name in BROWSERS or "playwright" in str(program):
        return "started a browser"
    if name in INSTALLED:
        path = (env or os.environ).get("PATH") if isinstance(env, dict) else os.environ.get("PATH")
        where = shutil.which(name, path=path) if os.sep not in str(argv[0]) else str(argv[0])
        if where and (where.startswith("/usr/") or "/postgresql/" in where):
            return INSTALLED[name]
    return None


class SlowGuard:
    """Records, for the test being run, what it did that only a slow test may do."""

    def __init__(self) -> None:
        self.watching = False
        self.seen: list[str] = []
        self.wider_teardowns: set[int] = set()  # ids of the wider-scoped fixtures being torn down now
        self._trainer_wrapped = False
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple) -> None:
        if not self._trainer_wrapped and "transformers.trainer" in sys.modules:
            self._wrap_trainer()
        if not self.watching or self.wider_teardowns:
            return
        if event == WARM_START:  # (run id, the command line of the process the warm parent was forked from)
            what = heavy(args[1][0], args[1], None)
            if what:
                self.seen.append(f"{what}: run {args[0]}, forked by the warm parent of {' '.join(args[1])[:120]}")
            return
        if event != "subprocess.Popen":
            return
        program, argv, _cwd, env = args
        argv = [str(a) for a in argv] if isinstance(argv, list | tuple) else str(argv).split()
        what = heavy(str(program), argv, env)
        if what:
            self.seen.append(f"{what}: {' '.join(argv)[:160]}")

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


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A wider-scoped fixture's teardown is marked from its start (this finalizer, added last, runs first) to its end
    (pytest_fixture_post_finalizer)."""
    result = yield
    if fixturedef.scope != "function":
        fixturedef.addfinalizer(lambda: GUARD.wider_teardowns.add(id(fixturedef)))
    return result


def pytest_fixture_post_finalizer(fixturedef, request) -> None:
    GUARD.wider_teardowns.discard(id(fixturedef))


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
