"""Where each step's time goes (issue 57, item 8): the parts of trainer.job.step_times, their sum against the stored
wall time, the stacked chart and its note naming the biggest share.

One tiny run of 3 steps, trained in this process, is shared by the slow tests: held-out evaluation at steps 2 and 3
(eval_steps 2 and the last step), a checkpoint after step 2, and a fourth reward that waits four times as long as
the rest of each step took (tests/fixtures/paced_reward.py's ``outpaces``), so that it is the biggest share whatever the load.
"""

from __future__ import annotations

import dataclasses

import pytest

from app.web.widgets.chart_notes import chart_notes, time_note
from app.web.widgets.charts import CHARTS, build_figure
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import FIXTURES, create_run, tiny_config
from trainer.config import RunConfig
from trainer.job.step_times import OTHER, StepClock

SLOW = f"{FIXTURES / 'paced_reward.py'}:outpaces"
SLOW_KEY = "time/rewards/outpaces"  # a custom reward by its function's name, as TRL logs rewards/outpaces/mean
CHART = next(chart for chart in CHARTS if chart.name == "step_time")


# --- the clock, on a clock of our own ---------------------------------------------------------------------------------
def test_each_instant_goes_to_the_innermost_part_and_the_parts_sum_to_the_step():
    now = [0.0]
    clock = StepClock(lambda: now[0])
    clock.declare("time/generation")
    clock.declare("time/eval")
    clock.start()
    now[0] = 1.0  # 1 s of the rest
    clock.enter("time/generation")
    now[0] = 3.0
    clock.enter("time/sync")  # inside generation: 0.5 s of sync, not of generation
    now[0] = 3.5
    clock.leave()
    now[0] = 4.0
    clock.leave()
    now[0] = 4.25
    assert clock.lap() == {"time/generation": 2.5, "time/eval": 0.0, "time/sync": 0.5, OTHER: 1.25}
    now[0] = 5.0  # the next step starts where the last one ended
    assert clock.lap() == {"time/generation": 0.0, "time/eval": 0.0, OTHER: 0.75}


def test_a_timed_call_inside_another_part_is_left_to_it_when_outermost():
    now = [0.0]
    clock = StepClock(lambda: now[0])
    clock.start()

    def logps():
        now[0] += 1.0

    timed = clock.timed("time/logprobs", logps, outermost=True)
    timed()  # on its own: a log-prob pass

    def loss():
        now[0] += 2.0
        timed()  # the loss's own forward pass: the update's

    clock.timed("time/backward", loss)()
    assert clock.lap() == {"time/logprobs": 1.0, "time/backward": 3.0, OTHER: 0.0}


# --- the note, on literal rows ----------------------------------------------------------------------------------------
def _points(*values):
    return [(step, value, float(step)) for step, value in enumerate(values, start=1)]


def test_the_note_names_the_biggest_share_and_what_shrinks_it():
    series = {"time/generation": _points(6.0, 6.0), "time/backward": _points(3.0, 3.0), OTHER: _points(1.0, 1.0)}
    note = time_note({"use_vllm": False, "max_completion_length": 200}, series)
    assert note.startswith("generation takes 60% of a step")
    assert "use_vllm" in note and "max_completion_length (200)" in note
    slow = {**series, "time/rewards/judge": _points(30.0, 30.0)}
    note = time_note({"reward_funcs": ["correctness", "judge"]}, slow)
    assert note.startswith("the reward judge takes 75% of a step") and "judge" in note.split("<br>")[1]
    backward = {"time/backward": _points(5.0), OTHER: _points(1.0)}
    assert "gradient_checkpointing" in time_note({"gradient_checkpointing": True}, backward)
    assert "gradient_checkpointing" not in time_note({"gradient_checkpointing": False}, backward)
    assert time_note({}, {}) is None  # nothing measured: no note


def test_the_note_names_a_setting_the_stored_config_lacks_as_the_run_had_it():
    """Issue 60.2: the note's advice read a missing max_completion_length as 256 and lora_r as 16, defaults of its
    own; a stored config is read as a RunConfig, so it names the values the run trained with."""
    generation = time_note({}, {"time/generation": _points(5.0), OTHER: _points(1.0)})
    assert f"max_completion_length ({RunConfig().max_completion_length})" in generation
    update = time_note({}, {"time/backward": _points(5.0), OTHER: _points(1.0)})
    assert f"lora_r ({RunConfig().lora_r})" in update and RunConfig().lora_r != 16


def test_the_chart_stacks_the_parts():
    series = {"time/generation": _points(2.0, 3.0), OTHER: _points(1.0, 1.0), "time/rewards/int": _points(0.5, 0.5)}
    figure = build_figure(CHART, {"run": series})
    assert [trace.name for trace in figure.data] == ["generation", "the rest", "reward int"]
    assert {trace.stackgroup for trace in figure.data} == {"run"}


# --- a real run -------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def timed_run(module_database, tiny_model_path):
    """The module's finished run: (config, every key's points as step -> (value, wall time))."""
    from trainer.job.worker import run_worker

    config = tiny_config(name="step-times", max_steps=3, save_steps=2, eval_steps=2, eval_problems=10)
    config = dataclasses.replace(config, reward_funcs=[*config.reward_funcs, SLOW])
    run_id = create_run(config)
    assert run_worker(run_id).value == "completed"
    with get_sessionmaker().begin() as s:
        points = queries.metrics_since(s, run_id)
    return config, {key: {int(st): (v, w) for st, v, w in rows} for key, rows in points.items()}


@pytest.mark.slow
def test_every_part_is_logged_at_every_step_and_they_sum_to_the_steps_wall_time(timed_run):
    config, series = timed_run
    parts = sorted(key for key in series if key.startswith("time/"))
    rewards = [f"time/rewards/{name.rsplit(':', 1)[-1]}" for name in config.reward_funcs]
    expected = ["time/backward", "time/checkpoint", "time/eval", "time/generation", "time/logprobs", OTHER]
    assert set(parts) == {*expected, *rewards, "time/writes"}
    for key in parts:
        assert sorted(series[key]) == [1, 2, 3], key
        assert all(value >= 0 for value, _ in series[key].values()), key
    wall = {step: stamp for step, (_, stamp) in series["reward"].items()}
    for step in (2, 3):
        total = sum(series[key][step][0] for key in parts)
        # the step runs from the previous step's end to its own, the span between the two stored stamps; what
        # differs is the few milliseconds from a step's end to its stamp (TRL's averaging of its metrics)
        assert total == pytest.approx(wall[step] - wall[step - 1], abs=0.1), step
    assert all(
        series[key][step][0] > 0 for key in ("time/generation", "time/backward", "time/logprobs") for step in (1, 2, 3)
    )
    # held-out evaluation at steps 2 and 3 only; the checkpoint saved after step 2 is in step 3's span
    assert [series["time/eval"][step][0] > 0 for step in (1, 2, 3)] == [False, True, True]
    assert [series["time/checkpoint"][step][0] > 0 for step in (1, 2, 3)] == [False, False, True]
    # the writes of the step before, and the token view's passes of its own
    assert all(series["time/writes"][step][0] > 0 for step in (1, 2, 3))


@pytest.mark.slow
def test_the_slow_reward_is_the_biggest_share_and_the_note_names_it(timed_run):
    config, series = timed_run
    means = {key: sum(v for v, _ in points.values()) / 3 for key, points in series.items() if key.startswith("time/")}
    assert max(means, key=means.get) == SLOW_KEY, means  # what the note reads: the parts' means over the steps
    drawn = {key: [(step, value, stamp) for step, (value, stamp) in points.items()] for key, points in series.items()}
    note = chart_notes(config.to_dict(), series=drawn)["step_time"]
    assert note.startswith("the reward outpaces takes ")
