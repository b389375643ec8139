"""What the Compare page reads and runs: the adapters a run saved, its held-out problems and how its answers to them
changed, the side-by-side sampling of base and tuned, and the panel's model, released when training needs the GPU.

The side-by-side loads its model in this (dashboard) process, on first use: trainer.evaluation.compare imports torch
inside its functions, so nothing here imports it before then.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.actions.base import ActionError
from storage import queries
from storage.db import get_sessionmaker
from storage.summaries import RunSummary
from trainer.config import RunConfig
from trainer.supervise.run_files import RunFiles
from trainer.supervise.workers import LIVE


def adapter_names(run: RunSummary) -> frozenset[str]:
    """The names of a run's saved adapters; none while it is queued or running (a resumed run's old finish time must
    not make it look finished). A run's directory is looked at once per way it ended (cached by id and finish time),
    not on every tick of every dashboard."""
    if not run.finished_at or run.status in LIVE:
        return frozenset()
    key = (run.id, run.finished_at)
    if key not in _ADAPTER_SEEN:
        with get_sessionmaker().begin() as session:
            output_dir = queries.get_run(session, run.id).output_dir
        _ADAPTER_SEEN[key] = frozenset(RunFiles(Path(output_dir)).saved_adapters() if output_dir else ())
    return _ADAPTER_SEEN[key]


_ADAPTER_SEEN: dict[tuple, frozenset[str]] = {}


def compared_run(run_id) -> tuple[RunConfig, dict[str, Path]]:
    """The run's config and its saved adapters by name; ActionError when there is no such run."""
    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, int(run_id))
        if run is None:
            raise ActionError(f"no run with id {run_id}")
        config, _ = RunConfig.from_dict(run.config)
        return config, RunFiles(Path(run.output_dir)).saved_adapters() if run.output_dir else {}


def heldout_problems(config: RunConfig, count: int) -> list:
    """Up to ``count`` problems the run did not train on (trainer.loading.heldout), as the periodic evaluation chooses
    them; raises what reading the data set raises (none held out, the hub unreachable)."""
    from trainer.evaluation.evaluate import heldout_problems

    return heldout_problems(config, count)


def heldout_points(run_id: int) -> list:
    """Every held-out answer the run's evaluations scored, step by step (storage.learning.heldout_points)."""
    from storage.learning import heldout_points

    with get_sessionmaker().begin() as session:
        return heldout_points(session, int(run_id))


def compare(
    run_id,
    adapter: str,
    question: str,
    reference: str | None,
    *,
    n: int,
    greedy: bool,
    temperature: float,
    seed: int,
    on_phase: Callable[[str, str], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
):
    """Sample base and tuned (the run's ``adapter``) on ``question`` with the same seeds and score both against
    ``reference`` (trainer.evaluation.compare.compare's result), ``on_phase(side, what)`` told of each phase as it
    begins; None when ``cancelled`` said True before it ended. ActionError when there is no such run, or when another
    process took the GPU."""
    from trainer.evaluation.compare import Cancelled, compare
    from trainer.loading.data import make_prompt
    from trainer.supervise.gpu_lease import GpuBusy

    config, adapters = compared_run(run_id)
    try:
        return compare(
            config,
            adapters[adapter],
            make_prompt(question, config.system_prompt, config.few_shot_examples),
            reference,
            n=n,
            greedy=greedy,
            temperature=temperature,
            seed=seed,
            on_phase=on_phase,
            cancelled=cancelled,
        )
    except GpuBusy as exc:
        raise ActionError(str(exc), exit_code=1) from exc
    except Cancelled:
        return None


def release_compare_model(run) -> None:
    """Called by the scheduler before it starts ``run``'s worker: on a GPU machine, free the Compare panel's model so
    the worker (vLLM in particular) finds the GPU memory it needs; :func:`compare_notice` says so."""
    from trainer.evaluation.compare import CACHE
    from trainer.supervise.gpu_lease import gpu_visible

    if gpu_visible():
        CACHE.release_for_training(f"run {run.id} ({run.name})")


def compare_notice() -> str:
    """Why the Compare panel's model is not loaded any more (released for a training run), or ""."""
    from trainer.evaluation.compare import CACHE

    return CACHE.notice or ""
