"""The training process: the worker (seed → data → model → rewards → trainer → train → save), its TRL callback,
measures, token capture, curriculum, checkpoints and resume, the database writer, and the TRL arguments it builds.

It is started by module name (``python -m trainer.job.worker RUN_ID``) by the supervisor (trainer.supervise), which
never imports it: the dashboard stays torch-free. The worker uses the supervisor's run files, GPU lease and process
checks, not the other way round."""
