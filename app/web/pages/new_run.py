"""New run: a form generated from RunConfig, presets, data set upload with a prompt preview, YAML import/export,
validation that lists every problem, and launch (the run is queued; the scheduler starts it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import gradio as gr

from app import actions
from app.actions import Access
from app.markup import code, fenced, md
from app.web.pages.data_files import upload_dataset
from app.web.widgets.errors import show, user_error
from app.web.widgets.form import (
    GROUP_TITLES,
    FieldSpec,
    config_from_form,
    default_config,
    form_mapping,
    grouped_fields,
    named,
    problems_by_field,
    to_widget_value,
)
from app.web.widgets.reported import Reported
from app.web.widgets.sweep_form import EXAMPLE, SHAPES, found_lines, probing_text, sweep_block
from app.web.widgets.verdict import problem as problem_text
from app.web.widgets.verdict import verdict

START_HERE = {
    "demo": (
        "**Start here:** the form holds the tiny offline demo (a built-in model learning arithmetic; no download, "
        "about a minute on a laptop's CPU). Press **Launch** to train it and watch it under Monitor, or pick a preset, "
        "or change any setting below first."
    ),
    "recipe": (
        "**Start here:** the form holds the reference recipe (Llama-3.2-3B-Instruct learning GSM8K on this machine's "
        "GPU). Press **Launch** to train it and watch it under Monitor, or pick a preset, or change any setting below "
        "first."
    ),
}
# brings the answer under the buttons into view (the form is taller than a screen; a phone scrolls far)
SHOW_STATUS = show("new-run-status")

SPECS: list[FieldSpec] = [spec for _, fields in grouped_fields() for spec in fields]
NAMES = [s.name for s in SPECS]


# --- callbacks ------------------------------------------------------------------------------------------------------
# The callbacks that read the form take its values by setting name ({"beta": 0.04, ...}: FormValues); those that fill
# it return one value per widget, in NAMES order (a list, as Gradio's outputs are).
FormValues = Mapping[str, Any]


def form_values(config: actions.RunConfig) -> dict[str, Any]:
    """The form's widget values by setting name, from a config (what the form shows for it)."""
    return {spec.name: to_widget_value(spec, getattr(config, spec.name)) for spec in SPECS}


def config_values(config: actions.RunConfig) -> list[Any]:
    """Widget values for every form field, in NAMES order, from a config: what fills the form with it."""
    return list(form_values(config).values())


def matching_preset(values: FormValues) -> str | None:
    """The preset the form's values are, field for field, or None once anything differs: the preset box says what
    the form holds (it starts filled with the demo), never a preset the user has since edited away from. The run's
    name is the user's, whatever the preset."""
    for name, config in actions.presets().items():
        if all(values.get(key) == value for key, value in form_values(config).items() if key != "name"):
            return name
    return None


def apply_preset(name: str | None) -> list[Any]:
    """Fill the form with a preset; nothing chosen (None) leaves the form as it is."""
    if not name:
        return [gr.update() for _ in NAMES]
    return config_values(actions.presets()[name])


def validate(access: Access, values: FormValues) -> tuple[actions.RunConfig | None, list[str]]:
    """The config the form describes and every problem with it, under the operator's rules (app.actions.validate)."""
    checked = actions.validate(form_mapping(values), access, warn=False)
    return checked.config, checked.problems


def problems_markdown(problems: list[str]) -> str:
    """The validation panel's text."""
    if not problems:
        return verdict("ok", "Valid:", "the config is valid.")
    return (
        verdict("bad", "Not valid:", f"**{len(problems)} problem{'s' if len(problems) > 1 else ''}:**")
        + "\n"
        + "\n".join(f"- {md(p)}" for p in problems)
    )


def check(access: Access, values: FormValues) -> str:
    """Validate without launching; a valid config also shows the reward-mix warnings."""
    return check_report(access, values)[0]


def check_report(access: Access, values: FormValues) -> tuple[str, list[str]]:
    """The validation panel's text and the problems behind it (for :func:`field_marks`)."""
    checked = actions.validate(form_mapping(values), access)
    text = problems_markdown(checked.problems)
    return text + "".join(f"\n\n{verdict('warn', 'Warning:', md(w))}" for w in checked.warnings), checked.problems


def launch(access: Access, values: FormValues) -> str:
    """Queue a run if the config is valid; otherwise list its problems and start nothing."""
    return launch_report(access, None, values)[0]


def launch_probed(access: Access, probed: dict | None, values: FormValues) -> str:
    """:func:`launch`, keeping the probe's samples as the run's step 0 (see :func:`launch_report`)."""
    return launch_report(access, probed, values)[0]


def launch_report(access: Access, probed: dict | None, values: FormValues) -> tuple[str, list[str], int | None]:
    """The launch message (or the problems that stopped it), those problems, and the id of the run launched (None
    when nothing was). The probe's samples become the run's step 0 when ``probed`` (what :func:`probe` returned) is
    of this very config, whatever its name."""
    try:
        launched = actions.launch(form_mapping(values), access, probed=probed)
    except actions.ActionError as exc:
        return problems_markdown(exc.problems), exc.problems, None
    kept = " The probe's samples are its step 0." if launched.kept_probe else ""
    return (
        verdict(
            "go",
            "Launched:",
            f"Run {launched.run_id} (**{md(launched.name)}**) queued: it starts as soon as a training slot is free, "
            f"and the Monitor shows it.{kept}",
        ),
        [],
        launched.run_id,
    )


@dataclass(frozen=True)
class SweepAsked:
    """The Sweep section's values besides the form's settings: the settings to vary (one a line, app.web.widgets.sweep_form), how
    points are chosen, and what is optimised."""

    settings: str | None
    method: str | None = "grid"
    members: float | None = 8
    seed: float | None = 0
    objective: str | None = "heldout/correct"
    direction: str | None = "max"


def launch_sweep(
    access: Access, values: FormValues, asked: SweepAsked, on_probe: Callable[[actions.ProbeNews], None] | None = None
) -> tuple[str, list[str], int | None]:
    """Create a sweep of the form's config over the Sweep section's settings (app.actions.sweep: the definition, the
    base config and every member are checked, and each point probed, before anything is created): the message, the
    problems that stopped it, and the sweep's id (None when nothing was created). ``on_probe`` hears how far the
    probes are, and the message ends with what each probe found."""
    block, unread = sweep_block(
        asked.settings, asked.method, asked.members, asked.seed, asked.objective, asked.direction
    )
    if unread:
        return problems_markdown(unread), unread, None
    try:
        news: list[actions.ProbeNews] = []

        def heard(latest: actions.ProbeNews) -> None:
            news.append(latest)
            if on_probe is not None:
                on_probe(latest)

        swept = actions.sweep({**form_mapping(values), "sweep": block}, access, on_probe=heard)
    except actions.ActionError as exc:
        found = exc.problems or [exc.message]
        return problems_markdown(found), found, None
    skipped = sum(1 for m in swept.members if m.skipped)
    held = f", {skipped} skipped by the probe (their points would learn nothing)" if skipped else ""
    return (
        verdict(
            "go",
            "Launched:",
            f"sweep {swept.sweep_id} (**{md(swept.name)}**): {len(swept.members)} members{held}. They queue like any "
            "run; the Sweeps tab follows them.",
        )
        + "".join("\n" + line for line in (found_lines(news[-1]) if news else [])),
        [],
        swept.sweep_id,
    )


def field_help(spec: FieldSpec, allow_custom: bool) -> str:
    """A field's help under its label; the rewards' offers the custom ``file.py:function`` form only where the
    operator allowed custom reward code."""
    if spec.kind == "rewards" and not allow_custom:
        return "Reward functions by name (see the rewards list)."
    return spec.help


def field_marks(problems: list[str], allow_custom: bool = False) -> list[Any]:
    """One widget update per form field: a field with a problem shows it in red under its label, every other
    field its usual help (so fixing one problem clears its mark at the next check)."""
    found = problems_by_field(problems, NAMES)
    return [
        gr.update(info="Problem: " + "; ".join(found[s.name]), elem_classes=["field-invalid"])  # the word, red (styles)
        if s.name in found
        else gr.update(info=field_help(s, allow_custom), elem_classes=[])
        for s in SPECS
    ]


def draft_values(draft: dict | None) -> list[Any]:
    """The form's widget values from the draft kept in the browser (unknown or missing fields left as they are)."""
    draft = draft or {}
    return [draft[name] if name in draft else gr.update() for name in NAMES]


def save_draft(values: FormValues) -> dict:
    """The form's widget values by setting name as the draft the browser keeps (restored on reload and after a
    server restart)."""
    return dict(values)


def probe(access: Access, values: FormValues) -> tuple[str, dict | None]:
    """Run the pre-launch probe of the form's config as a child process (torch stays out of this one): its report,
    and what :func:`launch_probed` needs to keep its samples."""
    try:
        # a probe waits in line behind the dashboard's others: the page says so in a toast while it waits
        probed = actions.probe(form_mapping(values), access, on_queued=lambda said: gr.Info(f"Probe {said}"))
    except actions.ActionError as exc:
        return (
            problems_markdown(exc.problems) if exc.exit_code == 2 else problem_text(exc.message)
        ), None  # 2: the config
    return probed.report.to_text(md), probed.kept


def export_yaml(access: Access, values: FormValues) -> tuple[str | None, str]:
    """Write the form's config to a YAML file for download (only when it can be read at all). The file name is a
    slug of the run name in a fresh directory under the data dir: the raw name never becomes a path."""
    config, problems = validate(access, values)
    if config is None:
        return None, problems_markdown(problems)
    path = actions.new_export_dir() / f"{actions.slug(config.name)}.yaml"
    config.save(path)
    return str(path), problems_markdown(problems)


def import_yaml(file: str | None) -> list[Any]:
    """Fill the form from an uploaded YAML/JSON config; unknown keys are listed, bad values raise gr.Error."""
    if not file:
        raise user_error("choose a .yaml or .json config file")
    try:  # parsed in a child process with limits: a hostile file costs that process, not the dashboard
        config, notes = actions.config_of(Path(file))
    except actions.ActionError as exc:  # a file that can't be read names itself, not the server's copy of it
        raise user_error("; ".join(exc.problems).replace(str(file), Path(file).name)) from None
    message = "Imported." + ("" if not notes else " " + md("; ".join(notes)))
    return config_values(config) + [message]


def preview(access: Access, values: FormValues) -> str:
    """The first three prompts exactly as the model will see them (chat template applied when the tokenizer is
    available locally), with their reference answers. Reads only the head of a data file; a path the dashboard
    may not read is refused before anything opens it."""
    config, problems = config_from_form(values, check_rewards=False, check_files=False)  # opens no file
    if config is None:
        return problems_markdown(problems)
    try:
        prompts, templated = actions.prompt_preview(config, access)
    except actions.ActionError as exc:  # 2: a path it may not read; else the data set or the template can't be read
        return problems_markdown(exc.problems) if exc.exit_code == 2 else problem_text(exc.message)
    blocks = [f"{fenced(text)}\nreference answer: {code(answer)}" for text, answer in prompts]
    note = (
        ""
        if templated
        else "_(no local tokenizer: showing the chat messages; the model's template applies at training)_\n\n"
    )
    return note + "\n\n".join(blocks)


# --- layout ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Form:
    """The form's widgets, for pages that fill it (the Runs page's Clone): one per field in :data:`NAMES` order
    (what :func:`config_values` returns values for), the status line under the form, and the draft the browser keeps."""

    fields: list[gr.components.Component]
    status: gr.Markdown
    draft: gr.BrowserState
    launched: gr.State  # the id of the run this browser launched last (app/web/server.py opens its Monitor)
    swept: gr.State  # the id of the sweep this browser launched last (app/web/server.py opens the Sweeps tab on it)


def _widget(spec: FieldSpec, allow_custom: bool):
    common = {
        "label": spec.label,
        "info": spec.help,
        "value": to_widget_value(spec, spec.default),
        "elem_id": f"field-{spec.name}",
    }
    if spec.kind == "bool":
        return gr.Checkbox(**common)
    if spec.kind == "choice":
        return gr.Dropdown(choices=list(spec.choices), **common)
    if spec.kind == "int":
        # no minimum/maximum on the widget: Gradio would refuse one bad value at a time in a toast naming no field;
        # RunConfig's checks report every out-of-range value at once, beside its field (field_marks)
        return gr.Number(precision=0, **common)
    if spec.kind == "float":
        return gr.Number(**common)
    if spec.kind == "rewards":
        # a typed name is always kept (an unknown one is reported as a problem beside the field, never dropped); the
        # custom form is offered only where the operator allowed custom reward code
        common["info"] = field_help(spec, allow_custom)
        return gr.Dropdown(choices=sorted(actions.REWARDS), multiselect=True, allow_custom_value=True, **common)
    if spec.kind == "multiline":
        return gr.Textbox(lines=4, **common)
    return gr.Textbox(**common)


def _sweep_section() -> tuple[list[gr.components.Component], gr.Button, gr.Markdown]:
    """The closed Sweep section under the settings: its widgets in :class:`SweepAsked`'s order, its button, and the
    line its answer goes to."""
    with gr.Accordion("Sweep: one run per point of some settings", open=False, elem_id="sweep-section"):
        gr.Markdown(
            "The settings above are the base every member starts from. Name the settings to vary, one a line: "
            f"{md(SHAPES)}. The members are ranked by the objective (read at each member's last evaluation for "
            "heldout/...), and the sweep stops the ones that won't pay early (docs/sweeps.md). Settings a sweep can "
            "vary: " + ", ".join(f"`{name}`" for name in actions.sweepable()) + "."
        )
        text = gr.Textbox(
            label="Settings to vary (setting = values or range)",
            placeholder=EXAMPLE,
            lines=3,
            elem_id="sweep-settings",
        )
        with gr.Row(equal_height=False):
            method = gr.Radio(
                ["grid", "random", "tpe"],
                value="grid",
                label="Method",
                info="grid: every combination; random or tpe (model-based): the members below, drawn under the seed",
                elem_id="sweep-method",
            )
            members = gr.Number(8, precision=0, label="Members (random and tpe)", elem_id="sweep-members")
            seed = gr.Number(0, precision=0, label="Seed (random and tpe)", elem_id="sweep-seed")
        with gr.Row(equal_height=False):
            objective = gr.Dropdown(
                ["heldout/correct", "heldout/format", "reward", "kl"],
                value="heldout/correct",
                allow_custom_value=True,
                label="Objective (any logged metric)",
                info="heldout/... needs eval_steps above 0",
                elem_id="sweep-objective",
            )
            direction = gr.Radio(["max", "min"], value="max", label="Better is", elem_id="sweep-direction")
        button = gr.Button("Launch sweep", variant="primary", elem_id="launch-sweep")
        status = gr.Markdown(elem_id="sweep-status")
    return [text, method, members, seed, objective, direction], button, status


def build(access: Access) -> Form:
    """Lay out the New run page inside the current gr.Blocks; returns its form widgets."""
    allow = gr.State(access)
    allow_custom = access.allow_custom_rewards
    # The draft of the form lives in the browser's localStorage, so a reload or a server restart keeps unsaved edits.
    # A fixed secret, because the random default changes with every server start and would make old drafts
    # unreadable; the draft holds only what the user typed into this form (no tokens), so the secret guards nothing.
    draft = gr.BrowserState({}, storage_key="grpo-studio-form-draft", secret="grpo-studio-form-draft")
    starting = default_config()  # what the form starts with (a GPU question: asked once)
    starts_as = matching_preset(form_values(starting))
    preset = gr.Dropdown(
        choices=list(actions.presets()),
        value=starts_as,
        label="Preset (choosing one fills the form)",
        elem_id="preset",
    )
    gr.Markdown(START_HERE["demo" if starts_as and "Tiny" in starts_as else "recipe"], elem_id="start-here")
    # the actions first, above the settings (a laptop's first screen; the form below is taller than three of them)
    with gr.Row():
        check_button = gr.Button("Validate", elem_id="validate")
        probe_button = gr.Button("Probe", elem_id="probe")
        launch_button = gr.Button("Launch", variant="primary", elem_id="launch")
        export_button = gr.Button("Export YAML")
        imported = gr.UploadButton("Import a YAML/JSON config", file_types=[".yaml", ".yml", ".json"])
    # the answer right under the buttons (every problem, and a mark beside each field it names), scrolled into view
    status = gr.Markdown(elem_id="new-run-status")
    gr.Markdown(
        "<small>**Probe** samples a few groups from the base model with these settings and scores them with these "
        "rewards, before any training: it says whether the run can learn (groups whose answers all score alike teach "
        "GRPO nothing), how many answers hit the length limit, and how long a step will take. Launch right after, "
        "and its samples are the run's step 0.</small>"
    )
    exported = gr.File(label="Exported config", interactive=False, visible=False)
    widgets = []
    sections = grouped_fields(starting)
    for group, fields in sections:
        # the cluster settings only matter on a cluster: closed, like the advanced ones
        with gr.Accordion(GROUP_TITLES[group], open=group not in ("advanced", "cluster")):
            if group == "data":
                data_file = gr.UploadButton(
                    "Upload a data set (.jsonl, .csv, .parquet)",
                    file_types=[".jsonl", ".json", ".csv", ".parquet"],
                    size="sm",
                )
            with gr.Row(equal_height=False):
                for spec in fields:
                    with gr.Column(min_width=260):
                        widgets.append(_widget(spec, allow_custom))
            if group == "data":
                preview_button = gr.Button("Preview the first three prompts", size="sm")
                preview_box = gr.Markdown()
    sweep_inputs, sweep_button, sweep_status = _sweep_section()
    launched, swept = gr.State(None), gr.State(None)
    form = Form(widgets, status, draft, launched, swept)

    def marked(report):
        text, problems = report[:2]
        return [*field_marks(problems, allow_custom), text]

    def exported_file(access_rules, values):
        path, text = export_yaml(access_rules, values)
        return gr.update(value=path, visible=path is not None), text

    # The events that read the form take it as a set of inputs: Gradio then calls their function with one dict keyed
    # by component (see app.web.widgets.form.named), so each reads the operator's rules, the probe's result and every setting by
    # what it is, not by where it stands in a list of 60-odd values.
    widget_of = dict(zip(NAMES, widgets))
    form_inputs = {allow, *widgets}

    def settings(values: Mapping[Any, Any]) -> dict[str, Any]:
        """The form's values by setting name, from the dict an event on ``form_inputs`` receives."""
        return named(values, widget_of)

    dataset_widget = widget_of["dataset_name"]
    # on a change of preset, not on "input": Gradio's single-select dropdown also dispatches "input" on every blur
    # (gradio/templates/frontend/assets/Index-DAYzeNnX.js, its blur handler ends in on_blur(), on_input()), so
    # leaving the box without choosing sent its empty value to a list of choices without it, a
    # gradio.exceptions.Error traceback in the server's log (issue 29)
    # the events that fill or mark the whole form show their progress on their answer, not on its every field (the
    # page would otherwise keep, and rewrite at every later event, a loading status for each: app.web.server
    # untracked_when_hidden)
    # the box is also set by the form itself (below: it marks the preset the form still is), and such a mark from ""
    # to a name is a change too: refilled then from a stale answer, the form lost an edit made since (CI's journey
    # launched max_steps 100 though its box said 40, at load 6). The form as the event saw it decides: already that
    # preset, nothing is refilled
    preset.change(
        lambda v: (
            [gr.update() for _ in widgets] if matching_preset(settings(v)) == v[preset] else apply_preset(v[preset])
        ),
        {preset, *widgets},
        widgets,
        show_progress_on=status,
    )
    check_button.click(
        lambda v: marked(check_report(v[allow], settings(v))), form_inputs, [*widgets, status], show_progress_on=status
    ).then(None, js=SHOW_STATUS)
    probed = gr.State(None)
    probe_button.click(lambda v: probe(v[allow], settings(v)), form_inputs, [status, probed]).then(None, js=SHOW_STATUS)

    def launched_marked(values):
        report = launch_report(values[allow], values[probed], settings(values))
        return [*marked(report), report[2]]

    launch_button.click(
        launched_marked, {probed, *form_inputs}, [*widgets, status, launched], show_progress_on=status
    ).then(None, js=SHOW_STATUS)

    def swept_marked(values):
        """A generator: the section says which point is probed and what each probe found while they run (minutes
        on a real model), then the launch's answer."""
        asked = SweepAsked(*(values[widget] for widget in sweep_inputs))
        job = Reported(partial(launch_sweep, values[allow], settings(values), asked), "launch-sweep")
        for news in job:
            yield [*(gr.update() for _ in widgets), probing_text(news), gr.update()]
        text, problems, sweep_id = job.result()
        yield [*field_marks(problems, allow_custom), text, sweep_id]

    sweep_button.click(
        swept_marked,
        {*sweep_inputs, *form_inputs},
        [*widgets, sweep_status, swept],
        show_progress="minimal",  # the probes' news stays readable under a small timer, not a spinner over it
        show_progress_on=sweep_status,
    ).then(None, js=show("sweep-status"))
    export_button.click(lambda v: exported_file(v[allow], settings(v)), form_inputs, [exported, status])
    imported.upload(import_yaml, imported, [*widgets, status], show_progress_on=status)
    data_file.upload(upload_dataset, data_file, [dataset_widget, preview_box])
    preview_button.click(lambda v: preview(v[allow], settings(v)), form_inputs, preview_box)
    # every change, typed or filled in (a preset, an import, a clone), updates the draft; a burst saves once
    # and the preset box says whether the form still is a preset (setting it to the same name refills nothing)
    gr.on(
        [widget.change for widget in widgets],
        lambda v: (save_draft(settings(v)), matching_preset(settings(v))),
        set(widgets),
        [draft, preset],
        trigger_mode="always_last",
        show_progress="hidden",
    )
    return form
