"""Compare: base vs tuned on the same prompt with the same seeds, held-out evaluation, and export.

Models load in this (dashboard) process only when this page first needs one (app.actions.comparing: torch is imported
inside the functions it calls). While a training run is using the GPU the page says so instead of running out of
memory.

Sample both is a generator event: the comparison runs in a thread (app/web/widgets/reported.py) and tells each side's phase as it
begins, which the page shows under the button while the button is disabled; Cancel sets an event the comparison asks
between phases and after each generated token. Cooperative, not Gradio's ``cancels=``: a cancelled Gradio event leaves
its thread running with the model's lock, and the button as the last answer left it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from app import actions
from app.markup import md
from app.web.pages import evaluation
from app.web.widgets.completions import turns_text
from app.web.widgets.errors import acted, user_error
from app.web.widgets.reported import Reported
from app.web.widgets.verdict import problem, verdict

log = logging.getLogger(__name__)

COLUMNS = ["#", "completion", "rewards", "total"]
# In pixels, as the Runs table's: shares squeezed "total" to a letter a line on a phone, where the table now scrolls
# sideways in its box; the completion wraps
WIDTHS = ["40px", "300px", "190px", "70px"]


# --- callbacks ------------------------------------------------------------------------------------------------------
def finished_runs(summaries: list[actions.RunSummary] | None = None) -> list[tuple[str, int]]:
    """Runs that have ended and saved an adapter (completed or stopped), newest first (app.actions.adapter_names)."""
    if summaries is None:
        summaries = actions.runs()
    return [(f"{r.id}: {r.name} ({r.status})", r.id) for r in summaries if actions.adapter_names(r)]


def ready_run(summaries: list[actions.RunSummary]) -> int | None:
    """The run the page starts with: the newest ended run with a final adapter, so "Sample both" works at once; None
    when there is none (never a live run, nor one without a checkpoint)."""
    return next((r.id for r in summaries if "final" in actions.adapter_names(r)), None)


EXAMPLES = 20  # held-out prompts offered per run
HELDOUT_POOL = 100  # the problems they are chosen from: the periodic evaluation's (trainer.evaluation.periodic_eval)


def changed_questions(points) -> set[str]:
    """The held-out questions whose greedy correctness differs between the run's first evaluation (step 0: the base)
    and its latest (app.actions.heldout_points): there base and tuned answer differently, so the side-by-side
    shows what training changed (on the demo, the first held-out prompt gave identical text on both sides)."""
    steps = sorted({p.step for p in points})
    if len(steps) < 2:
        return set()
    first = {p.question: p.correct for p in points if p.step == steps[0]}
    last = {p.question: p.correct for p in points if p.step == steps[-1]}
    return {q for q, correct in last.items() if q in first and first[q] != correct}


def run_details(run_id):
    """Checkpoint choices and example prompts (with reference answers) of the picked run: held-out ones, problems it
    did not train on (trainer.loading.heldout), so the panel compares base and tuned where tuning has to generalise.
    The problems whose answer training changed (:func:`changed_questions`) are offered first."""
    if run_id is None:
        return gr.update(choices=[], value=None), gr.update(choices=[], value=None)
    config, adapters = _run(run_id)
    try:
        problems = actions.heldout_problems(config, HELDOUT_POOL)
    except Exception:  # no held-out problems, or the data set needs the hub; typing a prompt still works
        problems = []
    changed = changed_questions(actions.heldout_points(int(run_id)))
    order = sorted(range(len(problems)), key=lambda i: (problems[i].question not in changed, i))[:EXAMPLES]
    examples = [(f"{problems[i].question[:90]} → {problems[i].answer}", i) for i in order]
    names = list(adapters)
    chosen = "final" if "final" in names else (names[0] if names else None)
    return gr.update(choices=names, value=chosen), gr.update(choices=examples, value=None)


def pick_example(run_id, index):
    """Fill the prompt and reference answer from the run's held-out problems (the list :func:`run_details` offered),
    and remember the pair (:func:`reference_for`)."""
    if run_id is None or index is None:
        return gr.update(), gr.update(), gr.update()
    config, _ = _run(run_id)
    problem = actions.heldout_problems(config, HELDOUT_POOL)[int(index)]
    return problem.question, problem.answer, [problem.question, problem.answer]


def reference_for(question: str | None, reference: str | None, picked: list | tuple | None) -> str | None:
    """The reference answer that scores ``question``: the box's, unless it is a picked problem's reference and the
    prompt is no longer that problem's (pasted over, autofilled, set by a script: however the text changed). A
    reference typed by hand always counts."""
    reference = (reference or "").strip() or None
    if picked and reference is not None and reference == (picked[1] or "").strip():
        if (question or "").strip() != (picked[0] or "").strip():
            return None
    return reference


def let_go_of_example(question, reference, picked):
    """The picker and the reference answer once the prompt is not the picked problem's any more: both cleared (the
    reference only when it is still the picked one; one typed by hand stays), and the pair forgotten. Runs on every
    change of the prompt's value, not on keystrokes: a paste or an autofill is one change."""
    if not picked or (question or "").strip() == (picked[0] or "").strip():
        return gr.update(), gr.update(), gr.update()
    kept = reference_for(question, reference, picked)
    return gr.update(value=None), gr.update() if kept else "", None


def release_for_run(run) -> None:
    """Called by the scheduler before it starts ``run``'s worker: on a GPU machine, free this panel's model so the
    worker (vLLM in particular) finds the GPU memory it needs; the panel says so (:func:`panel_notice`)."""
    actions.release_compare_model(run)


def panel_notice() -> str:
    """Why the panel's model is not loaded any more (released for a training run), or nothing."""
    notice = actions.compare_notice()
    return f"*{md(notice)}*" if notice else ""


NOTHING_TO_SAMPLE = (
    "Nothing to sample yet: pick a run in the Run box. A run appears there once it has saved an adapter; launch one "
    "under New run (the demo saves its first after a few steps)."
)
NO_PROMPT = "Pick a held-out prompt from the run's data set, or type one, then press Sample both."


def readiness(run_id, question) -> tuple[dict, str]:
    """Sample both is pressable only with a run and a prompt to sample; the line under it says what is missing."""
    if run_id in (None, ""):
        return gr.update(interactive=False), NOTHING_TO_SAMPLE
    if not (question or "").strip():
        return gr.update(interactive=False), NO_PROMPT
    return gr.update(interactive=True), ""


# A comparison's phases as the page says them, per side (trainer.evaluation.compare: on_phase(side, what))
WAITING = {"base": "waiting to start", "tuned": "waiting for the base side"}
DONE = "done"  # trainer.evaluation.compare.DONE, which this page may not import (it would load the trainer)
# The comparison running in each browser session, to cancel: the Cancel button's event sets it, the comparison asks
# it between its phases and after each generated token (a model load in progress finishes first)
_CANCELS: dict[str, threading.Event] = {}


def sides_text(now: dict[str, str], n: int) -> str:
    """Where each side of a comparison is, a line each: what it is doing now (loading, sampling, scoring), waiting,
    or done; ``now`` maps "base" and "tuned" to the phase each last began."""
    lines = []
    for side in ("base", "tuned"):
        what = now.get(side)
        if what is None:
            said = WAITING[side]
        elif what == DONE:
            said = f"done: {n} completion{'s' if n != 1 else ''} sampled and scored"
        else:
            said = f"**{md(what)}** (now)"
        lines.append(f"- **{side.capitalize()}**: {said}")
    return verdict("wait", "Sampling:", "base first, then tuned.") + "\n\n" + "\n".join(lines)


def run_compare(
    run_id, adapter, question, reference, n, greedy, temperature, seed, picked=None, request: gr.Request = None
):
    """Sample base and tuned side by side and score both; ``picked`` is the held-out (prompt, reference) pair last
    picked, whose reference scores that prompt only (:func:`reference_for`). A generator: it says each side's phase
    as it begins (:func:`sides_text`), Sample both disabled and Cancel enabled until it ends; yields a
    :class:`CompareView` each time."""
    if run_id is None or not adapter:
        raise user_error("pick a run that has a saved adapter, and a checkpoint")
    if not (question or "").strip():
        raise user_error("type a prompt or pick one from the run's data set")
    busy = actions.gpu_busy()
    if busy:
        raise user_error(busy)
    # greedy decoding writes the same answer however often it is asked: one row a side, not N identical ones
    n = 1 if greedy else int(n)
    reference = reference_for(question, reference, picked)
    cancel = _CANCELS[_session(request)] = threading.Event()
    asked = dict(n=n, greedy=bool(greedy), temperature=float(temperature), seed=int(seed), cancelled=cancel.is_set)
    job = Reported(
        lambda heard: actions.compare(
            run_id, adapter, question, reference, on_phase=lambda side, what: heard((side, what)), **asked
        ),
        "compare",
    )
    now: dict[str, str] = {}
    last = "nothing begun"  # the phase begun last, where a cancel stops
    yield CompareView(progress=sides_text(now, n), busy=True)
    for side, what in job:
        now[side], last = what, f"{side}: {what}"
        yield CompareView(progress=sides_text(now, n), busy=True)
    try:
        result = job.result()
    except actions.ActionError as exc:  # refused also when another process took the GPU since gpu_busy() looked
        yield CompareView(progress=problem(exc.message))
        return
    except Exception:
        log.exception("Sample both failed")
        yield CompareView(progress=problem("sampling failed; the details are in the server's log"))
        return
    finally:
        _CANCELS.pop(_session(request), None)
    if result is None:
        yield CompareView(progress=verdict("info", "Cancelled:", f"stopped during {md(last)}; nothing is shown."))
        return
    note = "Greedy decoding: one answer a side (it is the same however often it is asked). " if greedy else ""
    # under both tables, not in the tuned column: an extra paragraph there pushed the tuned table below the base one
    why = note + result.why() + "".join(f"\n\n{md(line)}" for line in result.notes)
    yield CompareView(
        _rows(result.base),
        _rows(result.tuned),
        _summary("Base", result.base, n, reference),
        _summary("Tuned", result.tuned, n, reference),
        why,
        verdict("ok", "Sampled:", "both sides, with the same seeds."),
    )


def cancel_compare(request: gr.Request = None) -> Any:
    """Ask this browser's comparison to stop (it stops at its next phase or generated token)."""
    cancel = _CANCELS.get(_session(request))
    if cancel is None:
        return gr.update()
    cancel.set()
    return verdict("wait", "Cancelling:", "the comparison stops at its next step.")


def _session(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or ""


@dataclass
class CompareView:
    """What one answer of Sample both shows; :func:`build` maps it onto the widgets (``gr.update()``: left as it
    is). ``busy``: a comparison is running (Sample both disabled, Cancel enabled)."""

    base: Any = field(default_factory=gr.update)
    tuned: Any = field(default_factory=gr.update)
    base_summary: Any = field(default_factory=gr.update)
    tuned_summary: Any = field(default_factory=gr.update)
    why: Any = field(default_factory=gr.update)
    progress: Any = field(default_factory=gr.update)
    busy: bool = False


def _rows(side) -> list[list]:
    """A side's table: each completion (a tool run's turn by turn, as the Monitor shows it), its rewards and total."""
    texts = [turns_text(turns) for turns in side.turns] if side.turns is not None else side.completions
    return [
        [i + 1, text, ", ".join(f"{k}={v:.3g}" if v is not None else f"{k}=n/a" for k, v in r.items()), round(t, 3)]
        for i, (text, r, t) in enumerate(zip(texts, side.rewards, side.totals))
    ]


def _summary(label: str, side, n, reference: str | None = "") -> str:
    """A side's line; without a reference answer nothing can be right or wrong: "correct n/a", not 0 of n."""
    correct = f"correct {side.correct}/{int(n)}" if reference else "correct n/a (no reference answer)"
    return f"**{label}**: mean reward {side.mean_reward:.3f} · format {side.formatted}/{int(n)} · {correct}"


def export_merged(run_id, adapter, progress=gr.Progress()) -> tuple[str, str]:
    """Merge the adapter into the base and offer the model directory as a zip."""
    import shutil

    if run_id in (None, ""):
        raise user_error("pick a run first")
    progress(0.2, desc="merging")
    target = actions.new_export_dir() / f"run-{int(run_id)}-merged"
    acted(actions.export, int(run_id), adapter or "final", merge_into=target)
    archive = shutil.make_archive(str(target), "zip", target)
    return archive, f"Merged model (safetensors + tokenizer) ready: {Path(archive).name}"


def push_to_hub(run_id, adapter, repo, token, merged) -> str:
    """Push the adapter (or the merged model) to the Hub; a missing token or network gives a clear message in the
    export box, worded for this page (the command line's "--token" means nothing here)."""
    if not (repo or "").strip():
        return problem("give a Hub repo id, e.g. you/my-grpo-adapter")
    if run_id in (None, ""):
        return problem("pick a run first")
    merged_dir = actions.new_export_dir() / "merged" if merged else None
    try:
        (line,) = actions.export(int(run_id), adapter or "final", merge_into=merged_dir, push_to=repo, token=token)[-1:]
    except actions.ActionError as exc:
        return problem(exc.message)
    return md(line[0].upper() + line[1:])


def _run(run_id) -> tuple[actions.RunConfig, dict[str, Path]]:
    """The run's config and its saved adapters by name (app.actions.compared_run), or the user error saying there is
    no such run."""
    return acted(actions.compared_run, run_id)


# --- layout ---------------------------------------------------------------------------------------------------------
def build() -> tuple[gr.Dropdown, gr.Timer]:
    """Lay out the Compare page; returns its run picker (refreshed by the server) and the held-out evaluation's
    poll timer."""
    with gr.Row():
        # value=None: Gradio would otherwise select the first choice, and the page sets the ready run on load
        # wide enough for "12: a-run-name (completed)": on a phone it takes a line of its own, as the Monitor's
        run = gr.Dropdown(choices=[], value=None, label="Run", elem_id="compare-run", scale=2, min_width=320)
        adapter = gr.Dropdown(choices=[], value=None, label="Checkpoint", elem_id="compare-adapter", scale=1)
        example = gr.Dropdown(
            choices=[], value=None, label="Held-out prompt from the run's data set", elem_id="compare-example", scale=3
        )
    with gr.Row():
        question = gr.Textbox(label="Prompt", lines=2, elem_id="compare-prompt", scale=4)
        reference = gr.Textbox(label="Reference answer (optional)", elem_id="compare-reference", scale=1)
    with gr.Row():
        n = gr.Slider(1, 16, value=4, step=1, label="Completions per side", elem_id="compare-n")
        temperature = gr.Slider(0.1, 2.0, value=1.0, step=0.05, label="Temperature")
        seed = gr.Number(value=0, precision=0, label="Seed")
        greedy = gr.Checkbox(label="Greedy decoding", elem_id="compare-greedy")
    # the held-out (prompt, reference) pair last picked: its reference belongs to that prompt only
    picked = gr.State(None)
    with gr.Row():
        go_button = gr.Button("Sample both", variant="primary", elem_id="compare-go", interactive=False, scale=3)
        cancel_button = gr.Button("Cancel", elem_id="compare-cancel", interactive=False, scale=1)
    progress = gr.Markdown(elem_id="compare-progress")  # each side's phase while Sample both runs
    ready = gr.Markdown(NOTHING_TO_SAMPLE, elem_id="compare-ready")  # what is missing before Sample both can run
    notice = gr.Markdown(panel_notice, elem_id="compare-notice")
    with gr.Row():
        with gr.Column():
            base_summary = gr.Markdown("**Base**: the model without the adapter", elem_id="compare-base-summary")
            base_table = gr.Dataframe(
                headers=COLUMNS, wrap=True, interactive=False, column_widths=WIDTHS, elem_id="compare-base"
            )
        with gr.Column():
            tuned_summary = gr.Markdown("**Tuned**: with the run's adapter", elem_id="compare-tuned-summary")
            tuned_table = gr.Dataframe(
                headers=COLUMNS, wrap=True, interactive=False, column_widths=WIDTHS, elem_id="compare-tuned"
            )
    why = gr.Markdown(elem_id="compare-why")  # how far apart the two sides are, under both of them
    evaluating = evaluation.build(run, adapter)
    with gr.Accordion("Export", open=False):
        with gr.Row():
            merge_button = gr.Button("Merge into the base and download")
            merged_file = gr.File(label="Merged model", interactive=False)
        with gr.Row():
            repo = gr.Textbox(label="Hub repo id")
            token = gr.Textbox(label="Hugging Face token", type="password")
            push_merged = gr.Checkbox(label="push the merged model (else the adapter)")
            push_button = gr.Button("Push to the Hub")
        export_message = gr.Markdown()

    run.change(run_details, run, [adapter, example])
    run.change(panel_notice, None, notice)
    example.change(pick_example, [run, example], [question, reference, picked])

    def sampled(run_id, adapter_name, prompt, answer, count, greedily, heat, seed_value, pair, request: gr.Request):
        asked = (run_id, adapter_name, prompt, answer, count, greedily, heat, seed_value, pair)
        for view in run_compare(*asked, request=request):
            yield {
                base_table: view.base,
                tuned_table: view.tuned,
                base_summary: view.base_summary,
                tuned_summary: view.tuned_summary,
                why: view.why,
                progress: view.progress,
                go_button: gr.update(interactive=not view.busy),
                cancel_button: gr.update(interactive=view.busy),
            }

    go_button.click(
        sampled,
        [run, adapter, question, reference, n, greedy, temperature, seed, picked],
        [base_table, tuned_table, base_summary, tuned_summary, why, progress, go_button, cancel_button],
        show_progress="minimal",  # the sides' phases say what happens; a spinner over the tables said nothing
        show_progress_on=[progress],
    )
    cancel_button.click(cancel_compare, None, progress, show_progress="hidden")
    # a prompt that is not the picked held-out one any more (typed, pasted, autofilled): the picker lets go of it, and
    # of the reference answer that came with it (kept, it scored the new prompt against another problem's answer).
    # On .change, which every new value fires, where .input missed a paste; run_compare checks the pair again.
    question.change(let_go_of_example, [question, reference, picked], [example, reference, picked])
    gr.on([run.change, question.change], readiness, [run, question], [go_button, ready], show_progress="hidden")
    greedy.change(lambda g: gr.update(interactive=not g), greedy, n)
    merge_button.click(export_merged, [run, adapter], [merged_file, export_message])
    push_button.click(push_to_hub, [run, adapter, repo, token, push_merged], export_message)
    return run, evaluating
