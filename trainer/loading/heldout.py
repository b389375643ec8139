"""Held-out problems: the one answer to "which problems did this run not train on?".

The periodic held-out curve (trainer.evaluation.periodic_eval), ``grpo-studio eval`` and the dashboard's evaluation
job (trainer.evaluation.evaluate / eval_job), Compare's data-set prompts (app.web.pages.compare) and config validation
all ask :func:`heldout_set`, so they can't disagree.

Where the problems come from, in this order:

1. ``heldout_fraction`` > 0: the rows it carves out of the training split (:func:`trainer.loading.data.split_heldout`,
   which :func:`~trainer.loading.data.build_dataset` also leaves out of training), for any data set;
2. else another split of the same data set, the first of ``OTHER_SPLITS`` that is not ``dataset_split`` and loads:
   "test" for a run on "train", "train" for a run on "test" (builtin:arithmetic, GSM8K), "validation" where a hub
   data set has one;
3. else none: a single local file or builtin:code (every row may be trained on). Validation refuses a config that
   asks for held-out evaluation (``eval_steps``) on such data, saying how to get some
   (:func:`trainer.review.heldout.check_heldout`, which reads :func:`no_heldout_reason`).

Whatever the source, a problem whose question, whitespace- and case-normalised (:func:`question_key`), is also a
training question is dropped. Split names are not trusted: builtin:arithmetic's "validation" and "heldout" are its
"test" under other names (issue 24: a run on "test" was evaluated on the 200 problems it trained on), and a hub data
set's splits may share rows. Disjointness holds by construction, whatever the split, fraction or data set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainer.config.names import BUILTIN_DATASETS, GSM8K_NAMES
from trainer.loading.data import (
    DataError,
    DataSettings,
    Problem,
    load_problems,
    split_heldout,
)
from trainer.loading.datafiles import SUFFIXES

# Splits tried for held-out problems, in order, skipping the one the run trains on.
OTHER_SPLITS = ("test", "validation", "train")
HINT = "set heldout_fraction (e.g. 0.1) to keep a share of the training rows out of training"


class NoHeldOut(DataError):
    """The run's data has no problems it does not train on."""


@dataclass(frozen=True)
class HeldOut:
    """The problems a run did not train on and where they came from (recorded with every evaluation)."""

    problems: list[Problem]
    source: str  # "split": another split of the data set; "heldout_fraction": carved out of the training split
    split: str  # the split they were taken from ("" for a local file, which has none)
    dropped: int = 0  # problems of that split left out because the run trains on the same question

    def describe(self) -> str:
        """One line for a log or a result: "200 problems of split 'test', which the run does not train on"."""
        return describe_record(self.record())

    def record(self) -> dict:
        """What an evaluation stores about its problems' origin."""
        return {"source": self.source, "split": self.split, "problems": len(self.problems), "dropped": self.dropped}


def describe_record(record: dict) -> str:
    """:meth:`HeldOut.record`, stored with an evaluation, in words."""
    n, split, dropped = record["problems"], record["split"], record.get("dropped", 0)
    if record["source"] == "heldout_fraction":
        text = f"{n} problems heldout_fraction keeps out of the training rows" + (
            f" of split {split!r}" if split else ""
        )
    else:
        text = f"{n} problems of split {split!r}, which the run does not train on"
    if dropped:
        text += f" ({dropped} more left out: the run trains on the same question)"
    return text


def question_key(question: str) -> str:
    """A question's identity for disjointness: whitespace runs collapsed, case folded and thousands-grouped numbers
    written plain (the rewards' comma rule), so "What is  2+2?" and "what is 2+2?" are one question, and so are
    "1,000 apples" and "1000 apples"."""
    from trainer.scoring.rewards import without_thousands

    return without_thousands(" ".join(question.split())).casefold()


def is_local_file(name: str) -> bool:
    """Whether ``dataset_name`` names a local data file (the rule :func:`trainer.loading.data.load_problems` uses)."""
    if name in BUILTIN_DATASETS or name in GSM8K_NAMES:
        return False
    return Path(name).expanduser().suffix.lower() in SUFFIXES


def no_heldout_reason(config: DataSettings) -> str | None:
    """Why the config's data can have no held-out problems, decided without loading anything; None when it may."""
    if config.heldout_fraction:
        return None
    if config.dataset_name == "builtin:code":
        return "builtin:code has no held-out problems (all twelve are training data)"
    if is_local_file(config.dataset_name):
        return (
            f"{config.dataset_name} is a single local file: every row may be trained on, so there is no held-out "
            "split to evaluate on"
        )
    return None


def heldout_set(config: DataSettings) -> HeldOut:
    """The problems ``config``'s run does not train on (see the module docstring for where they come from).

    Raises NoHeldOut when there are none; a data set that fails to load raises what the loader raises."""
    reason = no_heldout_reason(config)
    if reason:
        raise NoHeldOut(f"{reason}; {HINT}")
    if config.heldout_fraction:
        trained, carved = split_heldout(load_problems(config), config.heldout_fraction)
        split = "" if is_local_file(config.dataset_name) else config.dataset_split  # a file has no splits
        found = _disjoint(carved, trained, "heldout_fraction", split)
        if found:
            return found
        raise NoHeldOut(
            f"heldout_fraction {config.heldout_fraction:g} keeps no row of {config.dataset_name} out of training; "
            "raise it"
        )
    trained = load_problems(config)
    tried = []
    for split in OTHER_SPLITS:
        if split == config.dataset_split:
            continue
        try:
            candidates = load_problems(config, split=split)
        except Exception as exc:  # noqa: BLE001 - a data set without this split: try the next one
            tried.append(f"split {split!r}: {exc}")
            continue
        found = _disjoint(candidates, trained, "split", split)
        if found:
            return found
        tried.append(f"split {split!r} holds only questions of {config.dataset_split!r}")
    raise NoHeldOut(
        f"{config.dataset_name} has no split a run on {config.dataset_split!r} does not train on "
        f"({'; '.join(tried)}); {HINT}"
    )


def _disjoint(candidates: list[Problem], trained: list[Problem], source: str, split: str) -> HeldOut | None:
    seen = {question_key(p.question) for p in trained}
    kept = [p for p in candidates if question_key(p.question) not in seen]
    return HeldOut(kept, source, split, len(candidates) - len(kept)) if kept else None
