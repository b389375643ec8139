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


LAST_END: list[float] = [time.monotonic()]  # when the trainer's last call returned; first, when it was imported


def outpaces(prompts, completions, **kwargs):
    """0.0 for every completion. Called by the trainer (TRL passes ``trainer_state``: trl 1.16
    grpo_trainer.py:1588), after waiting four times as long as the rest of the step cycle took since the trainer's
    previous call returned (the first time: since it was imported; 1 s at least, 240 s at most), so that whatever the
    machine's load its calls take about four fifths of the run's steps, the biggest share by far:
    tests/test_step_times.py's slow reward. Called by the held-out evaluation, it answers at once: it once waited
    there too, which made the evaluation's share as long as its own and the test's verdict a coin toss under load."""
    if "trainer_state" not in kwargs:
        return [0.0] * len(completions)
    rest = time.monotonic() - LAST_END[-1]
    time.sleep(min(max(4 * rest, 1.0), 240.0))
    LAST_END.append(time.monotonic())
    return [0.0] * len(completions)
