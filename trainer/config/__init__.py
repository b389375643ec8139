"""A run's config and every rule it must pass: the one answer to "why was my config refused?".

- :mod:`~trainer.config.fields`: how a setting is declared (help text, form section, range, TRL's name);
- :mod:`~trainer.config.run_config`: :class:`RunConfig`, every setting of a run, and :class:`ConfigError`;
- :mod:`~trainer.config.file` and :mod:`~trainer.config.keys`: reading a YAML/JSON file nobody vetted, and the keys
  of a mapping that are no setting (a typo is a problem, another tool's key a note);
- :mod:`~trainer.config.values` and :mod:`~trainer.config.rules`: each value read as its field's type, and the rules
  that need nothing but the config;
- the rules that need a setting's text and little else: :mod:`~trainer.config.names` (what a model or data-set name
  names, which the loaders ask too; a local file has no splits), :mod:`~trainer.config.cluster` (Slurm and vLLM
  server mode), :mod:`~trainer.config.access` (what the dashboard's operator lets its users point a run at) and
  :mod:`~trainer.config.fork` (what a fork may change);
- :mod:`trainer.review` (a package of its own, above this one): the rules that look at what a setting names (the
  model and the GPU path, the data, held-out evaluation, the rewards: they import the loaders and the reward
  registry), and the composition of every rule, :func:`~trainer.review.check`, which every entry (the command line,
  the dashboard, the API, the worker, a fork, the probe) calls.

Importing this package loads only the ground (the dataclass, its file reader and its own rules: no torch, no YAML,
no database; tests/actions/test_actions.py checks it). The loaders import the ground (RunConfig, what a name names) and the
review imports the loaders, so the review is a room of its own beside this one, trainer/review/, above both: no two
folders import each other and none imports a folder above it (scripts/architecture.py draws it;
tests/docs/test_architecture_page.py checks it). Only the entries import the review.
"""

from trainer.config.fields import EXECUTORS, GROUPS, SYSTEM_PROMPT
from trainer.config.file import ConfigFileError
from trainer.config.run_config import ConfigError, RunConfig

__all__ = ["EXECUTORS", "GROUPS", "SYSTEM_PROMPT", "ConfigError", "ConfigFileError", "RunConfig"]
