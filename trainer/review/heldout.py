"""The rules of held-out evaluation: a config that asks for it (``eval_steps``) on data that has no problems the run
does not train on is refused, and a run that trains on the problems its held-out scores are read on is warned about.
Which problems are held out is trainer.loading.heldout's to say; these rules ask it."""

from __future__ import annotations

from trainer.config.names import BUILTIN_MODEL
from trainer.loading.data import DataError, DataSettings
from trainer.loading.heldout import HINT, NoHeldOut, heldout_set, no_heldout_reason


def missing_heldout(config: DataSettings) -> str | None:
    """Why the config's data has no problems its run does not train on, with how to get some; None when it has some,
    or may have. A built-in data set is checked by building the set (cheap, no I/O); others by what is known
    unloaded (a hub data set is not downloaded to find out). Validation asks it of a config with ``eval_steps``, and
    ``grpo-studio run``'s summary before it suggests ``grpo-studio eval``."""
    if config.dataset_name.startswith("builtin:"):
        try:
            heldout_set(config)
            return None
        except NoHeldOut as exc:
            return str(exc)
        except DataError:
            return None  # an unknown built-in set or split is reported by the data set's own check
    reason = no_heldout_reason(config)
    return None if reason is None else f"{reason}; {HINT}"


def check_heldout(config: DataSettings) -> list[str]:
    """Validation: a problem when the config asks for held-out evaluation (``eval_steps``) on data that can have
    none (:func:`missing_heldout`)."""
    steps = getattr(config, "eval_steps", 0)
    reason = missing_heldout(config) if steps else None
    if reason is None:
        return []
    return [f"eval_steps {steps}: no held-out problems to evaluate on: {reason}, or set eval_steps to 0"]


def heldout_warnings(config: DataSettings) -> list[str]:
    """A run trained on a "test" or "validation" split trains on the problems held-out scores are read on; and held
    out of the run but not of the model: builtin:tiny was warmed up on builtin:arithmetic's train split, so
    a run whose held-out problems come from that split (a run on "test", or ``heldout_fraction``) scores problems
    the base model's warm-up saw, and its base score is not a held-out one."""
    found = []
    split = config.dataset_split
    if split in ("test", "validation") and config.dataset_name != "builtin:code":
        # any model, any data set (issue 34: this was said for builtin:tiny only)
        found.append(
            f"dataset_split {split!r}: this run trains on the data set's {split} split, the problems its held-out "
            f"scores (and anyone's benchmark figures) are usually read on; train on 'train' to keep them unseen"
        )
    model = getattr(config, "model_name_or_path", None)
    if model != BUILTIN_MODEL or config.dataset_name != "builtin:arithmetic":
        return found
    if not config.heldout_fraction and split == "train":
        return found
    return found + [
        "the held-out problems of this run come from builtin:arithmetic's train split, which builtin:tiny was "
        "warmed up on: held out of this run, not of the model (train on 'train' with heldout_fraction 0 to "
        "evaluate on problems neither has seen)"
    ]
