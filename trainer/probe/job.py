"""The probe as a job: a child process (``python -m trainer.probe``) that loads the model, samples and scores, and
hands back the report as JSON. The dashboard calls this, so torch is loaded by the child and never by the UI
process, and a probe that runs out of memory costs the child only. Torch-free."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from trainer.config import RunConfig
from trainer.probe.report import ProbeReport

WASTED_EXIT = 3  # the exit code of a probe whose verdict is that the run would learn nothing (the CLI's too)
ROOT = Path(__file__).resolve().parent.parent.parent


# A probe that runs longer than this is stopped (the tiny model takes seconds, a GPU model about a minute); the
# operator may change it. A probe has no run yet, so the server's log records the timeout.
TIMEOUT_VARIABLE = "GRPO_STUDIO_PROBE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 1800
REPORT_LOOK_S = 0.5  # how often the reports file is read while the child probes

log = logging.getLogger("grpo_studio.probe")


def timeout_s() -> int:
    """The operator's ``GRPO_STUDIO_PROBE_TIMEOUT_S`` (at least 1), else :data:`DEFAULT_TIMEOUT_S`."""
    value = os.environ.get(TIMEOUT_VARIABLE, "")
    return max(1, int(value)) if value.strip().isdigit() else DEFAULT_TIMEOUT_S


class ProbeError(RuntimeError):
    """The probe itself failed (the model would not load, the data set is missing...): the child's last words.
    ``index`` is the place, in the configs given, of the one whose probe failed (the ones before it were probed)."""

    def __init__(self, message: str, index: int = 0):
        super().__init__(message)
        self.index = index


def probe_in_child(config: RunConfig, prompts: int = 8, timeout: float = 1800) -> ProbeReport:
    """Run the probe of ``config`` in a child process and return its report; raises :class:`ProbeError` in one
    sentence when it fails (its output goes to this process's log) or takes longer than ``timeout`` seconds."""
    return probe_each_in_child([config], prompts, timeout)[0]


def probe_each_in_child(
    configs: list[RunConfig],
    prompts: int = 8,
    timeout: float = 1800,
    on_report: Callable[[int, ProbeReport], None] | None = None,
) -> list[ProbeReport]:
    """Probe each of ``configs`` (a sweep's members) in one child process, in order, and return their reports: the
    child's imports (torch, transformers: seconds on a CPU) are paid once, not once a member. ``timeout`` is each
    probe's; the child is stopped after that times the number of configs. ``on_report(index, report)`` hears each
    report as the child writes it, while the next config is probed (the dashboard says what each probe found as it
    finishes, not only after the last). Raises :class:`ProbeError` naming the config whose probe failed (its
    ``index``)."""
    with tempfile.TemporaryDirectory(prefix="grpo-studio-probe-") as tmp:
        files, out = [Path(tmp) / f"config-{i}.json" for i in range(len(configs))], Path(tmp) / "reports.json"
        for config, file in zip(configs, files, strict=True):
            config.with_absolute_paths(Path.cwd()).save(file)  # the child runs in its temp dir
        env = dict(os.environ)
        # the child must find the packages when grpo-studio runs from a source checkout (as trainer.supervise.start does)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        command = [sys.executable, "-m", "trainer.probe", *map(str, files), "--prompts", str(prompts)]
        limit = timeout * len(configs)
        heard = 0
        # its output to a file, not a pipe: a pipe nobody reads while the reports are watched fills and stalls it
        with open(Path(tmp) / "output.txt", "w+") as output:
            child = subprocess.Popen(
                [*command, "--json", str(out)], stdout=output, stderr=subprocess.STDOUT, env=env, cwd=tmp
            )
            deadline = time.monotonic() + limit
            while True:
                try:
                    returncode = child.wait(timeout=min(REPORT_LOOK_S, max(deadline - time.monotonic(), 0.0)))
                except subprocess.TimeoutExpired:
                    returncode = None
                heard = _hear(out, heard, on_report)
                if returncode is not None:
                    break
                if time.monotonic() >= deadline:
                    child.kill()
                    child.wait()
                    said = f"the probe took longer than {timeout:.0f} s ({TIMEOUT_VARIABLE}) and was stopped"
                    if len(configs) > 1:
                        said = f"the {len(configs)} probes took longer than {timeout:.0f} s each ({TIMEOUT_VARIABLE}) and were stopped"
                    log.warning("%s: %s", configs[0].name, said)
                    raise ProbeError(said, len(_reports(out)))
            output.seek(0)
            said = output.read()
        reports = _reports(out)  # the child rewrites the file after each probe: those before a failure are there
        if returncode not in (0, WASTED_EXIT) or len(reports) < len(configs):
            # The child's last words (a traceback, installed paths) are for the operator: the server's log gets
            # them, the user one sentence.
            lines = said.strip().splitlines()
            log.warning("the probe failed (exit %s); its last output:\n%s", returncode, "\n".join(lines[-20:]))
            raise ProbeError(f"the probe failed (exit {returncode}); the details are in the server's log", len(reports))
        return [ProbeReport.from_dict(report) for report in reports]


def _hear(path: Path, heard: int, on_report: Callable[[int, ProbeReport], None] | None) -> int:
    """Tell ``on_report`` of each report in ``path`` after the first ``heard``; returns how many it has heard."""
    if on_report is None:
        return heard
    reports = _reports(path)
    for index in range(heard, len(reports)):
        on_report(index, ProbeReport.from_dict(reports[index]))
    return max(heard, len(reports))


def _reports(path: Path) -> list[dict]:
    """The reports the child wrote to ``path`` so far (none when it wrote nothing or was killed while writing)."""
    try:
        reports = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return reports if isinstance(reports, list) else []
