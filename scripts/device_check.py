"""Device check: a one-shot test of the GPU path for a GPU machine without network (issue 26, item 5).

    python scripts/device_check.py [--model builtin:tiny | /path/to/local/model] [--steps 4] [--out device-check.json]
    python scripts/device_check.py --cpu-smoke       # the same stages on the CPU, as the test suite runs it

For an HPC compute node or an air-gapped lab machine: CUDA 13, torch, transformers and accelerate present, nothing to
download, a small archive carried in (scripts/device_bundle.sh makes it; docs/device-check.md says how to run it):

    python3 src/scripts/device_check.py --wheels wheels      # installs the archive's wheels first, a timed step
Each stage runs in a process of its own with its own timeout, so a hang costs that stage and the summary still comes;
its output is streamed, prefixed by the stage's name, to the terminal and to ``--log``; one JSON summary goes to
``--out``. Stages:

- ``plain``: a short GRPO run, plain transformers + PEFT on CUDA in bf16 (fp32 on the CPU with ``--cpu-smoke``);
- ``plain-4bit``: the same with the base in 4-bit NF4 (bitsandbytes);
- ``unsloth-4bit``: Unsloth's loader in 4 bits, generating without vLLM;
- ``beta0`` and ``beta0-unsloth``: what the preset's beta 0.04 never reaches, on plain bf16 and on Unsloth in 4 bits:
  beta 0 (the worker's own measured KL), num_iterations 2 (the policy ratio moves, clipping can act) and the token
  view's per-token values; the row reports the steps done, the measured KL series, clip_ratio, the tokens with values;
- ``compare``: the Compare panel's PEFT path, base and tuned, on the adapter the ``plain`` stage trained;
- ``gpu-busy``: the dashboard's GPU-busy path: another process holds the GPU's lease, and a second user is refused
  naming it, the dashboard says so (on a machine with a GPU) and the GPU is free again once the holder is gone.

Each row: ok, failed (with the error's last line), or skipped (with the reason); the time per training step (the
median after the first step, which pays for warm-up; the only step's own with ``--steps 1``), and the peak GPU memory
torch allocated. Offline mode is set (HF_HUB_OFFLINE=1 and friends), the default model is the built-in one, and
everything is written to a throw-away data dir. Every step is timed, the setup too: the install of the carried wheels
(``--wheels``) and the torch import; by default they and the stages fit eight minutes together (:data:`BUDGET_S`),
and the JSON summary is rewritten after each of them, so a check cut short still leaves the rows it finished. Every
stage's config is built and validated in ``--cpu-smoke`` too: only the training is skipped where CUDA is needed. vLLM is not checked here: its wheel (326 MB) does not fit a carried
archive, so that path keeps its static evidence (docs/gpu-path-evidence.md). Exit status 0 when no stage failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GIB = 2**30
STAGES = ["plain", "plain-4bit", "unsloth-4bit", "beta0", "beta0-unsloth", "compare", "gpu-busy"]
# Seconds per step. Imports, model loading and Unsloth's compilation dominate, not the few training steps of the
# built-in model; the second Unsloth stage reuses the compiled trainer the first left in the shared working directory
# (unsloth_compiled_cache). The setup and all stages together stay within BUDGET_S, under the 10 minutes a GPU
# allocation often has, so a hang anywhere still leaves a summary with time to spare. Not yet measured on a GPU
# (docs/gpu-path-evidence.md): --timeout gives every stage more.
INSTALL_TIMEOUT = 40  # pip installing the carried wheels, offline, without compiling them
IMPORT_TIMEOUT = 25  # the parent's one torch import, for the machine's description
TIMEOUTS = {
    "plain": 50,
    "plain-4bit": 50,
    "unsloth-4bit": 110,
    "beta0": 45,
    "beta0-unsloth": 80,
    "compare": 30,
    "gpu-busy": 20,
}
BUDGET_S = 480
# The CPU is slower than the GPU the budget is for: --cpu-smoke gives each stage this many times its time.
CPU_SMOKE_SLACK = 8
# What each stage needs beyond the plain install, checked in the stage's process.
NEEDS = {
    "plain-4bit": ["bitsandbytes"],
    "unsloth-4bit": ["unsloth", "bitsandbytes"],
    "beta0-unsloth": ["unsloth", "bitsandbytes"],
}
CUDA_ONLY = ("plain-4bit", "unsloth-4bit", "beta0-unsloth")
UNSLOTH_STAGES = ("unsloth-4bit", "beta0-unsloth")
# What the beta0 stages change in the preset (beta 0.04, one pass): the measures beta 0.04 never reaches.
BETA0 = dict(beta=0.0, num_iterations=2, measured_kl_steps=1, token_samples_per_step=4)
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


class Skip(Exception):
    """The stage cannot run on this machine; the message says why."""


def parser() -> argparse.ArgumentParser:
    """The command line (also read by the tests)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--model", default="builtin:tiny", help="builtin:tiny or a local model directory (default %(default)s)"
    )
    p.add_argument("--steps", type=int, default=None, help="training steps per stage (default 4; 2 with --cpu-smoke)")
    p.add_argument("--cpu-smoke", action="store_true", help="run on the CPU: CUDA stages print as skipped")
    p.add_argument("--stages", default=",".join(STAGES), help="comma-separated subset (default: all)")
    p.add_argument("--timeout", type=float, default=None, help="seconds for every stage (default: per stage)")
    p.add_argument("--out", default="device-check.json", help="the JSON summary (default %(default)s)")
    p.add_argument("--log", default="device-check.log", help="the streamed log (default %(default)s)")
    p.add_argument(
        "--wheels", help="install these carried wheels first (offline, into --site), as one timed step of the check"
    )
    p.add_argument("--site", help="where --wheels go and the stages import from (default: beside the wheels, site/)")
    p.add_argument("--stage", help=argparse.SUPPRESS)  # internal: run one stage in this process
    p.add_argument("--home", help=argparse.SUPPRESS)  # internal: the shared throw-away data dir
    return p


# --- inside a stage's process ---------------------------------------------------------------------------------------
def typical_step(step_times: list[float]) -> float | None:
    """The time per step: the median after the first (warm-up) step, the only one's with one step, None with none."""
    steady = step_times[1:] or step_times
    return statistics.median(steady) if steady else None


def check_config(args: argparse.Namespace, stage: str, **overrides):
    """The tiny demo's config, shrunk to a few quick steps, for ``stage``."""
    import dataclasses

    from trainer.presets import tiny_demo

    smoke = dict(num_generations=2, per_device_train_batch_size=4, max_completion_length=16) if args.cpu_smoke else {}
    values = dict(
        name=f"device-check-{stage}",
        model_name_or_path=args.model,
        max_steps=args.steps,
        save_steps=args.steps * 10,  # no checkpoint: the adapter saved at the end is what compare reads
        eval_steps=0,
        use_vllm=False,  # vLLM cannot be carried (see the module docstring)
        **smoke,
    )
    return dataclasses.replace(tiny_demo(), **(values | overrides))  # a stage's own settings win


def stage_config(args: argparse.Namespace, stage: str):
    """The RunConfig ``stage`` trains, exactly as the stage builds it (None for the stages that train nothing)."""
    if stage == "plain":
        return check_config(args, stage, backend="plain")
    if stage == "plain-4bit":
        return check_config(args, stage, backend="plain", load_in_4bit=True)
    if stage == "beta0":
        return check_config(args, stage, backend="plain", **BETA0)
    if stage in UNSLOTH_STAGES:
        from trainer.loading.backend import model_path

        # the built-in model by its directory: under its builtin: name every path takes the plain one
        directory = model_path(check_config(args, stage))
        extra = BETA0 if stage == "beta0-unsloth" else {}
        return check_config(args, stage, model_name_or_path=directory, backend="unsloth", load_in_4bit=True, **extra)
    return None


def config_problems(config) -> list[str]:
    """What the worker would refuse in ``config`` (trainer.review.problems, as the worker checks it)."""
    from trainer import review

    return review.problems(config)


def measure_figures(session, run_id: int) -> dict:
    """What a beta0 stage reports beside the step time: the measured KL series, clip_ratio, the tokens with values,
    and the lines in which the run's log says a measure turned itself off."""
    from sqlalchemy import func, select

    from storage import queries
    from storage.models import SampleTokens

    def series(key: str) -> list[float]:
        return [p.value for p in queries.metric_series(session, run_id, key)]

    completions = session.scalar(
        select(func.count())
        .select_from(SampleTokens)
        .where(SampleTokens.run_id == run_id, SampleTokens.logprobs.isnot(None))
    )
    tokens = session.scalars(select(SampleTokens.tokens).where(SampleTokens.run_id == run_id)).all()
    return {
        "kl_measured": series("kl_measured"),
        "clip_ratio": series("clip_ratio/region_mean"),
        "completions_with_token_values": completions,
        "tokens_with_values": sum(len(t) for t in tokens),
        "measures_off": [line.message for line in queries.log_tail(session, run_id) if "turned off" in line.message],
    }


def check_measures(row: dict) -> None:
    """A beta0 stage passes only with a non-empty finite measured KL and token values, no measure turned off."""
    import math

    kl = row["kl_measured"]
    if not kl or not all(math.isfinite(v) for v in kl):
        raise RuntimeError(f"the measured KL series is empty or not finite: {kl}")
    if not row["tokens_with_values"]:
        raise RuntimeError("no token values were kept")
    if row["measures_off"]:
        raise RuntimeError(row["measures_off"][0])


def train(config, expect: str, four_bit: bool = False) -> dict:
    """Train ``config`` with the real worker in this process; the row. ``expect``: how the recorded path must start."""
    import torch

    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.job.worker import run_worker
    from trainer.supervise.run_files import RunFiles

    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, config.name, config.to_dict(), config.max_steps).id
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    status = run_worker(run_id)
    with get_sessionmaker().begin() as s:
        run = queries.get_run(s, run_id)
        step_times = [p.value for p in queries.metric_series(s, run_id, "step_time")]
        error, backend, output_dir = run.error, run.backend, run.output_dir
        measured = measure_figures(s, run_id) if config.beta == 0 else {}
    if status.value != "completed":
        raise RuntimeError((error or status.value).strip().splitlines()[-1])
    if not (backend or "").startswith(expect) or four_bit != ("(4-bit)" in (backend or "")):
        raise RuntimeError(f"asked for {expect}{' in 4 bits' if four_bit else ''} but the run took: {backend}")
    return {
        "backend": backend,
        "steps": len(step_times),
        "seconds_per_step": typical_step(step_times),
        "run_id": run_id,
        "adapter": str(RunFiles(Path(output_dir)).adapter),
        **measured,
    }


def stage_compare(args: argparse.Namespace) -> dict:
    """Compare's PEFT path on the adapter the plain stage trained."""
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.config import RunConfig
    from trainer.evaluation.compare import ModelCache, compare
    from trainer.loading.data import make_prompt

    plain = Path(args.home) / "stage-plain.json"
    trained = json.loads(plain.read_text()) if plain.is_file() else {}
    if trained.get("status") != "ok":
        raise Skip("no trained adapter: the plain stage did not pass")
    with get_sessionmaker().begin() as s:
        config, _ = RunConfig.from_dict(dict(queries.get_run(s, trained["run_id"]).config))
    cache, started = ModelCache(), time.perf_counter()
    result = compare(
        config, Path(trained["adapter"]), make_prompt("What is 2 + 3?", config.system_prompt), "5", n=2, cache=cache
    )
    seconds = time.perf_counter() - started
    cache.release()
    assert len(result.base.completions) == len(result.tuned.completions) == 2
    return {"seconds": seconds, "identical": result.identical, "kl": result.kl, "why": result.why()}


HOLDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from trainer.supervise.gpu_lease import acquire, physical_gpu
    lease = acquire("the device check's stand-in holder", physical_gpu(0))
    print("held", flush=True)
    time.sleep(120)
    """
)


def stage_gpu_busy(args: argparse.Namespace) -> dict:
    """Another process holds the GPU's lease: a second user is refused with its name, the dashboard's busy check
    says so where a GPU is visible, and the GPU is free again once the holder is gone."""
    from storage.db import get_sessionmaker
    from trainer.supervise import gpu_lease

    gpu = gpu_lease.physical_gpu(0)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(ROOT)], stdout=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "held":
            raise RuntimeError("the stand-in holder could not take the lease")
        try:
            gpu_lease.acquire("device check", gpu).release()
            raise RuntimeError("a second user got the GPU while another process held its lease")
        except gpu_lease.GpuBusy as exc:
            refused = str(exc)
        if f"pid {holder.pid}" not in refused:
            raise RuntimeError(f"the refusal does not name the holder (pid {holder.pid}): {refused}")
        with get_sessionmaker().begin() as session:
            dashboard = gpu_lease.gpu_busy(session)
        if gpu_lease.gpu_visible() and (dashboard is None or f"pid {holder.pid}" not in dashboard):
            raise RuntimeError(f"the dashboard's busy check did not name the holder: {dashboard}")
        if not gpu_lease.gpu_visible() and dashboard is not None:
            raise RuntimeError(f"without a GPU the dashboard must never say busy, said: {dashboard}")
    finally:
        holder.kill()
        holder.wait()
    gpu_lease.acquire("device check, after the holder", gpu, wait_s=10).release()  # a dead holder keeps nothing
    return {"refused": refused, "dashboard": dashboard or "no GPU visible: the dashboard never waits on a CPU"}


def run_stage(args: argparse.Namespace) -> dict:
    """One stage, in this process: the row's figures, or raises (:class:`Skip` for a stage this machine can't run)."""
    import torch

    cuda = torch.cuda.is_available()
    needs_cuda = args.stage in CUDA_ONLY or (args.stage not in ("gpu-busy",) and not args.cpu_smoke)
    if needs_cuda and not cuda:
        raise Skip("needs CUDA" + (" (--cpu-smoke)" if args.cpu_smoke else ": no CUDA GPU visible to torch"))
    missing = [name for name in NEEDS.get(args.stage, []) if importlib.util.find_spec(name) is None]
    if missing:
        raise Skip(f"needs {', '.join(missing)}, not installed (scripts/device_bundle.sh carries it)")
    if args.stage in UNSLOTH_STAGES:
        import unsloth  # noqa: F401  first, as the worker does (trainer.job.worker.start_backend)
    config = stage_config(args, args.stage)
    if config is not None and (problems := config_problems(config)):
        raise RuntimeError("invalid config: " + "; ".join(problems))
    if args.stage in ("plain", "beta0"):
        row = train(config, "plain transformers + PEFT")
    elif args.stage == "plain-4bit":
        row = train(config, "plain", four_bit=True)
    elif args.stage in UNSLOTH_STAGES:
        row = train(config, "Unsloth", four_bit=True)
    elif args.stage == "compare":
        row = stage_compare(args)
    else:
        row = stage_gpu_busy(args)
    if args.stage.startswith("beta0"):
        check_measures(row)
    row["peak_gpu_gib"] = torch.cuda.max_memory_allocated() / GIB if cuda else None
    return row


def stage_main(args: argparse.Namespace) -> int:
    """``--stage NAME``: run it and write its row to ``<home>/stage-NAME.json``."""
    started = time.perf_counter()
    try:
        row = {"status": "ok", **run_stage(args)}
    except Skip as exc:
        row = {"status": "skipped", "reason": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - the row must say what went wrong, whatever it was
        import traceback

        traceback.print_exc()
        row = {"status": "failed", "error": f"{type(exc).__name__}: {exc}".strip().splitlines()[-1][:500]}
    row = {"stage": args.stage, **row, "wall_s": round(time.perf_counter() - started, 2)}
    (Path(args.home) / f"stage-{args.stage}.json").write_text(json.dumps(row))
    return 0


# --- the parent: one process per stage --------------------------------------------------------------------------------
def stage_env(home: str, cpu_smoke: bool, site: str | None = None) -> dict[str, str]:
    """A stage's environment: offline, a throw-away data dir, this checkout (and the installed wheels' ``site``)
    importable, no GPU with --cpu-smoke."""
    env = {**os.environ, **OFFLINE, "GRPO_STUDIO_HOME": home, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), site, os.environ.get("PYTHONPATH", "")) if p)
    env.pop("DATABASE_URL", None)
    if cpu_smoke:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def stage_timeout(args: argparse.Namespace, stage: str) -> float:
    """``--timeout``, else the stage's own (:data:`TIMEOUTS`), longer on the CPU (:data:`CPU_SMOKE_SLACK`)."""
    return args.timeout or TIMEOUTS[stage] * (CPU_SMOKE_SLACK if args.cpu_smoke else 1)


def default_budget_s() -> int:
    """Seconds the whole check may take by default: the setup's timeouts plus every stage's."""
    return INSTALL_TIMEOUT + IMPORT_TIMEOUT + sum(TIMEOUTS.values())


def spawn_stage(args: argparse.Namespace, stage: str, home: str, log) -> dict:
    """Run ``stage`` in its own process (its own session, so a timeout ends all of it), streaming its output."""
    command = [sys.executable, __file__, "--stage", stage, "--home", home, "--model", args.model]
    command += ["--steps", str(args.steps)] + (["--cpu-smoke"] if args.cpu_smoke else [])
    timeout = stage_timeout(args, stage)
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=stage_env(home, args.cpu_smoke, args.site),
        cwd=home,
        start_new_session=True,
    )
    tail: list[str] = []
    header = f"[{stage}] started: {shlex.join(command[1:])} (timeout {timeout:.0f} s)"
    print(header, flush=True)
    log.write(header + "\n")  # every stage has a line in the log, however quiet it is
    log.flush()

    def stream() -> None:
        for line in process.stdout:
            text = f"[{stage}] {line.rstrip()}"
            print(text, flush=True)
            log.write(text + "\n")
            log.flush()
            tail[:] = (tail + [line.rstrip()])[-5:]

    reader = threading.Thread(target=stream, daemon=True)
    reader.start()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        reader.join(5)
        return {"stage": stage, "status": "failed", "error": f"timed out after {timeout:.0f} s", "wall_s": timeout}
    reader.join(5)
    result = Path(home) / f"stage-{stage}.json"
    if not result.is_file():
        last = next((line for line in reversed(tail) if line.strip()), "no output")
        return {
            "stage": stage,
            "status": "failed",
            "error": f"exit {process.returncode}: {last}",
            "wall_s": round(time.perf_counter() - started, 2),
        }
    return json.loads(result.read_text())


def row_line(row: dict) -> str:
    """One printed line per stage."""
    if row["status"] == "skipped":
        return f"{row['stage']:<13} skipped: {row['reason']}"
    if row["status"] == "failed":
        return f"{row['stage']:<13} failed: {row['error']}"
    step = row.get("seconds_per_step")
    peak = row.get("peak_gpu_gib")
    figures = [f"{step:.3f} s/step" if step is not None else None, f"peak {peak:.2f} GiB" if peak is not None else None]
    if row.get("kl_measured"):  # a beta0 stage: what it measured
        figures.append(f"measured KL {row['kl_measured'][-1]:.3g} ({len(row['kl_measured'])} points)")
        figures.append(f"clip_ratio {max(row['clip_ratio'] or [0.0]):.3g}")
        figures.append(f"{row['tokens_with_values']} tokens with values")
    figures.append(f"{row['wall_s']:.1f} s in all")
    return (
        f"{row['stage']:<13} ok: "
        + ", ".join(f for f in figures if f)
        + (f"  [{row['backend']}]" if row.get("backend") else "")
    )


def timed(step: str, command: list[str], timeout: float, env: dict[str, str] | None = None) -> dict:
    """A setup step run as a process with its timeout: its row (ok or failed, its wall time, its output's tail)."""
    started = time.perf_counter()
    try:
        out = subprocess.run(command, capture_output=True, text=True, errors="replace", env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"step": step, "status": "failed", "error": f"timed out after {timeout:.0f} s", "wall_s": timeout}
    row = {"step": step, "wall_s": round(time.perf_counter() - started, 2), "output": out.stdout.strip()[-300:]}
    if out.returncode:
        return row | {"status": "failed", "error": f"exit {out.returncode}: {out.stderr.strip()[-300:]}"}
    return row | {"status": "ok"}


def install(args: argparse.Namespace) -> dict:
    """``--wheels``: pip installs them offline into ``--site`` (no dependencies: the archive carries what is
    missing), a timed step; without ``--wheels`` nothing is installed."""
    if not args.wheels:
        return {"step": "install", "status": "skipped", "reason": "no --wheels given", "wall_s": 0.0}
    wheels = sorted(str(p) for p in Path(args.wheels).glob("*.whl"))
    if not wheels:
        return {"step": "install", "status": "failed", "error": f"no .whl file in {args.wheels}", "wall_s": 0.0}
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    return timed("install", command + ["--target", args.site, *wheels], INSTALL_TIMEOUT)


def machine(args: argparse.Namespace) -> dict:
    """What this machine is, in a timed process of its own: the parent never imports torch (a stage does)."""
    code = "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"
    env = {**os.environ, **OFFLINE}
    if args.site:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (args.site, os.environ.get("PYTHONPATH", "")) if p)
    return timed("torch import", [sys.executable, "-c", code], IMPORT_TIMEOUT, env)


def write_summary(path: str, summary: dict) -> None:
    """Rewrite the JSON summary whole (a rename, so a reader never sees half of it): after every step."""
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(summary, indent=2))
    partial.replace(target)


def setup_line(row: dict) -> str:
    """One printed line per setup step."""
    detail = row.get("output") or row.get("reason") or ""
    if row["status"] == "failed":
        detail = row["error"]
    return f"{row['step']:<13} {row['status']}: {detail} ({row['wall_s']:.1f} s)"


def config_row(args: argparse.Namespace, stage: str) -> dict:
    """A CUDA-only stage under --cpu-smoke: no process for it, but its config is built and validated here."""
    started = time.perf_counter()
    try:
        config = stage_config(args, stage)
        problems = config_problems(config) if config is not None else []
    except Exception as exc:  # noqa: BLE001 - the row must say what went wrong
        problems = [f"{type(exc).__name__}: {exc}"]
    wall = round(time.perf_counter() - started, 2)
    if problems:
        return {"stage": stage, "status": "failed", "error": "invalid config: " + "; ".join(problems), "wall_s": wall}
    return {
        "stage": stage,
        "status": "skipped",
        "reason": "needs CUDA (--cpu-smoke); its config is valid",
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    """The setup steps, then every stage in its own process; print the rows and rewrite the JSON summary after each."""
    args = parser().parse_args(argv)
    if args.steps is None:
        args.steps = 2 if args.cpu_smoke else 4
    args.steps = max(args.steps, 1)
    if args.wheels and not args.site:
        args.site = str(Path(args.wheels).resolve().parent / "site")
    if args.stage:
        return stage_main(args)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        print(f"unknown stage {unknown[0]!r}; the stages are {', '.join(STAGES)}", file=sys.stderr)
        return 2
    summary = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpu_smoke": args.cpu_smoke, "model": args.model}
    summary |= {"steps": args.steps, "finished": False, "setup": [], "rows": []}
    for step in (install, machine):
        row = step(args)
        summary["setup"].append(row)
        print(setup_line(row), flush=True)
        write_summary(args.out, summary)
    if args.site and summary["setup"][0]["status"] == "ok":
        sys.path.insert(1, args.site)  # the carried packages, for the configs this process builds
    summary["machine"] = {"python": sys.version.split()[0], "torch": summary["setup"][-1].get("output", "")}
    print(f"device check: {summary['machine']}; model {args.model}; {args.steps} steps; stages {', '.join(stages)}")
    with tempfile.TemporaryDirectory(prefix="grpo-studio-device-check-") as home, open(args.log, "w") as log:
        for stage in stages:
            summary["running"] = stage
            write_summary(args.out, summary)
            if args.cpu_smoke and stage in CUDA_ONLY:  # known without starting a process for it
                row = config_row(args, stage)
            else:
                row = spawn_stage(args, stage, home, log)
            summary["rows"].append(row)
            summary.pop("running")
            write_summary(args.out, summary)
            print(row_line(row), flush=True)
    summary["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    write_summary(args.out, summary)
    print("\n".join(["", "summary:"] + [row_line(r) for r in summary["rows"]] + [f"written to {args.out}"]))
    failed = [r for r in summary["setup"] + summary["rows"] if r["status"] == "failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
