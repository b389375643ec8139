"""The dashboard's named API: each user action under a stable name, for scripts and notebooks (``gradio_client``).

    from gradio_client import Client
    client = Client("http://127.0.0.1:7860/", auth=("user", "password"))
    run = client.predict(open("my-run.yaml").read(), api_name="/launch")

Every endpoint is a thin adapter over app.actions, under the same operator rules (``--allow-path``,
``--allow-custom-rewards``) as the dashboard's form, and behind the same ``--auth``. A config is one YAML or JSON
text; ids are whole numbers; every answer is JSON. A refusal (no such run, a run that can't be stopped) comes back as
the client's error with one sentence; an invalid config is not an error for ``/launch``: its answer lists the problems
(``run_id`` None). Every argument's type and range is checked first (each parameter's check in app/actions/verbs.py, from
app.actions.arguments), so a huge, negative, fractional, textual or missing id and a text holding a lone surrogate
get one sentence too, never a traceback or a reply that can't be encoded. The widgets' own events are kept off the
API page (:func:`hide_widget_events`): they change with the layout.

The endpoints and their signatures are the verbs of app/actions/verbs.py that the API offers, under the verbs' names; what
each answers is the function of that name here, called with the checked values, or for a verb with none here its
action's value as JSON (app.actions.verbs.answered).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

import gradio as gr

from app import actions
from app.actions import Access, verbs
from app.web.widgets.errors import acted


def validate(access: Access, config: str) -> dict:
    """Check a run config (YAML or JSON text): every problem at once, the warnings of a valid one, and the config
    as it would run (defaults filled in)."""
    return _sendable(actions.validate(config, access).to_json())


def probe(access: Access, config: str, prompts: int) -> dict:
    """Sample and score a few groups of a valid config with the base model before training: the verdict
    ("learns", "risky" or "wasted"), the report as text, its figures, and "queued_behind": what the probe waited
    for in the dashboard's line of probes (None when it started at once)."""
    waited: list[str] = []
    probed = acted(actions.probe, config, access, prompts, on_queued=waited.append)
    return probed.to_json() | {"queued_behind": waited[0] if waited else None}


def launch(access: Access, config: str) -> dict:
    """Queue a run from a config (YAML or JSON text): its run_id and name, or run_id None and every problem (then
    nothing was created)."""
    try:
        return actions.launch(config, access).to_json()
    except actions.ActionError as exc:
        return {"run_id": None, "name": None, "problems": exc.problems, "error": None}


def sweep(access: Access, config: str, grid: str) -> dict:
    """Create a sweep from a config (YAML or JSON text) with a sweep: block, or the settings of ``grid``
    ("beta=0,0.04 learning_rate=1e-5,5e-5"): its id and each member (run_id, name, point, and why the probe skipped
    it), queued for the dashboard's scheduler; or sweep_id None and every problem (then nothing was created)."""
    try:
        return _sendable(actions.sweep(config, access, grid or None).to_json())
    except actions.ActionError as exc:
        return {"sweep_id": None, "members": [], "problems": exc.problems}


def sweeps(access: Access, sweep_id: int | None) -> dict:
    """Every sweep under "sweeps" (id, name, state, method, objective, members, how many ended, the best member and
    its objective), or with ``sweep_id`` that sweep's table: one row per member with its point, status, objective now
    and best, reward, KL and why it stopped (members are runs: /run, /metrics and /log read them)."""
    if sweep_id is None:
        return {"sweeps": [_sendable(actions.summary_json(s)) for s in actions.sweeps()]}
    return _sendable(acted(actions.sweep_detail, sweep_id).to_json())


def stop_sweep(access: Access, sweep_id: int) -> dict:
    """Stop a sweep: the scheduler asks it no new member and prunes none, and every live member is stopped (a queued
    one at once, a training one at its next step boundary, its adapter saved); "members": the runs stopped."""
    return acted(actions.stop_sweep, sweep_id).to_json()


def resume_sweep(access: Access, sweep_id: int) -> dict:
    """Resume a stopped sweep: active again, and the members its stop ended queued to continue from their latest
    checkpoints ("members"); a TPE sweep asks its next points again."""
    return acted(actions.resume_sweep, sweep_id).to_json()


def delete_sweep(access: Access, sweep_id: int) -> dict:
    """Delete a sweep whose members have all ended, with every member (its metrics, samples, log and files);
    "members": the runs deleted. A sweep with a live member is refused: stop it first."""
    return acted(actions.delete_sweep, sweep_id).to_json() | {"deleted": True}


def stop(access: Access, run_id: int) -> dict:
    """Ask a live run to stop at its next step boundary (its adapter is saved)."""
    sent = acted(actions.stop, run_id)
    return {"run_id": run_id, "stop_sent": sent, "status": _status(run_id)}


def resume(access: Access, run_id: int) -> dict:
    """Queue a stopped or failed run to continue from its latest checkpoint (waits for a worker still saving)."""
    acted(actions.resume, run_id)
    return {"run_id": run_id, "status": _status(run_id)}


def fork(access: Access, run_id: int, step: int, settings: str, name: str) -> dict:
    """A new run from a checkpoint of another, with changed settings (one key=value a line, e.g. beta=0.01);
    returns the new run's id (it is queued)."""
    new_id = acted(actions.fork, run_id, step, settings, access, name or None)
    return {"run_id": new_id, "parent_run_id": run_id, "step": step}


def delete(access: Access, run_id: int) -> dict:
    """Delete a run that is not live, with its metrics, samples, log and files."""
    name = acted(actions.delete, run_id)
    return {"run_id": run_id, "name": name, "deleted": True}


def runs(access: Access, search: str) -> list:
    """Every run, newest first (or those whose name contains ``search``, or whose id it is): id, name, status,
    step, last reward and KL, model, data set, where it runs, health, held-out results."""
    summaries = actions.runs(search or None, reconciled=True)
    places = actions.places(summaries)
    return [actions.run_json(s, places[s.id]) for s in summaries]


def run(access: Access, run_id: int) -> dict:
    """One run: what /runs says of it, with its whole config, its error, and its newest evaluation job's state
    ("evaluation": status, queued_behind, done, total, error; None when it has none)."""
    return acted(actions.run_detail, run_id) | {"evaluation": acted(actions.latest_evaluation_json, run_id)}


def metrics(access: Access, run_id: int, keys: str, since_step: int) -> dict:
    """A run's metric series as columns: "step", "wall_time", then one per key (comma-separated ``keys``, default
    all), None where a key was not logged at a step; only steps after ``since_step``."""
    wanted = [k.strip() for k in keys.split(",") if k.strip()]
    return acted(actions.metrics, run_id, wanted or None, since_step)


def samples(access: Access, run_id: int, step: int | None, limit: int) -> dict:
    """The completions sampled at a step (default the newest): prompt, completion, rewards, total, advantage; a
    tool run's also its "turns", each {role, content} and a call's name and arguments (trainer.tools.turns)."""
    return acted(actions.samples, run_id, step, limit)


def alerts(access: Access, run_id: int) -> list:
    """A run's one list of alerts (the Monitor's banner): failure signs now and the reward-hacking watch's history,
    each with what to try, its level, its source and, for the watch's, the steps it held at."""
    return acted(actions.alerts, run_id)


def log(access: Access, run_id: int, after_id: int) -> dict:
    """A run's log lines after line ``after_id``, whether it has ended, and the id to ask after next."""
    return acted(actions.log, run_id, after_id)


def prompts(access: Access, run_id: int, upto_step: int | None) -> dict:
    """A run's learning map: each prompt's class (learning, forgetting, learnt, seen once, never solved, mostly
    solved, always solved) and pass rate at each visit, the signal share per step, the frontier, and the
    reward-hacking watch's alerts."""
    return actions.learning_json(acted(actions.learning, run_id, upto_step))


def evaluate(access: Access, run_id: int, adapter: str, k: int, samples: int) -> dict:
    """Queue a held-out evaluation of base vs tuned (greedy, then ``samples`` each): it runs when one of the
    dashboard's evaluation slots is free ("queued_behind" says whom it waits for; /run's "evaluation" follows
    it) and its results appear under /run's "heldout" when it has finished."""
    evaluation_id = acted(actions.evaluate, run_id, adapter, k, samples)
    return acted(actions.evaluation_json, evaluation_id)


def _answered(verb: verbs.Verb) -> Callable[..., Any]:
    """The answer of a verb that has no function here: its action's value as JSON (app.actions.verbs.answered), its refusal
    the client's error, its docstring the verb's help."""

    def answer(access: Access, **values: Any) -> Any:
        return _sendable(acted(verbs.answered, verb, values))

    answer.__name__ = answer.__qualname__ = verb.name
    answer.__doc__ = verb.help
    answer.action = verb.action  # what tests/actions/test_verbs.py reads in place of the source's ``actions.NAME``
    return answer


def _answer(verb: verbs.Verb) -> Callable[..., Any]:
    """What the endpoint of ``verb`` answers: the function of the verb's name in this module, else
    :func:`_answered`."""
    written = globals().get(verb.name)
    if inspect.isfunction(written) and written.__module__ == __name__:
        return written
    return _answered(verb)


# Each verb's answer on the API, by the verb's name (app/actions/verbs.py): what the endpoint does with its checked values.
ANSWERS: dict[str, Callable[..., Any]] = {verb.name: _answer(verb) for verb in verbs.on(verbs.API)}
NAMES = tuple(verb.name for verb in verbs.on(verbs.API))


def endpoints(access: Access) -> dict[str, Any]:
    """The API's functions by name, under the operator's ``access`` rules: a verb's parameters (app/actions/verbs.py) as
    the signature, each value checked first, then its answer. Their type hints and docstrings are what the API page
    shows (gr.api reads them)."""
    return {verb.name: _endpoint(verb, ANSWERS[verb.name], access) for verb in verbs.on(verbs.API)}


def _endpoint(verb: verbs.Verb, answer: Callable[..., Any], access: Access) -> Callable[..., Any]:
    """``answer`` as the endpoint of ``verb``: called with the client's values, it checks each as its parameter
    says (a wrong one is the client's error in one sentence) and answers with the checked values."""
    params = verb.api_params
    signature = inspect.Signature(
        [
            inspect.Parameter(
                p.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=inspect.Parameter.empty if p.default is verbs.REQUIRED else p.default,
                annotation=p.type,
            )
            for p in params
        ],
        return_annotation=get_type_hints(answer)["return"],
    )

    def endpoint(*args: Any, **kwargs: Any) -> Any:
        given = signature.bind(*args, **kwargs)
        given.apply_defaults()
        return answer(access, **{p.name: acted(p.check, given.arguments[p.name], p.name) for p in params})

    endpoint.__name__ = endpoint.__qualname__ = verb.name
    endpoint.__doc__ = answer.__doc__
    endpoint.__signature__ = signature  # what inspect.signature and gr.api read
    endpoint.__annotations__ = {p.name: p.type for p in params} | {"return": signature.return_annotation}
    return endpoint


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
