"""The dashboard's named API: each user action under a stable name, for scripts and notebooks (``gradio_client``).

    from gradio_client import Client
    client = Client("http://127.0.0.1:7860/", auth=("user", "password"))
    run = client.predict(open("my-run.yaml").read(), api_name="/launch")

Every endpoint is a thin adapter over app.actions, under the same operator rules (``--allow-path``,
``--allow-custom-rewards``) as the dashboard's form, and behind the same ``--auth``. A config is one YAML or JSON
text; ids are whole numbers; every answer is JSON. A refusal (no such run, a run that can't be stopped) comes back as
the client's error with one sentence; an invalid config is not an error for ``/launch``: its answer lists the problems
(``run_id`` None). Every argument's type and range is checked first (:class:`Valid`, app.actions.arguments), so a
huge, negative, fractional, textual or missing id and a text holding a lone surrogate get one sentence too, never a
traceback or a reply that can't be encoded. The widgets' own events are kept off the API page
(:func:`hide_widget_events`): they change with the layout.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from app import actions
from app.actions import arguments
from app.errors import acted
from trainer.config.access import Access

MAX_CONFIG_CHARS = 1_000_000  # a config text: the config file's own limit is 1 MB


class Valid:
    """The API's argument checks, each answering a wrong value with the client's error in one sentence."""

    @staticmethod
    def id(value: Any, name: str = "run_id") -> int:
        return acted(arguments.run_id, value, name)

    @staticmethod
    def step(value: Any, name: str = "step", low: int = 0) -> int:
        return acted(arguments.step, value, name, low)

    @staticmethod
    def optional_step(value: Any, name: str) -> int | None:
        return acted(arguments.optional_step, value, name)

    @staticmethod
    def whole(value: Any, name: str, low: int, high: int) -> int:
        return acted(arguments.whole, name, value, low, high)

    @staticmethod
    def text(value: Any, name: str, limit: int = arguments.MAX_TEXT, empty: str | None = "") -> str:
        return acted(arguments.text, name, value, limit, empty)

    @staticmethod
    def config(value: Any) -> str:
        return acted(arguments.text, "config", value, MAX_CONFIG_CHARS, None)


NAMES = (
    "validate",
    "probe",
    "launch",
    "stop",
    "resume",
    "fork",
    "delete",
    "runs",
    "run",
    "metrics",
    "samples",
    "alerts",
    "log",
    "prompts",
    "evaluate",
)


def endpoints(access: Access) -> dict[str, Any]:
    """The API's functions by name, under the operator's ``access`` rules. Their type hints and docstrings are what
    the API page shows (gr.api reads them)."""

    def validate(config: str) -> dict:
        """Check a run config (YAML or JSON text): every problem at once, the warnings of a valid one, and the config
        as it would run (defaults filled in)."""
        config = Valid.config(config)
        return _sendable(actions.validate(config, access).to_json())

    def probe(config: str, prompts: int = 8) -> dict:
        """Sample and score a few groups of a valid config with the base model before training: the verdict
        ("learns", "risky" or "wasted"), the report as text, its figures, and "queued_behind": what the probe waited
        for in the dashboard's line of probes (None when it started at once)."""
        config, prompts = Valid.config(config), Valid.whole(prompts, "prompts", *arguments.PROBE_PROMPTS)
        waited: list[str] = []
        probed = acted(actions.probe, config, access, prompts, on_queued=waited.append)
        return probed.to_json() | {"queued_behind": waited[0] if waited else None}

    def launch(config: str) -> dict:
        """Queue a run from a config (YAML or JSON text): its run_id and name, or run_id None and every problem (then
        nothing was created)."""
        config = Valid.config(config)
        try:
            return actions.launch(config, access).to_json()
        except actions.ActionError as exc:
            return {"run_id": None, "name": None, "problems": exc.problems, "error": None}

    def stop(run_id: int) -> dict:
        """Ask a live run to stop at its next step boundary (its adapter is saved)."""
        run_id = Valid.id(run_id)
        sent = acted(actions.stop, run_id)
        return {"run_id": int(run_id), "stop_sent": sent, "status": _status(run_id)}

    def resume(run_id: int) -> dict:
        """Queue a stopped or failed run to continue from its latest checkpoint (waits for a worker still saving)."""
        run_id = Valid.id(run_id)
        acted(actions.resume, run_id)
        return {"run_id": int(run_id), "status": _status(run_id)}

    def fork(run_id: int, step: int, settings: str = "", name: str = "") -> dict:
        """A new run from a checkpoint of another, with changed settings (one key=value a line, e.g. beta=0.01);
        returns the new run's id (it is queued)."""
        run_id, step = Valid.id(run_id), Valid.step(step)
        settings, name = Valid.text(settings, "settings"), Valid.text(name, "name", 200)
        new_id = acted(actions.fork, run_id, step, settings or "", access, name or None)
        return {"run_id": new_id, "parent_run_id": int(run_id), "step": int(step)}

    def delete(run_id: int) -> dict:
        """Delete a run that is not live, with its metrics, samples, log and files."""
        run_id = Valid.id(run_id)
        name = acted(actions.delete, run_id)
        return {"run_id": int(run_id), "name": name, "deleted": True}

    def runs(search: str = "") -> list:
        """Every run, newest first (or those whose name contains ``search``, or whose id it is): id, name, status,
        step, last reward and KL, model, data set, where it runs, health, held-out results."""
        search = Valid.text(search, "search", 200)
        summaries = actions.runs(search or None)
        places = actions.places(summaries)
        return [actions.run_json(s, places[s.id]) for s in summaries]

    def run(run_id: int) -> dict:
        """One run: what /runs says of it, with its whole config, its error, and its newest evaluation job's state
        ("evaluation": status, queued_behind, done, total, error; None when it has none)."""
        run_id = Valid.id(run_id)
        return acted(actions.run_detail, run_id) | {"evaluation": acted(actions.latest_evaluation_json, run_id)}

    def metrics(run_id: int, keys: str = "", since_step: int = -1) -> dict:
        """A run's metric series as columns: "step", "wall_time", then one per key (comma-separated ``keys``, default
        all), None where a key was not logged at a step; only steps after ``since_step``."""
        run_id, keys = Valid.id(run_id), Valid.text(keys, "keys")
        since_step = Valid.step(since_step, "since_step", low=-1)
        wanted = [k.strip() for k in (keys or "").split(",") if k.strip()]
        return acted(actions.metrics, run_id, wanted or None, int(since_step))

    def samples(run_id: int, step: int | None = None, limit: int = 200) -> dict:
        """The completions sampled at a step (default the newest): prompt, completion, rewards, total, advantage."""
        run_id, step = Valid.id(run_id), Valid.optional_step(step, "step")
        limit = Valid.whole(limit, "limit", 1, arguments.MAX_SAMPLES_LIMIT)
        return acted(actions.samples, run_id, step, int(limit))

    def alerts(run_id: int) -> list:
        """A run's one list of alerts (the Monitor's banner): failure signs now and the reward-hacking watch's history,
        each with what to try, its level, its source and, for the watch's, the steps it held at."""
        run_id = Valid.id(run_id)
        return acted(actions.alerts, run_id)

    def log(run_id: int, after_id: int = 0) -> dict:
        """A run's log lines after line ``after_id``, whether it has ended, and the id to ask after next."""
        run_id, after_id = Valid.id(run_id), Valid.whole(after_id, "after_id", 0, arguments.MAX_ID)
        return acted(actions.log, run_id, int(after_id))

    def prompts(run_id: int, upto_step: int | None = None) -> dict:
        """A run's learning map: each prompt's class (learning, forgetting, learnt, seen once, never solved, mostly
        solved, always solved) and pass rate at each visit, the signal share per step, the frontier, and the reward-hacking watch's
        alerts."""
        run_id, upto_step = Valid.id(run_id), Valid.optional_step(upto_step, "upto_step")
        return actions.learning_json(acted(actions.learning, run_id, upto_step))

    def evaluate(run_id: int, adapter: str = "final", k: int = 200, samples: int = 4) -> dict:
        """Queue a held-out evaluation of base vs tuned (greedy, then ``samples`` each): it runs when one of the
        dashboard's evaluation slots is free ("queued_behind" says whom it waits for; /run's "evaluation" follows
        it) and its results appear under /run's "heldout" when it has finished."""
        run_id, adapter = Valid.id(run_id), Valid.text(adapter, "adapter", 40)
        k = Valid.whole(k, "k", *arguments.EVAL_K)
        samples = Valid.whole(samples, "samples", *arguments.EVAL_SAMPLES)
        evaluation_id = acted(actions.evaluate, run_id, adapter, int(k), int(samples))
        return acted(actions.evaluation_json, evaluation_id)

    found = dict(locals())
    return {name: found[name] for name in NAMES}


def _sendable(value: Any) -> Any:
    """``value`` with every lone surrogate in its texts written as its escape (``\\ud800``): /validate echoes an
    invalid config, whose refused name may hold one, and no JSON encoder sends it (the client got no answer)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_sendable(k): _sendable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_sendable(v) for v in value]
    return value


def _status(run_id: int) -> str:
    return actions.run_detail(run_id)["status"]


def register(access: Access) -> None:
    """Add the named endpoints to the gr.Blocks being built (before the pages, so they keep their names)."""
    for name, fn in endpoints(access).items():
        gr.api(fn, api_name=name)


def hide_widget_events(demo: gr.Blocks) -> None:
    """Keep every event but the named API's off the API page and away from the client libraries: the page works
    as before (the browser calls them by index), scripts use the names."""
    for fn in demo.fns.values():
        if fn.api_name not in NAMES:
            fn.api_visibility = "private"
