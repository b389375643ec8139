"""The training job: the worker process (seed → data → model → rewards → trainer → train → save), its TRL callback,
database writer, checkpoints and run directory, the TRL arguments it builds, and the launcher that starts, stops and
schedules worker processes."""
