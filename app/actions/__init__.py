"""The action layer: one function per user action, called by the dashboard's callbacks (app/pages), the
``grpo-studio`` commands (app/cli.py) and the named API (app/api.py), which are thin adapters over it.

Each action takes plain values (a RunConfig, a mapping, YAML/JSON text or a file path; ids; options) and returns a
typed result or raises :class:`ActionError`. The rules the dashboard's operator chose (app/access.py) are an
argument, so the dashboard and its API apply them in one place; the command line passes :data:`OPERATOR`.
"""

from app.actions.base import OPERATOR, ActionError, config_of
from app.actions.jobs import evaluate, evaluation_json, export, gpu_busy, latest_evaluation_json, probe
from app.actions.monitoring import (
    MonitorRead,
    TokenRead,
    cached_alerts,
    has_runs,
    latest_token_step,
    monitor_view,
    newest_steps,
    sample_steps,
    samples_between,
    step_samples,
    token_completions,
    token_values,
)
from app.actions.reading import alerts, learning, learning_json, log, metrics, run_alerts, samples, watch_alerts
from app.actions.runs import (
    Checked,
    Launched,
    clone,
    delete,
    fork,
    launch,
    places,
    resume,
    run_detail,
    run_json,
    runs,
    stop,
    validate,
)

# What the pages name without reading through an action: the sentence for a database that failed
from storage.db import describe_error

__all__ = [
    "OPERATOR",
    "ActionError",
    "MonitorRead",
    "TokenRead",
    "cached_alerts",
    "describe_error",
    "has_runs",
    "latest_token_step",
    "monitor_view",
    "newest_steps",
    "sample_steps",
    "samples_between",
    "step_samples",
    "token_completions",
    "token_values",
    "Checked",
    "Launched",
    "alerts",
    "run_alerts",
    "watch_alerts",
    "clone",
    "config_of",
    "delete",
    "evaluate",
    "evaluation_json",
    "export",
    "fork",
    "gpu_busy",
    "latest_evaluation_json",
    "launch",
    "learning",
    "learning_json",
    "log",
    "metrics",
    "places",
    "probe",
    "resume",
    "run_detail",
    "run_json",
    "runs",
    "samples",
    "stop",
    "validate",
]
