"""The held-out evaluation panel of the Compare page: start an evaluation job, watch its progress, read its result.

The evaluation runs as a job (app.actions.evaluate: a row plus a detached process), not in this process: the
dashboard stays torch-free and responsive, and a restarted dashboard finds the job where it is, since everything
shown here is read back from the database on each tick.
"""

from __future__ import annotations

import gradio as gr

from app import actions
from app.actions.arguments import EVAL_K, EVAL_SAMPLES
from app.markup import md
from app.web.widgets.charts import heldout_figure
from app.web.widgets.errors import acted
from app.web.widgets.verdict import verdict

POLL_SECONDS = 2.0
LABELS = [("correct (greedy)", "correct"), ("pass@1 (sampled)", "pass_at_1"), ("format", "format")]


def start(run_id, adapter, k, samples) -> str:
    """Start an evaluation job for the picked run and checkpoint (app.actions.evaluate); a clear message when it
    can't be."""
    evaluation_id = acted(actions.evaluate, run_id, adapter, k, samples)
    return f"Evaluation {evaluation_id} queued: it loads the model when its turn comes…"


def show(run_id, shown):
    """One tick: the run's newest evaluation as a status line, and its table and chart when it has finished. The
    table and chart are re-sent only when the evaluation shown changes (``shown`` remembers which)."""
    row, behind = actions.latest_evaluation(int(run_id)) if run_id is not None else (None, None)
    key = (row.id, str(row.status)) if row else None
    if row is None:
        return "", gr.update(value=[]), None, key
    line = status_line(row, behind)
    if key == shown:
        return line, gr.update(), gr.update(), key
    if row.status == actions.RunStatus.COMPLETED and row.results:
        rows, figure = result_view(row.results)
        return line, rows, figure, key
    return line, gr.update(value=[]), None, key


def status_line(row: actions.Evaluation, behind: str | None = None) -> str:
    """Where the evaluation is, in words; ``behind`` says what a queued one waits for."""
    what = md(f"Evaluation {row.id} ({row.adapter}, {row.k} problems, {row.samples} samples each)")
    if row.status == actions.RunStatus.QUEUED:
        return verdict("wait", "Queued:", f"{what}: {md(behind or 'its turn has come, starting')}")
    if row.status == actions.RunStatus.RUNNING:
        share = row.done / row.total if row.total else 0.0
        return verdict("wait", "Running:", f"{what}: {row.done}/{row.total} answers generated ({share:.0%})")
    if row.status == actions.RunStatus.COMPLETED:
        origin = (row.results or {}).get("heldout")
        if origin:  # evaluations stored before issue 24 don't say where their problems came from
            return verdict("ok", "Finished:", f"{what}, on {md(actions.heldout_origin(origin))}")
        return verdict("ok", "Finished:", what)
    return verdict("bad", "Failed:", f"{what}: {row.status} — {md(row.error or 'no reason recorded')}")


def result_view(results: dict) -> tuple[list[list], object]:
    """The results as table rows (metric, base, tuned) and a grouped bar chart."""
    base, tuned = results["base"], results["tuned"]
    rows = [[label, _pct(base[key]), _pct(tuned[key])] for label, key in LABELS if base[key] is not None]
    rows.append(["mean length (tokens)", round(base["mean_length"], 1), round(tuned["mean_length"], 1)])
    rows += [[f"reward {name}", _num(base["rewards"][name]), _num(tuned["rewards"][name])] for name in base["rewards"]]
    shown = [(label, base[key], tuned[key]) for label, key in LABELS if base[key] is not None]
    return rows, heldout_figure(shown, results["problems"])


def stop(run_id) -> str:
    """Stop the run's queued or running evaluation job."""
    if run_id is not None and actions.stop_evaluation(int(run_id)):
        return "Stop requested."
    return "No evaluation of this run is queued or running."


def _pct(value) -> str:
    return "" if value is None else f"{value:.1%}"


def _num(value) -> float | str:
    return "" if value is None else round(value, 3)


def build(run: gr.Dropdown, adapter: gr.Dropdown) -> gr.Timer:
    """Lay out the panel under the Compare page's run and checkpoint pickers, and wire it; returns its poll timer,
    which the server runs only while the Compare page is shown."""
    with gr.Accordion("Held-out evaluation", open=False):
        gr.Markdown(
            "Scores base and tuned on K problems the run never trained on, as a background job: you can leave this "
            "page or restart the dashboard; the result is stored with the run."
        )
        with gr.Row():
            k = gr.Number(
                value=200, precision=0, label="Problems (K)", minimum=EVAL_K[0], maximum=EVAL_K[1], elem_id="eval-k"
            )
            samples = gr.Number(
                value=4,
                precision=0,
                label="Samples per problem for pass@1 (0: greedy only)",
                minimum=EVAL_SAMPLES[0],
                maximum=EVAL_SAMPLES[1],
            )
            start_button = gr.Button("Evaluate base vs tuned", elem_id="eval-go")
            stop_button = gr.Button("Stop evaluation", variant="secondary")
        status = gr.Markdown(elem_id="eval-status")
        table = gr.Dataframe(headers=["metric", "base", "tuned"], interactive=False, elem_id="eval-table")
        plot = gr.Plot()
    shown = gr.State(None)
    timer = gr.Timer(POLL_SECONDS, active=False)
    start_button.click(start, [run, adapter, k, samples], status).then(show, [run, shown], [status, table, plot, shown])
    stop_button.click(stop, run, status)
    timer.tick(show, [run, shown], [status, table, plot, shown], show_progress="hidden")
    run.change(show, [run, shown], [status, table, plot, shown])
    return timer
