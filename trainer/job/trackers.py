"""Where the trackers of ``report_to`` keep their files, and whether they may reach the network.

Left to themselves they write outside the data dir: trackio into ``~/.cache/huggingface/trackio/grpo-studio.db`` (and
its lock), shared by every data dir of that user; W&B into ``./wandb`` of the working directory; MLflow into
``./mlruns``; TensorBoard under the output dir (already the run's, as ``runs/<date>``). And W&B syncs to its cloud by
default. So the
worker sets each tracker's own variable before the tracker is imported, pointing it under the run's directory, and
W&B offline, unless the operator set that variable: the operator's choice stands (``TRACKIO_DIR``, ``WANDB_DIR``,
``WANDB_MODE``, ``MLFLOW_TRACKING_URI``; a trackio Space or server is the operator's ``TRACKIO_SPACE_ID`` /
``TRACKIO_SERVER_URL``, which grpo-studio never sets). TensorBoard's ``TENSORBOARD_LOGGING_DIR`` (transformers 5's
TensorBoardCallback reads it, else ``<output dir>/runs``) is set too, so every tracker's files sit side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

TRACKERS_DIR = "trackers"  # under the run's directory


def tracker_environment(report_to: list[str], run_root: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to set in the worker's environment for ``report_to``, those the operator set left out."""
    root = Path(run_root) / TRACKERS_DIR
    wanted: dict[str, str] = {}
    if "trackio" in report_to:
        wanted["TRACKIO_DIR"] = str(root / "trackio")  # trackio 0.43 utils.py: read once, when trackio is imported
    if "wandb" in report_to:
        wanted["WANDB_DIR"] = str(root)  # W&B makes its own "wandb" folder inside
        wanted["WANDB_MODE"] = "offline"  # no upload unless the operator set WANDB_MODE (e.g. online)
    if "mlflow" in report_to:
        wanted["MLFLOW_TRACKING_URI"] = (root / "mlruns").resolve().as_uri()
    if "tensorboard" in report_to:
        wanted["TENSORBOARD_LOGGING_DIR"] = str(root / "tensorboard")
    return {name: value for name, value in wanted.items() if not environ.get(name)}


def place_trackers(report_to: list[str], run_root: Path, environ) -> list[str]:
    """Set :func:`tracker_environment` in ``environ`` (the worker's ``os.environ``), making the directories; returns
    lines for the run's log saying where each tracker writes."""
    settings = tracker_environment(report_to, run_root, environ)
    for name, value in settings.items():
        environ[name] = value
        if name.endswith("DIR"):
            Path(value).mkdir(parents=True, exist_ok=True)
    return [f"{name}={value}" for name, value in settings.items()]
