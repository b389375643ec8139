"""Everything that touches a model: run config, data sets, rewards, the built-in tiny model, the training worker and
the supervisor that starts, stops and schedules worker processes.

Importing this package is light: torch, transformers and TRL are imported inside the functions that need them, so
the dashboard can use ``trainer.config`` and ``trainer.supervise`` without loading a deep-learning stack.
"""
