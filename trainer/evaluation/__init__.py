"""After (and beside) training: held-out evaluation, base-vs-tuned comparison, and export of the adapter."""
