"""New run: a form generated from RunConfig, presets, data set upload with a prompt preview, YAML import/export,
validation that lists every problem, and launch (the run is queued; the scheduler starts it)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import gradio as gr

from app.form import (
    GROUP_TITLES,
    FieldSpec,
    config_from_form,
    default_config,
    grouped_fields,
    presets,
    to_widget_value,
)
from storage import queries
from storage.db import data_dir, get_sessionmaker
from trainer.config import BUILTIN_MODEL, ConfigError, RunConfig
from trainer.rewards import REWARDS

SPECS: list[FieldSpec] = [spec for _, fields in grouped_fields() for spec in fields]
NAMES = [s.name for s in SPECS]


# --- callbacks ------------------------------------------------------------------------------------------------------
def config_values(config: RunConfig) -> list[Any]:
    """Widget values for every form field, from a config."""
    return [to_widget_value(spec, getattr(config, spec.name)) for spec in SPECS]


def apply_preset(name: str) -> list[Any]:
    """Fill the form with a preset."""
    return config_values(presets()[name])


def validate(allow_custom: bool, *values: Any) -> tuple[RunConfig | None, list[str]]:
    """The config the form describes and every problem with it (custom rewards refused without the server flag)."""
    config, problems = config_from_form(NAMES, list(values))
    if config is not None and not allow_custom:
        custom = [r for r in config.reward_funcs if r not in REWARDS]
        if custom:
            problems = [p for p in problems if not any(c in p for c in custom)]
            problems.append(
                f"custom reward {', '.join(custom)}: custom reward code runs arbitrary Python, so the dashboard "
                "only accepts it when started with --allow-custom-rewards"
            )
    return config, problems


def problems_markdown(problems: list[str]) -> str:
    """The validation panel's text."""
    if not problems:
        return "✅ Config is valid."
    return f"❌ **{len(problems)} problem{'s' if len(problems) > 1 else ''}:**\n" + "\n".join(
        f"- {p}" for p in problems
    )


def check(allow_custom: bool, *values: Any) -> str:
    """Validate without launching; a valid config also shows the reward-mix warnings."""
    config, problems = validate(allow_custom, *values)
    text = problems_markdown(problems)
    if config is not None and not problems:
        text += "".join(f"\n\n⚠️ {w}" for w in config.warnings())
    return text


def launch(allow_custom: bool, *values: Any) -> str:
    """Queue a run if the config is valid; otherwise list its problems and start nothing."""
    config, problems = validate(allow_custom, *values)
    if problems or config is None:
        return problems_markdown(problems)
    with get_sessionmaker().begin() as session:
        run = queries.create_run(session, config.name, config.to_dict(), total_steps=config.max_steps)
        run_id = run.id
    return f"🚀 Run {run_id} (**{config.name}**) queued: it starts as soon as a training slot is free. Follow it under Monitor."


def export_yaml(allow_custom: bool, *values: Any) -> tuple[str | None, str]:
    """Write the form's config to a YAML file for download (only when it can be read at all)."""
    config, problems = config_from_form(NAMES, list(values))
    if config is None:
        return None, problems_markdown(problems)
    path = Path(tempfile.mkdtemp(prefix="grpo-studio-")) / f"{config.name or 'run'}.yaml"
    config.save(path)
    return str(path), problems_markdown(problems)


def import_yaml(file: str | None) -> list[Any]:
    """Fill the form from an uploaded YAML/JSON config; unknown keys are listed, bad values raise gr.Error."""
    if not file:
        raise gr.Error("choose a .yaml or .json config file")
    try:
        config, notes = RunConfig.load(file)
    except ConfigError as exc:
        raise gr.Error("; ".join(exc.problems)) from exc
    except Exception as exc:
        raise gr.Error(f"could not read {Path(file).name}: {exc}") from exc
    message = "Imported." + ("" if not notes else " " + "; ".join(notes))
    return config_values(config) + [message]


def upload_dataset(file: str | None) -> tuple[str, str]:
    """Keep an uploaded data file under the data dir and point dataset_name at it."""
    if not file:
        raise gr.Error("choose a .jsonl, .csv or .parquet file")
    source = Path(file)
    if source.suffix.lower() not in (".jsonl", ".json", ".csv", ".parquet"):
        raise gr.Error(f"{source.name}: expected a .jsonl, .csv or .parquet file")
    target_dir = data_dir() / "uploads"
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / source.name
    shutil.copyfile(source, target)
    return str(target), f"Uploaded to {target}. Set the question/answer columns, then preview."


def preview(*values: Any) -> str:
    """The first three prompts exactly as the model will see them (chat template applied when the tokenizer is
    available locally), with their reference answers."""
    config, problems = config_from_form(NAMES, list(values))
    if config is None:
        return problems_markdown(problems)
    from trainer.data import DataError, load_problems, make_prompt

    try:
        rows = load_problems(config)[:3]
    except (DataError, OSError, ValueError) as exc:
        return f"❌ {exc}"
    except Exception as exc:  # the hub unreachable, etc.
        return f"❌ could not load {config.dataset_name}: {type(exc).__name__}: {exc}"
    template = _local_chat_template(config.model_name_or_path)
    blocks = []
    for problem in rows:
        messages = make_prompt(problem.question, config.system_prompt)
        text = (
            template.render(messages=messages, add_generation_prompt=True)
            if template
            else "\n".join(f"[{m['role']}] {m['content']}" for m in messages)
        )
        blocks.append(f"```\n{text}\n```\nreference answer: `{problem.answer}`")
    note = (
        ""
        if template
        else "_(no local tokenizer: showing the chat messages; the model's template applies at training)_\n\n"
    )
    return note + "\n\n".join(blocks)


def _local_chat_template(model: str):
    """The model's chat template as a jinja2 template, read from its files without loading transformers."""
    import jinja2

    if model == BUILTIN_MODEL:
        from trainer.tiny import CHAT_TEMPLATE

        source = CHAT_TEMPLATE
    else:
        path = Path(model).expanduser()
        source = None
        if (path / "chat_template.jinja").is_file():
            source = (path / "chat_template.jinja").read_text()
        elif (path / "tokenizer_config.json").is_file():
            source = json.loads((path / "tokenizer_config.json").read_text()).get("chat_template")
        if not isinstance(source, str):
            return None
    return jinja2.Environment(trim_blocks=False, lstrip_blocks=False).from_string(source)


# --- layout ---------------------------------------------------------------------------------------------------------
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
        return gr.Number(precision=0, minimum=spec.minimum, maximum=spec.maximum, **common)
    if spec.kind == "float":
        return gr.Number(minimum=spec.minimum, maximum=spec.maximum, **common)
    if spec.kind == "rewards":
        return gr.Dropdown(choices=sorted(REWARDS), multiselect=True, allow_custom_value=allow_custom, **common)
    if spec.kind == "multiline":
        return gr.Textbox(lines=4, **common)
    return gr.Textbox(**common)


def build(allow_custom: bool) -> None:
    """Lay out the New run page inside the current gr.Blocks."""
    allow = gr.State(allow_custom)
    with gr.Row():
        preset = gr.Dropdown(choices=list(presets()), label="Preset", elem_id="preset", scale=3)
        load_preset = gr.Button("Load preset", elem_id="load-preset", scale=1)
    widgets = []
    sections = grouped_fields(default_config())
    for group, fields in sections:
        with gr.Accordion(GROUP_TITLES[group], open=group != "advanced"):
            if group == "data":
                with gr.Row():
                    data_file = gr.File(
                        label="Upload a data set (.jsonl, .csv, .parquet)",
                        file_types=[".jsonl", ".json", ".csv", ".parquet"],
                    )
            with gr.Row(equal_height=False):
                for spec in fields:
                    with gr.Column(min_width=260):
                        widgets.append(_widget(spec, allow_custom))
            if group == "data":
                preview_button = gr.Button("Preview the first three prompts")
                preview_box = gr.Markdown()
    with gr.Row():
        check_button = gr.Button("Validate", elem_id="validate")
        launch_button = gr.Button("Launch", variant="primary", elem_id="launch")
        export_button = gr.Button("Export YAML")
    status = gr.Markdown(elem_id="new-run-status")
    with gr.Row():
        exported = gr.File(label="Exported config", interactive=False)
        imported = gr.File(label="Import a YAML/JSON config", file_types=[".yaml", ".yml", ".json"])

    dataset_widget = widgets[NAMES.index("dataset_name")]
    load_preset.click(apply_preset, preset, widgets)
    check_button.click(check, [allow, *widgets], status)
    launch_button.click(launch, [allow, *widgets], status)
    export_button.click(export_yaml, [allow, *widgets], [exported, status])
    imported.upload(import_yaml, imported, [*widgets, status])
    data_file.upload(upload_dataset, data_file, [dataset_widget, preview_box])
    preview_button.click(preview, widgets, preview_box)
