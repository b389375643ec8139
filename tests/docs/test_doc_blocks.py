"""Every ```python and ```bash block of README.md and docs/*.md runs as written, so a block that stops working fails
the suite (issue 37: the README's Python example raised "Could not login" when copied).

How each block is tagged (docs/README's code blocks follow this; :func:`test_every_block_is_tagged` enforces it):

- ```python, ```bash: run here, from the repository root. Python blocks talk to a ``grpo-studio serve`` on an empty
  data dir on a free port (the one edit: ``127.0.0.1:7860`` becomes that port); bash blocks run in an empty data dir
  of their own. A block that starts ``grpo-studio serve`` runs until the dashboard answers, then is stopped.
  ``GRPO_STUDIO_MAX_STEPS`` caps every run they start at 2 steps (app.actions.runs.capped_steps).
- ```text: output, a layout or a file listing, never a command.
- ```console: commands this machine can't run (a Docker engine, a GPU, the whole suite, benches of minutes); the
  block's first line is ``# not run by the docs test: <why>``, which the skip reports (``pytest -rs`` lists them).

The quickstart's one liberty: its ``python3 -m venv`` gets ``--system-site-packages`` (a shim on PATH), so pip finds
torch and the other dependencies this machine has instead of downloading a gigabyte; the install, the editable
install of a copy of this checkout and ``grpo-studio serve`` run as written.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import free_port, wait_for

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("python", "bash")
NOT_RUN = re.compile(r"^# not run by the docs test: (\S.*)$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
STEPS = "2"  # two steps still log metrics, write samples and complete a run; the demo's 100 would take minutes


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def skip_reason(self) -> str | None:
        """Why this block is not run, or None when it is."""
        if self.lang == "text":
            return "text: output or a layout, not a command"
        if self.lang == "console":
            found = NOT_RUN.match(self.text.splitlines()[0]) if self.text.strip() else None
            return f"console: {found.group(1)}" if found else None
        return None


def doc_blocks() -> list[Block]:
    """The fenced blocks of README.md and docs/*.md, each dedented by its fence's indentation (a block in a list)."""
    blocks = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        index = 0
        while index < len(lines):
            opened = FENCE.match(lines[index])
            if not opened:
                index += 1
                continue
            start, indent, lang = index, opened.group(1), opened.group(2)
            index += 1
            body = []
            while index < len(lines) and lines[index].strip() != "```":
                body.append(lines[index][len(indent) :] if lines[index].startswith(indent) else lines[index])
                index += 1
            blocks.append(Block(path, start + 1, lang, textwrap.dedent("\n".join(body)) + "\n"))
            index += 1
    return blocks


BLOCKS = doc_blocks()


def test_every_block_is_tagged():
    """A block is run (python, bash), a sample (text), or not run with its reason (console); nothing is untagged."""
    wrong = [
        f"{b.name}: ```{b.lang}"
        for b in BLOCKS
        if b.lang not in RUN + ("text", "console") or (b.lang == "console" and b.skip_reason() is None)
    ]
    assert wrong == [], (
        "tag each as ```python/```bash (run), ```text, or ```console with '# not run by the docs test: why'"
    )
    assert sum(b.lang in RUN for b in BLOCKS) >= 4  # the quickstart, the demo and the two Python examples


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def _env(home: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "GRPO_STUDIO_AUTH")}
    env |= {"GRPO_STUDIO_HOME": str(home), "GRPO_STUDIO_PORT": str(port), "GRPO_STUDIO_MAX_STEPS": STEPS}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _stop_group(process: subprocess.Popen) -> None:
    """Stop a block's process group (the dashboard, its shell) and wait for it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    """``grpo-studio serve`` on an empty data dir and a free port; at the end every run it started is stopped."""
    home = tmp_path_factory.mktemp("served-home")
    port = free_port()
    env = _env(home, port)
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for(lambda: _answers(url), timeout=120, what="the dashboard")
        yield url, env
    finally:
        _stop_runs(url)
        _stop_group(server)


def _stop_runs(url: str) -> None:
    """Stop the runs the blocks started (a worker outlives the dashboard by design) and wait for them to end."""
    from gradio_client import Client

    try:
        client = Client(url, verbose=False)
        for run in client.predict(api_name="/runs"):
            if run["status"] in ("queued", "running", "stalled"):
                client.predict(run["id"], api_name="/stop")
        wait_for(
            lambda: all(r["status"] not in ("queued", "running") for r in client.predict(api_name="/runs")),
            timeout=120,
            what="the blocks' runs to stop",
        )
    except Exception as exc:  # the blocks' own assertions matter more than the clean-up's
        print(f"stopping the blocks' runs: {exc}")


def _python_shim(folder: Path) -> Path:
    """A ``python3`` on PATH whose ``-m venv`` sees the installed packages (the quickstart's one liberty)."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "python3"
    shim.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then shift 2; exec {sys.executable} -m venv --system-site-packages "$@"; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    shim.chmod(0o755)
    return folder


def _copy_checkout(into: Path) -> Path:
    """A copy of the checkout's files (tracked and new, not ignored), as a fresh clone would hold them."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def _run_server_block(block: Block, tmp_path: Path) -> None:
    """A block ending in ``grpo-studio serve``: run it in a copy of the checkout until the dashboard answers."""
    port = free_port()
    checkout = _copy_checkout(tmp_path / "grpo-studio")
    env = _env(tmp_path / "home", port)
    env.pop("PYTHONPATH")  # the copy's own install must do
    env["PATH"] = f"{_python_shim(tmp_path / 'shim')}{os.pathsep}{env['PATH']}"
    log = tmp_path / "block.log"
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            ["bash", "-e", "-c", block.text],
            cwd=checkout,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for(
                lambda: _answers(f"http://127.0.0.1:{port}/") or process.poll() is not None,
                timeout=400,
                what="the quickstart's dashboard",
            )
            assert process.poll() is None, f"{block.name} ended (exit {process.returncode}):\n{log.read_text()[-3000:]}"
            print(f"{block.name}: the dashboard answered {time.monotonic() - started:.0f} s after the block started")
            assert (checkout / ".venv" / "bin" / "grpo-studio").exists()
        finally:
            _stop_group(process)


def _run_block(block: Block, cwd: Path, env: dict[str, str], timeout: float = 300) -> None:
    command = [sys.executable, "-c", block.text] if block.lang == "python" else ["bash", "-e", "-c", block.text]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{block.name} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )


def _param(block: Block):
    """The block as a test, in a pytest-xdist group that may run beside the others: the Python blocks share one
    dashboard; a block that serves (the quickstart, minutes of installing) runs apart from the rest."""
    if block.lang == "python":
        group = "doc-blocks-python"
    elif block.lang == "bash" and re.search(r"grpo-studio serve\s*$", block.text.strip()):
        group = f"doc-block-{block.name}"
    else:
        group = "doc-blocks"
    return pytest.param(block, id=block.name, marks=pytest.mark.xdist_group(group))


@pytest.mark.slow
@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_doc_block_runs_as_written(block, request, tmp_path):
    reason = block.skip_reason()
    if reason or block.lang not in RUN:
        pytest.skip(
            f"{block.name}: " + (reason or f"untagged ```{block.lang} (test_every_block_is_tagged fails for it)")
        )
    if block.lang == "bash" and re.search(r"grpo-studio serve\s*$", block.text.strip()):
        _run_server_block(block, tmp_path)
    elif block.lang == "python":
        url, env = request.getfixturevalue("dashboard")
        code = block.text.replace("http://127.0.0.1:7860/", url)
        _run_block(Block(block.path, block.line, block.lang, code), ROOT, env)
    else:
        _run_block(block, ROOT, _env(tmp_path / "home", free_port()))
