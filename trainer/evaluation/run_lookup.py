"""Finding a run's config and one of its saved adapters by run id, for compare, evaluate and export (dashboard and
CLI alike). Torch-free."""

from __future__ import annotations

from pathlib import Path

from storage import queries
from storage.db import get_sessionmaker
from trainer.config import RunConfig
from trainer.supervise.run_files import RunFiles


class RunLookupError(ValueError):
    """A run, or a saved adapter of it, that isn't there."""


def run_adapter(run_id: int, adapter: str = "final") -> tuple[RunConfig, Path]:
    """A run's config and the directory of one of its saved adapters ("final" or "step N")."""
    with get_sessionmaker().begin() as session:
        run = queries.get_run(session, run_id)
        if run is None:
            raise RunLookupError(f"no run with id {run_id}")
        config, _ = RunConfig.from_dict(run.config)
        adapters = RunFiles(Path(run.output_dir)).saved_adapters() if run.output_dir else {}
    if adapter not in adapters:
        raise RunLookupError(f"run {run_id} has no adapter {adapter!r} (saved: {', '.join(adapters) or 'none yet'})")
    return config, adapters[adapter]
