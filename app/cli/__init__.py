"""The command line, ``grpo-studio``: its parser and verbs (main.py), a followed run's output (output.py, log.py), and
one module per group of verbs (runs, sweeps, models, prompts). Like the dashboard (app/web/), it acts through
app/actions/ and the verb table (app/actions/verbs.py)."""
