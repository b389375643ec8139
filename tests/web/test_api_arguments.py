"""Every named API endpoint checks its arguments' types and ranges first (issue 35 item 6): huge, negative,
fractional, textual, missing and surrogate values get one sentence, within a few seconds, that the reply encoder
can send, and leave no traceback in the log. The endpoints' functions are called in-process, as gr.api calls them
with the client's decoded JSON."""

from __future__ import annotations

import inspect
import json
import logging

import gradio as gr
import orjson
import pytest

from app.web.api import NAMES, endpoints
from tests.helpers import create_run, tiny_config
from trainer.config.access import Access

BAD = {
    "huge": 10**30,
    "int64 overflow": 2**63,
    "negative": -1,
    "float 1e308": 1e308,
    "fraction": 1.5,
    "text": "x",
    "none": None,
    "surrogate": "\ud800",
    "bool": True,
}
IDS = {"run_id"}  # an id: every bad value is refused
NUMBERS = {"step", "since_step", "limit", "after_id", "upto_step", "k", "samples", "prompts", "sweep_id"}


def _calls():
    for name in NAMES:
        fn = endpoints(Access())[name]
        for param in inspect.signature(fn).parameters:
            for label in BAD:
                yield pytest.param(name, param, label, id=f"{name}-{param}-{label}")


@pytest.fixture(scope="module")
def api(module_database):
    """The endpoints, and one queued run that every call names (one database for the whole battery)."""
    return endpoints(Access()), create_run(tiny_config(name="battery"))


def _baseline(fn, run_id: int) -> dict:
    """Arguments that the endpoint takes (or refuses for a reason of its own, such as a missing checkpoint); the
    config is one with a problem, so that no probe or run starts."""
    values = {"run_id": run_id, "config": json.dumps({**tiny_config(name="b").to_dict(), "beta": -5})}
    values |= {"step": 2, "settings": "beta=0.02", "name": "", "search": "", "keys": "", "since_step": -1}
    values |= {"limit": 10, "after_id": 0, "upto_step": None, "adapter": "final", "k": 2, "samples": 0, "prompts": 1}
    values |= {"grid": "", "sweep_id": None}
    return {p: values[p] for p in inspect.signature(fn).parameters}


def _one_sentence(message: str) -> None:
    assert message and "\n" not in message and "Traceback" not in message and len(message) < 400, message
    message.encode("utf-8")


@pytest.mark.timeout(120)  # a hang guard: no hostile value may leave a call unanswered
@pytest.mark.parametrize(("name", "param", "label"), list(_calls()))
def test_a_bad_argument_gets_one_sentence(api, name, param, label, caplog, monkeypatch):
    from app.actions import jobs

    monkeypatch.setattr(jobs, "gpu_busy", lambda: None)
    fn = api[0][name]
    args = _baseline(fn, api[1])
    args[param] = BAD[label]
    with caplog.at_level(logging.INFO):
        try:
            answer = fn(**args)
        except gr.Error as exc:
            _one_sentence(exc.message)
            refused = True
        else:
            orjson.dumps(answer)  # what Gradio's reply encoder does with it
            refused = False
    if param in IDS or (param in NUMBERS and label in ("huge", "int64 overflow", "float 1e308", "text", "surrogate")):
        assert refused, (name, param, label, answer)
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]


def test_an_id_out_of_range_is_named_with_its_range(api):
    with pytest.raises(gr.Error) as refused:
        api[0]["run"](10**30)
    assert refused.value.message == "run_id must be a whole number from 1 to 9223372036854775807, got a 31-digit number"


def test_a_name_holding_a_lone_surrogate_is_answered(api):
    """The config's text is valid JSON for the client; YAML decodes ``\\ud800`` to a lone surrogate in the name."""
    answer = api[0]["validate"]('name: "\\ud800"\n')
    assert answer["problems"] and "surrogate" in " ".join(answer["problems"])
    orjson.dumps(answer)
