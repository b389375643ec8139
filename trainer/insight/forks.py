"""What a fork changed in its parent's rewards (issue 57, item 4), said at the fork point.

A fork (trainer/supervise/fork.py) resumes its parent's checkpoint with some settings changed. When it adds or drops
a reward or changes a weight, the total reward before and after the fork point measures different things: the audit's
fork of the demo at step 40 adding a length reward jumped 3.79 → 5.4-6.0 there. The watch reads only the fork's own
rows, which begin after that step, so its "reward switched on" rule never sees the change; the parent's config does.
The note names each change, so the jump in the Monitor (which draws a fork over its parent) is read as what it is.

Pure: two configs (as stored on the run rows) in, one note out. The callers read the rows (app.actions for the
banner, ``/alerts`` and ``grpo-studio alerts``; the worker for its tracker).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.config import RunConfig
from trainer.insight.health import Alert

FORK_NOTE = "fork_rewards"


def _reward_weights(config: Mapping[str, Any]) -> dict[str, float]:
    """Each reward's name as its metrics name it (``rewards/<name>/mean``: a custom reward's function name) and its
    weight (1.0 each where none were given), from the stored ``config`` read as its worker read it."""
    settings = RunConfig.from_stored(config)
    return {str(f).rsplit(":", 1)[-1]: float(w) for f, w in zip(settings.reward_funcs, settings.weights())}


def reward_changes(parent: Mapping[str, Any], fork: Mapping[str, Any]) -> list[str]:
    """Each change of the reward set or of a weight from ``parent``'s config to ``fork``'s, as a phrase ("added
    long_answers (weight 1)", "dropped xmlcount", "correctness's weight 1 → 2"); [] when they pay alike."""
    before, after = _reward_weights(parent), _reward_weights(fork)
    changes = [f"added {name} (weight {w:g})" for name, w in after.items() if name not in before]
    changes += [f"dropped {name}" for name in before if name not in after]
    changes += [
        f"{name}'s weight {before[name]:g} → {w:g}" for name, w in after.items() if name in before and before[name] != w
    ]
    return changes


def fork_note(parent_id: int, step: int, parent: Mapping[str, Any], fork: Mapping[str, Any]) -> Alert | None:
    """The note a fork from run ``parent_id``'s step ``step`` gets when it changed the rewards; None when it did
    not."""
    changes = reward_changes(parent, fork)
    if not changes:
        return None
    return Alert(
        FORK_NOTE,
        f"this fork of run {parent_id} changed the rewards at step {step}: " + "; ".join(changes),
        "the total reward before and after the fork point measures different things, so a jump there is the new "
        "rewards, not learning: compare each reward's own curve (rewards/…) and the held-out score, which the fork "
        f"evaluated at step {step}, when it started, if eval_steps is set",
        level="note",
    )


def fork_notes(session: Any, run: Any) -> list[Alert]:
    """The note of ``run`` (a storage.models.Run) when it is a fork that changed its parent's rewards, read with
    ``session``: [] for a run that is no fork, whose parent is gone, or that pays as its parent did. The one read
    the dashboard's list of alerts and the worker's tracker both make."""
    from storage import queries

    parent = queries.get_run(session, run.parent_run_id) if run is not None and run.parent_run_id else None
    if parent is None:
        return []
    note = fork_note(parent.id, run.parent_step, dict(parent.config or {}), dict(run.config or {}))
    return [note] if note else []
