"""Every number in a config is bounded where the config is read (issue 58.4): integers beyond 64 bits to /validate
and /launch got no answer at all (orjson, Gradio's encoder, could not write the echoed config), a 30-digit seed the
same, sweep.seed 2**32 reached numpy's traceback, and prune.signal_window 10**30 was stored. Each is one sentence
saying what is wrong and what is expected; each answer encodes as Gradio would send it, and nothing is created."""

from __future__ import annotations

import json

import orjson
import pytest

from app.web.api import endpoints
from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import tiny_config
from trainer.config import RunConfig
from trainer.config.access import Access
from trainer.config.sweep import SweepError, parse, parse_grid

API = endpoints(Access())


def _wire(answer):
    """What the client receives: Gradio's queue encodes every message with orjson, with no fallback."""
    return orjson.loads(orjson.dumps(answer))


def _base() -> dict:
    return json.loads(json.dumps(tiny_config().to_dict()))


def _runs() -> int:
    with get_sessionmaker().begin() as session:
        return len(queries.list_runs(session))


@pytest.mark.parametrize(
    "text, said",
    [
        ('"max_steps": 1180591620717411303424', "max_steps 1.18059e+21: expected a value from 1 to 1,000,000"),
        ('"max_steps": -99999999999999999999999', "max_steps -1e+23: expected a value from 1 to 1,000,000"),
        ('"seed": 123456789012345678901234567890', "seed 1.23457e+29: expected a value from 0 to 4,294,967,295"),
        (
            '"keep_samples_every": 9223372036854775807',
            "keep_samples_every 9.22337e+18: expected a value from 1 to 1,000,000",
        ),
        ('"learning_rate": ' + "9" * 400, "learning_rate " + "9" * 59 + "…: expected a value from 1e-09 to 1"),
    ],
)
def test_a_number_beyond_any_setting_is_one_sentence_from_validate_and_launch(text, said):
    config = json.dumps(_base())[:-1] + ", " + text + "}"  # JSON text, as a script posts it
    validated = _wire(API["validate"](config))
    assert validated["valid"] is False and validated["problems"] == [said]
    launched = _wire(API["launch"](config))
    assert launched["run_id"] is None and launched["problems"] == validated["problems"]
    assert _runs() == 0


def test_a_30_digit_seed_in_yaml_is_refused_as_out_of_range():
    import yaml

    config = yaml.safe_dump(_base()) + "seed: 123456789012345678901234567890\n"
    validated = _wire(API["validate"](config))
    assert validated["problems"] == ["seed 1.23457e+29: expected a value from 0 to 4,294,967,295"]
    assert validated["config"] is None  # not echoed back: a value refused as it is read is in no config


def test_the_largest_whole_number_is_read_and_one_more_is_not():
    assert RunConfig.from_dict({"max_steps": 2**63 - 1})[0].max_steps == 2**63 - 1  # refused later, by its range
    with pytest.raises(Exception, match=r"max_steps 9\.22337e\+18: expected a value from 1 to 1,000,000"):
        RunConfig.from_dict({"max_steps": 2**63})


@pytest.mark.parametrize(
    "block, said",
    [
        (
            {"method": "tpe", "members": 4, "seed": 2**32, "settings": {"beta": {"low": 0, "high": 0.1}}},
            "sweep.seed 4294967296: expected a whole number from 0 to 4,294,967,295",
        ),
        (
            {"settings": {"beta": [0, 0.1]}, "prune": {"signal_window": 10**30}},
            "sweep.prune.signal_window 1000000000000000000000000000000: expected a whole number from 1 to 1,000,000",
        ),
        (
            {"settings": {"beta": [0, 0.1]}, "prune": {"median_peers": 0}},
            "sweep.prune.median_peers 0: expected a whole number from 1 to 63",
        ),
        (
            {"method": "random", "members": 2**70, "settings": {"beta": {"low": 0, "high": 0.1}}},
            "sweep.members 1180591620717411303424: random search needs from 1 to 64 members",
        ),
        (
            {"members": 2**70, "settings": {"beta": [0, 0.1]}},
            "sweep.members 1180591620717411303424: expected a whole number from 0 to 64",
        ),
        (
            {"settings": {"max_steps": [4, 2**70]}},
            "sweep.settings.max_steps 1180591620717411303424: expected a value from 1 to 1,000,000",
        ),
        (
            {"method": "tpe", "members": 4, "settings": {"max_steps": {"low": 1, "high": 1e30}}},
            "sweep.settings.max_steps: low 1 and high 1e+30 must lie within max_steps's range, a value from 1 to 1,000,000",
        ),
        (
            {"method": "tpe", "members": 4, "settings": {"max_steps": {"low": 1, "high": 10**400}}},
            "sweep.settings.max_steps: a range needs low and high numbers, e.g. {low: 1e-5, high: 1e-4}",
        ),
    ],
)
def test_a_sweeps_numbers_are_bounded_as_it_is_read(block, said):
    with pytest.raises(SweepError) as refused:
        parse(block)
    assert refused.value.problems == [said]


def test_a_sweep_with_a_seed_beyond_numpys_is_refused_by_the_api_in_one_sentence():
    block = {"method": "random", "members": 2, "seed": 2**32, "settings": {"beta": {"low": 0, "high": 0.1}}}
    config = json.dumps(_base() | {"eval_steps": 2, "sweep": block})
    answer = _wire(API["sweep"](config, ""))
    assert answer == {
        "sweep_id": None,
        "members": [],
        "problems": ["sweep.seed 4294967296: expected a whole number from 0 to 4,294,967,295"],
    }


def test_the_grid_flag_bounds_its_numbers_too():
    with pytest.raises(SweepError) as refused:
        parse(None, parse_grid("max_steps=4,1e400"))
    assert refused.value.problems == ["sweep.settings.max_steps '1e400': expected a value from 1 to 1,000,000"]
