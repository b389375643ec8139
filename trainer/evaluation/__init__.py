"""After (and beside) training: held-out evaluation and base-vs-tuned comparison."""
