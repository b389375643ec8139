"""A run's config and every rule it must pass: the one answer to "why was my config refused?".

- :mod:`~trainer.config.fields`: how a setting is declared (help text, form section, range, TRL's name);
- :mod:`~trainer.config.run_config`: :class:`RunConfig`, every setting of a run, and :class:`ConfigError`;
- :mod:`~trainer.config.file` and :mod:`~trainer.config.keys`: reading a YAML/JSON file nobody vetted, and the keys
  of a mapping that are no setting (a typo is a problem, another tool's key a note);
- :mod:`~trainer.config.values` and :mod:`~trainer.config.rules`: each value read as its field's type, and the rules
  that need nothing but the config;
- one module per concept a rule needs beyond the config: :mod:`~trainer.config.model` (the model and the GPU path),
  :mod:`~trainer.config.data`, :mod:`~trainer.config.heldout`, :mod:`~trainer.config.rewards`,
  :mod:`~trainer.config.cluster` (Slurm and vLLM server mode), :mod:`~trainer.config.access` (what the dashboard's
  operator lets its users point a run at) and :mod:`~trainer.config.fork` (what a fork may change);
- :mod:`~trainer.config.review`: the composition of all of them, :func:`~trainer.config.review.check`, which every
  entry (the command line, the dashboard, the API, the worker, a fork, the probe) calls.

Importing this package loads only the ground (the dataclass, its file reader and its own rules: no torch, no YAML,
no database; tests/test_actions.py checks it). The concept modules import what they look at (the data loaders, the
reward registry, storage), so only the review imports them, and only the entries import the review.
"""

from trainer.config.fields import EXECUTORS, GROUPS, SYSTEM_PROMPT
from trainer.config.file import ConfigFileError
from trainer.config.run_config import ConfigError, RunConfig

__all__ = ["EXECUTORS", "GROUPS", "SYSTEM_PROMPT", "ConfigError", "ConfigFileError", "RunConfig"]
