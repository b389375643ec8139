"""A sweep's definition (trainer/config/sweep.py, issue 41): the ``sweep:`` block and ``--grid`` read into a checked
spec with one-sentence problems, and the points each method gives (a grid's every combination; random and TPE
reproducible under a seed)."""

from __future__ import annotations

import pytest

from trainer.config import RunConfig
from trainer.config import sweep as sw


def _problems(block, grid=None) -> list[str]:
    with pytest.raises(sw.SweepError) as caught:
        sw.parse(block, grid)
    return caught.value.problems


def test_the_cli_grid_makes_every_combination_last_setting_fastest():
    spec = sw.parse(None, sw.parse_grid("beta=0,0.04 learning_rate=1e-5,5e-5"))
    assert spec.method == "grid" and spec.size == 4
    assert sw.points(spec) == [
        {"beta": 0.0, "learning_rate": 1e-5},
        {"beta": 0.0, "learning_rate": 5e-5},
        {"beta": 0.04, "learning_rate": 1e-5},
        {"beta": 0.04, "learning_rate": 5e-5},
    ]


def test_values_are_read_as_the_settings_type():
    spec = sw.parse({"settings": {"num_generations": ["2", 4], "loss_type": ["grpo", "dr_grpo"], "curriculum": [True]}})
    assert sw.points(spec)[0] == {"num_generations": 2, "loss_type": "grpo", "curriculum": True}
    assert spec.size == 4


def test_a_range_with_a_count_is_its_evenly_spaced_points_in_linear_or_log():
    spec = sw.parse(
        {
            "settings": {
                "learning_rate": {"low": 1e-5, "high": 1e-3, "count": 3, "scale": "log"},
                "beta": {"low": 0, "high": 0.04, "count": 3},
                "lora_r": {"low": 4, "high": 16, "count": 3},
            }
        }
    )
    values = {d.setting: d.values for d in spec.dimensions}
    assert values == {"learning_rate": (1e-5, 1e-4, 1e-3), "beta": (0.0, 0.02, 0.04), "lora_r": (4, 10, 16)}
    assert spec.size == 27


def test_a_cli_setting_replaces_the_blocks_setting_of_the_same_name():
    spec = sw.parse({"settings": {"beta": [0.1, 0.2, 0.3]}}, sw.parse_grid("beta=0,0.04"))
    assert [p["beta"] for p in sw.points(spec)] == [0.0, 0.04]


def test_problems_name_the_setting_and_what_is_expected_all_at_once():
    found = _problems(
        {
            "method": "bayes",
            "direction": "up",
            "settings": {"lr": [1e-5], "name": ["a", "b"], "beta": [0.0, 0.0]},
            "prune": {"signal_share": 2, "patience": 3},
            "colour": "red",
        }
    )
    assert found == [
        "sweep.colour: not a sweep setting (expected one of method, members, seed, objective, direction, settings, prune)",
        "sweep.method 'bayes': expected one of grid, random, tpe",
        "sweep.direction 'up': expected max or min",
        "sweep.settings.lr: no such setting; did you mean learning_rate?",
        "sweep.settings.name: only numeric and choice settings are swept, and name is neither",
        "sweep.settings.beta lists a value twice: each point of a sweep is run once",
        "sweep.prune.patience: not a pruning setting (expected one of probe, median, median_warmup, median_peers, "
        "signal, signal_window, signal_share, watch)",
        "sweep.prune.signal_share 2: expected a share above 0, at most 1",
    ]


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({"settings": {"beta": {"low": 0, "high": 1}}}, "sweep.settings.beta: a grid needs values or a range"),
        ({"settings": {"beta": ["high"]}}, "sweep.settings.beta 'high': expected a number"),
        ({"settings": {"beta": {"low": 1, "high": 0, "count": 2}}}, "sweep.settings.beta: low 1 must be below high 0"),
        ({"settings": {"learning_rate": {"low": 0, "high": 1, "count": 3, "scale": "log"}}}, "a log scale needs low"),
        ({"settings": {"loss_type": {"low": 0, "high": 1}}}, "loss_type takes a list of values, not a range"),
        ({"settings": {}}, "sweep.settings is empty: name at least one setting"),
        ({"method": "random", "settings": {"beta": [0, 1]}}, "sweep.members 0: random search needs from 1 to 64"),
        ({"settings": {"beta": [0, 0.1, 0.2, 0.3], "seed": list(range(20))}}, "the grid has 80 members (4 x 20)"),
        # issue 58: a terminal's escapes, NUL and HTML were stored raw and shown on the Sweeps page and in the CLI
        (
            {"settings": {"beta": [0, 1]}, "objective": "reward\x1b]52;c;aGk=\x07"},
            "sweep.objective holds the control character U+001B (ESC) at character 7: expected printable text",
        ),
        ({"settings": {"beta": [0, 1]}, "objective": "reward\x00"}, "sweep.objective holds a NUL byte at character 7"),
        (
            {"settings": {"beta": [0, 1]}, "objective": "<img src=x onerror=alert(1)>"},
            "expected a logged metric's name (at most 200 letters, digits and / _ - . :), e.g. heldout/correct",
        ),
    ],
)
def test_a_broken_block_says_what_is_wrong(block, problem):
    assert any(problem in p for p in _problems(block)), _problems(block)


@pytest.mark.parametrize("text", ["beta", "beta=", "=1,2", "beta=1 beta=2", ""])
def test_a_broken_grid_names_the_part(text):
    with pytest.raises(sw.SweepError) as caught:
        sw.parse_grid(text)
    assert caught.value.problems[0].startswith("--grid")


def test_random_search_is_reproducible_under_its_seed_and_stays_in_bounds():
    block = {
        "method": "random",
        "members": 6,
        "seed": 7,
        "settings": {
            "beta": {"low": 0.0, "high": 0.1},
            "learning_rate": {"low": 1e-6, "high": 1e-4, "scale": "log"},
            "num_generations": [2, 4, 8],
        },
    }
    first, again = sw.points(sw.parse(block)), sw.points(sw.parse(block))
    assert first == again and len(first) == 6
    assert len({tuple(sorted(p.items())) for p in first}) == 6  # each point once
    assert all(0 <= p["beta"] <= 0.1 and 1e-6 <= p["learning_rate"] <= 1e-4 for p in first)
    assert {p["num_generations"] for p in first} <= {2, 4, 8}
    assert sw.points(sw.parse({**block, "seed": 8})) != first


def test_tpe_is_reproducible_and_asks_after_what_it_was_told():
    spec = sw.parse({"method": "tpe", "members": 8, "seed": 1, "settings": {"beta": {"low": 0.0, "high": 1.0}}})
    first = sw.points(spec)
    assert first == sw.points(spec) and len(first) == 8
    # told that a larger beta scores better, TPE's next points lean to the top of the range
    told = [(p, p["beta"]) for p in first]
    asked = sw.points(spec, told, count=4)
    assert asked == sw.points(spec, told, count=4)
    assert sum(p["beta"] for p in asked) / 4 > sum(p["beta"] for p in first) / 8
    assert not {p["beta"] for p in asked} & {p["beta"] for p in first}


def test_a_search_over_few_values_gives_each_point_once():
    spec = sw.parse({"method": "random", "members": 5, "settings": {"beta": [0.0, 0.01, 0.02]}})
    assert sorted(p["beta"] for p in sw.points(spec)) == [0.0, 0.01, 0.02]


def test_the_heldout_objective_needs_periodic_evaluation_and_a_training_metric_does_not():
    spec = sw.parse({"settings": {"beta": [0.0]}})
    assert sw.member_problems(spec, RunConfig(eval_steps=0))[0].startswith(
        "the objective heldout/correct is scored by the periodic held-out evaluation, which is off"
    )
    assert sw.member_problems(spec, RunConfig(eval_steps=5)) == []
    reward = sw.parse({"objective": "reward", "settings": {"beta": [0.0]}})
    assert sw.member_problems(reward, RunConfig(eval_steps=0)) == []


def test_the_stored_definition_reads_back_as_the_same_sweep():
    spec = sw.parse(
        {"method": "random", "members": 3, "seed": 2, "settings": {"beta": {"low": 0, "high": 0.1}, "top_p": [0.9, 1]}}
    )
    again = sw.parse(spec.to_dict())
    assert again == spec and sw.points(again) == sw.points(spec)


def test_split_takes_the_block_out_of_the_run_settings():
    base, block = sw.split({"beta": 0.1, "sweep": {"settings": {"beta": [0, 1]}}})
    assert base == {"beta": 0.1} and block == {"settings": {"beta": [0, 1]}}


def test_settings_that_are_not_a_mapping_are_said_once():
    assert _problems({"settings": "beta"}) == [
        "sweep.settings: expected each swept setting with its values (beta: [0, 0.04]), got 'beta'"
    ]
