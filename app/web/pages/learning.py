"""The Monitor's learning panel (issue 31): what the model is learning, prompt by prompt; the reward-hacking watch,
each alert opening the completions of the steps it covers and naming the checkpoint to Compare; and the tokens
behind an advantage, one sampled completion coloured by each token's probability under the policy.

The map reads every stored sample of the run, so it is drawn when a run is picked, on its Refresh button, and when
the run has sampled a new step or evaluated again since it was drawn (its own timer checks two index reads, every
``FOLLOW_SECONDS``): it follows a live run as the charts do, and costs nothing on a finished one. Following leaves the
token view and an opened alert as the user set them. Everything comes from the action layer (app.actions.learning:
the same report ``grpo-studio prompts`` prints; app.actions.monitoring: the token values and samples behind it); the
figures from app.web.widgets.charts_learning, drawn in the page like the Monitor's charts (app/web/widgets/chart_boxes.py:
a payload of their own, on the same Plotly bundle).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from app import actions
from app.markup import code, md
from app.web.widgets import chart_boxes
from app.web.widgets.chart_payload import Drawn, payload
from app.web.widgets.charts_learning import learning_heatmap, signal_figure, token_html
from app.web.widgets.completions import turns_text
from app.web.widgets.verdict import verdict

ALERT_ROWS = 40  # completions an alert opens: the best-scored of its steps, what the reward paid for
# how often the panel looks for new samples: a redraw reads every sample of the run, so not at the charts' 2 s
FOLLOW_SECONDS = 5.0


@dataclass
class LearningView:
    """What the panel shows after a refresh; :func:`build` maps it onto the widgets."""

    summary: str = ""
    heatmap: Any = None
    signal: Any = None
    watch: str = ""
    alerts: dict = field(default_factory=lambda: gr.update(choices=[], value=None))
    token_step: Any = field(default_factory=gr.update)


def _run_id(value) -> int | None:
    return None if value in (None, "") else int(value)


def learning_view(run_id) -> LearningView:
    """The map, the signal chart, the watch and the alert picker of a run; the token view's step set to the latest
    step with token values."""
    run_id = _run_id(run_id)
    if run_id is None:
        return LearningView("Pick a run.")
    try:
        report = actions.learning(run_id)
    except actions.ActionError as exc:
        return LearningView(md(exc.message))
    lm = report.map
    if not lm.lines:
        return LearningView("No sampled completions yet: the map starts with the first step.")
    counts, held = lm.counts(), lm.counts("held-out")
    summary = "**Training prompts:** " + ", ".join(f"{n} {c}" for c, n in counts.items())
    if sum(held.values()):
        summary += " · **held-out problems:** " + ", ".join(f"{n} {c}" for c, n in held.items())
    frontier = lm.frontier
    summary += f"\n\n**Frontier** (learning now, the latest group disagreed): {len(frontier)} prompts"
    if frontier:
        summary += " — " + "; ".join(code(" ".join(ln.prompt.split())[:60]) for ln in frontier[:8])
    watch, choices = [], []
    for alert in report.alerts:
        checkpoint = report.checkpoint_for(alert)
        compare = (
            f" Compare: the nearest checkpoint is **step {checkpoint}** (Compare tab, adapter `step {checkpoint}`)."
            if checkpoint is not None
            else ""
        )
        hint = alert.hint[:1].upper() + alert.hint[1:]
        where = f"{alert.steps}, {alert.state}"
        watch.append(
            verdict("warn", "Watch:", f"**{md(alert.name)}** ({md(where)}): {md(alert.message)}. {md(hint)}{compare}")
        )
        choices.append((f"{alert.name}, {alert.steps}", f"{alert.first_step}:{alert.last_step}"))
    token_step = actions.latest_token_step(run_id)
    return LearningView(
        summary,
        learning_heatmap(lm),
        signal_figure(lm),
        "\n\n".join(watch) or "Reward-hacking watch: nothing to report.",
        gr.update(choices=choices, value=None),
        token_step if token_step is not None else gr.update(),
    )


def drawn_mark(run_id) -> tuple | None:
    """What a drawing of the panel reflects: the run, its newest sampled step and its newest evaluation."""
    run_id = _run_id(run_id)
    if run_id is None:
        return None
    return (run_id, *actions.newest_steps(run_id))


def alert_completions(run_id, span) -> list[list[Any]]:
    """The best-scored completions of the steps an alert covers (``span`` is "first:last")."""
    run_id = _run_id(run_id)
    if run_id is None or not span:
        return []
    first, last = (int(s) for s in str(span).split(":"))
    samples = actions.samples_between(run_id, first, last)
    samples.sort(key=lambda s: s.total_reward if s.total_reward is not None else float("-inf"), reverse=True)
    return [
        [s.step, s.group_index, s.prompt, _shown(s), _round(s.total_reward), _round(s.advantage)]
        for s in samples[:ALERT_ROWS]
    ]


def _shown(sample) -> str:
    """A sample's completion as the Monitor's table shows it: a tool run's turn by turn (app.web.widgets.completions)."""
    return turns_text(sample.turns) if sample.turns is not None else sample.completion


def token_choices(run_id, step) -> dict:
    """The completions of ``step`` that have token values, labelled with their group and advantage."""
    run_id = _run_id(run_id)
    if run_id is None or step in (None, ""):
        return gr.update(choices=[], value=None)
    choices = []
    for i, group, adv in actions.token_completions(run_id, int(step)):
        label = f"#{i} group {group}, advantage {'n/a' if adv is None else f'{adv:+.3f}'}"
        choices.append((label, i))
    return gr.update(choices=choices, value=choices[0][1] if choices else None)


def token_view(run_id, step, index) -> str:
    """The coloured tokens of one completion, or why there are none."""
    run_id = _run_id(run_id)
    if run_id is None or step in (None, "") or index in (None, ""):
        return "<small>Pick a step and a completion.</small>"
    read = actions.token_values(run_id, int(step), int(index))
    off = read.off
    off_step = re.match(r"at step (\d+)", off or "")
    if read.values is None and off_step and int(step) >= int(off_step.group(1)):  # it failed: say when and why
        return f"<small>No token values: the token capture turned itself off {html.escape(off)}.</small>"
    if read.values is None:
        return (
            f"<small>No token values were kept for completion #{int(index)} of step {int(step)}: the run keeps them "
            f"for {read.kept} completions of this step (token_samples_per_step, the best and worst answer of each "
            "group first). Pick one of those under Completion, or click its row.</small>"
        )
    return token_html(read.values, read.advantage)


def _same_text(shown: Any, stored: str) -> bool:
    """A table cell's text is the stored completion (the table may hand it back HTML-escaped, or trimmed)."""
    return isinstance(shown, str) and html.unescape(shown).strip() == stored.strip()


def from_table(run_id, evt: gr.SelectData) -> tuple[Any, Any, str]:
    """A click on a row of the Monitor's completions table (step, group, mark, prompt, completion, …): that
    completion in the token view, checked against its step's samples by group and text (a sorted table's row number
    is not its position)."""
    row = evt.row_value or []
    if len(row) < 5 or _run_id(run_id) is None:
        return gr.update(), gr.update(), token_view(run_id, None, None)
    step = int(row[0])
    samples = actions.step_samples(int(run_id), step)

    def same(i: int) -> bool:
        return (
            0 <= i < len(samples)
            and samples[i].group_index == int(row[1])
            and _same_text(row[4], samples[i].completion)
        )

    # the row number when that row is this sample (an unsorted table), else the first sample of its group that reads
    # the same (a sure model's identical answers are alike down to their tokens' values)
    clicked = int(evt.index[0]) if evt.index else -1
    index = clicked if same(clicked) else next((i for i in range(len(samples)) if same(i)), None)
    choices = token_choices(run_id, step)
    known = [value for _, value in choices.get("choices", [])]
    return (
        step,
        gr.update(choices=choices.get("choices", []), value=index if index in known else None),
        token_view(run_id, step, index),
    )


def _round(value: float | None) -> float | str:
    return "" if value is None else round(value, 3)


# --- layout ---------------------------------------------------------------------------------------------------------
def build(run: gr.Dropdown, completions: gr.Dataframe | None = None) -> gr.Timer:
    """Lay out the panel under the Monitor's completions; ``run`` is the Monitor's run picker, ``completions`` its
    completions table (a click on a row shows that completion's tokens here). Returns the timer that follows a live
    run, which the server runs only while the Monitor is shown."""
    with gr.Accordion("What the model is learning", open=True, elem_id="learning-panel"):
        refresh = gr.Button("Refresh the learning map", size="sm", elem_id="learning-refresh")
        summary = gr.Markdown(elem_id="learning-summary")
        chart_boxes.grid(
            [
                chart_boxes.box(
                    "learning-map",
                    "Prompts × steps",
                    "Each row a prompt, each column a step that sampled it, coloured by the share of its group "
                    "solved; sorted learning, forgetting, learnt, seen once, never solved, mostly solved, always "
                    "solved. Held-out problems (greedy, at each evaluation) below the training prompts.",
                ),
                chart_boxes.box("learning-signal", "Groups that carried a learning signal"),
            ]
        )
        gr.Markdown("### Reward-hacking watch")
        watch = gr.Markdown(elem_id="learning-watch")
        alert = gr.Dropdown(choices=[], value=None, label="Open an alert's completions", elem_id="learning-alert")
        opened = gr.Dataframe(
            headers=["step", "group", "prompt", "completion", "total", "advantage"],
            interactive=False,
            wrap=True,
            max_height=400,
            elem_id="learning-alert-completions",
        )
        gr.Markdown("### The tokens behind an advantage")
        with gr.Row():
            token_step = gr.Number(label="Step", precision=0, elem_id="token-step")
            token_pick = gr.Dropdown(choices=[], value=None, label="Completion", elem_id="token-completion")
        tokens = gr.HTML(elem_id="token-view")

    charts = chart_boxes.carrier("learning")
    charted = gr.State(None)  # what the page holds of the map and the signal chart (chart_payload.Drawn)

    def figures(view: LearningView, held, held_charts: Drawn | None) -> dict:
        """The map and the signal chart of ``view``, as the payload the page does not hold yet (``held``: the
        carrier's value)."""
        held_charts = held_charts or Drawn()
        changes = {"learning-map": view.heatmap, "learning-signal": view.signal}
        sent = payload(changes, held_charts, chart_boxes.ack(held))
        return {charts: gr.update() if sent is None else sent, charted: held_charts}

    def show(run_id, held, held_charts) -> dict:
        view = learning_view(run_id)
        shown = figures(view, held, held_charts) | {
            summary: view.summary,
            watch: view.watch,
            alert: view.alerts,
            token_step: view.token_step,
            opened: [],
        }
        if isinstance(view.token_step, int):  # the token view follows the run here, not through token_step's change,
            # which does not fire when another run's latest step has the same number
            choices = token_choices(run_id, view.token_step)
            shown |= {token_pick: choices, tokens: token_view(run_id, view.token_step, choices.get("value"))}
        return shown

    drawn = gr.State(None)  # drawn_mark() of what the panel shows

    def show_marked(run_id, held, held_charts) -> dict:
        return show(run_id, held, held_charts) | {drawn: drawn_mark(run_id)}

    def follow(run_id, mark, picked_alert, shown_step, held, held_charts) -> dict:
        """A timer tick: redraw the map, the signal chart and the watch when the run sampled or evaluated since they
        were drawn; else nothing is sent. An opened alert and a token view the user filled stay as they are; an
        empty token view gets the first completion with token values."""
        now = drawn_mark(run_id)
        if now is None or now == mark:
            return {drawn: mark}  # nothing else is sent (Gradio takes an empty dict for one value)
        view = learning_view(run_id)
        choices = view.alerts.get("choices", []) if isinstance(view.alerts, dict) else []
        kept = picked_alert if picked_alert in [value for _, value in choices] else None
        shown = figures(view, held, held_charts) | {summary: view.summary, watch: view.watch}
        shown |= {alert: gr.update(choices=choices, value=kept), drawn: now}
        if shown_step in (None, "") and isinstance(view.token_step, int):
            first = token_choices(run_id, view.token_step)
            shown |= {token_step: view.token_step, token_pick: first}
            shown |= {tokens: token_view(run_id, view.token_step, first.get("value"))}
        return shown

    outputs = [summary, charts, charted, watch, alert, token_step, opened, token_pick, tokens, drawn]
    run.change(show_marked, [run, charts, charted], outputs, show_progress="hidden")
    refresh.click(show_marked, [run, charts, charted], outputs, show_progress="hidden")
    timer = gr.Timer(FOLLOW_SECONDS, active=False)
    follows = [run, drawn, alert, token_step, charts, charted]
    timer.tick(follow, follows, outputs, show_progress="hidden", trigger_mode="always_last")
    alert.change(alert_completions, [run, alert], opened, show_progress="hidden")
    # a step typed in: its completions, and the first drawn (a dropdown whose value stays the same fires no change)
    token_step.input(token_choices, [run, token_step], token_pick, show_progress="hidden").then(
        token_view, [run, token_step, token_pick], tokens, show_progress="hidden"
    )
    token_pick.input(token_view, [run, token_step, token_pick], tokens, show_progress="hidden")
    if completions is not None:
        completions.select(from_table, run, [token_step, token_pick, tokens], show_progress="hidden")
    return timer
