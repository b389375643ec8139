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


LAST_END: list[float] = []  # when outpaces last returned


def outpaces(prompts, completions, **kwargs):
    """0.0 for every completion, after waiting three times as long as the rest of the step cycle took since its
    previous call returned (3 s the first time, 1 s at least): whatever the machine's load, its calls take about
    three quarters of the run's steps, the biggest share by far. tests/test_step_times.py's slow reward."""
    now = time.monotonic()
    rest = now - LAST_END[-1] if LAST_END else 1.0
    time.sleep(min(max(3 * rest, 1.0), 60.0))
    LAST_END.append(time.monotonic())
    return [0.0] * len(completions)
