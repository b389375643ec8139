"""A reward that waits: each call sleeps a second, then scores nothing. A test that waits for a clock while a run
trains (Slurm's time limit, a database locked from outside) adds it beside the run's rewards, so that the run keeps
stepping, a step a second or two, without using a core flat out for the whole wait: the cores are what the rest of
the suite runs on. It is also what a reward that calls a slow judge looks like to the trainer."""

import time

SECONDS = 1.0


def waits(prompts, completions, **kwargs):
    """0.0 for every completion, a second after it was called."""
    time.sleep(SECONDS)
    return [0.0] * len(completions)
