"""The action layer: one function per user action, called by the dashboard's callbacks (app/pages), the
``grpo-studio`` commands (app/cli.py) and the named API (app/api.py), which are thin adapters over it.

Each action takes plain values (a RunConfig, a mapping, YAML/JSON text or a file path; ids; options) and returns a
typed result or raises :class:`ActionError`. The rules the dashboard's operator chose (trainer/config/access.py) are an
argument, so the dashboard and its API apply them in one place; the command line passes :data:`OPERATOR`.
"""

from app.actions.base import ActionError, config_of
from app.actions.comparing import (
    adapter_names,
    compare,
    compare_notice,
    compared_run,
    heldout_points,
    heldout_problems,
    release_compare_model,
)
from app.actions.jobs import (
    evaluate,
    evaluation_json,
    export,
    gpu_busy,
    heldout_origin,
    latest_evaluation,
    latest_evaluation_json,
    probe,
    stop_evaluation,
)
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
from app.actions.preview import local_chat_template, prompt_preview
from app.actions.reading import (
    alerts,
    learning,
    learning_json,
    log,
    metrics,
    nothing_learned,
    run_alerts,
    samples,
    watch_alerts,
)
from app.actions.runs import (
    Checked,
    Launched,
    checkpoints,
    clone,
    dataset_names,
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
from app.actions.sweep_control import SweepChanged, delete_sweep, resume_sweep, stop_sweep
from app.actions.sweeps import (
    MemberRow,
    ProbeFound,
    ProbeNews,
    SweepSummary,
    SweepTable,
    Swept,
    point_text,
    summary_json,
    sweep,
    sweep_detail,
    sweepable,
    sweeps,
)

# What the pages name without an action to read it through: the types they show (a config, a row of the runs list,
# an evaluation and the statuses), the form's presets and reward names, the sentence for a database that failed, and
# the folders a download or an upload is written to. The pages import nothing of storage/ or trainer/ themselves
# (tests/test_actions.py), so what they show comes from here.
from storage.db import data_dir, describe_error, new_export_dir, slug
from storage.models import Evaluation, RunStatus
from storage.summaries import RunSummary
from trainer.config import RunConfig
from trainer.config.access import OPERATOR, Access
from trainer.presets import presets
from trainer.scoring.rewards import REWARDS

__all__ = [
    "Access",
    "ActionError",
    "Checked",
    "Evaluation",
    "Launched",
    "MemberRow",
    "MonitorRead",
    "OPERATOR",
    "REWARDS",
    "RunConfig",
    "RunStatus",
    "RunSummary",
    "SweepChanged",
    "SweepSummary",
    "SweepTable",
    "Swept",
    "ProbeFound",
    "ProbeNews",
    "TokenRead",
    "adapter_names",
    "alerts",
    "cached_alerts",
    "checkpoints",
    "clone",
    "compare",
    "compare_notice",
    "compared_run",
    "config_of",
    "data_dir",
    "dataset_names",
    "delete",
    "delete_sweep",
    "describe_error",
    "evaluate",
    "evaluation_json",
    "export",
    "fork",
    "gpu_busy",
    "has_runs",
    "heldout_origin",
    "heldout_points",
    "heldout_problems",
    "latest_evaluation",
    "latest_evaluation_json",
    "latest_token_step",
    "launch",
    "learning",
    "learning_json",
    "local_chat_template",
    "log",
    "metrics",
    "monitor_view",
    "new_export_dir",
    "newest_steps",
    "nothing_learned",
    "places",
    "point_text",
    "presets",
    "probe",
    "prompt_preview",
    "release_compare_model",
    "resume",
    "resume_sweep",
    "run_alerts",
    "run_detail",
    "run_json",
    "runs",
    "sample_steps",
    "samples",
    "samples_between",
    "slug",
    "step_samples",
    "stop",
    "stop_evaluation",
    "stop_sweep",
    "summary_json",
    "sweep",
    "sweep_detail",
    "sweepable",
    "sweeps",
    "token_completions",
    "token_values",
    "validate",
    "watch_alerts",
]
