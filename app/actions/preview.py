"""The New run form's look at its data set before anything trains: the first prompts exactly as the model will see
them, through the model's own chat template when its files are local (rendered sandboxed, never by transformers)."""

from __future__ import annotations

import json
from pathlib import Path

from app.actions.base import ActionError, problems_message
from trainer.config import RunConfig
from trainer.config.access import Access
from trainer.config.names import BUILTIN_MODEL
from trainer.loading.chat_template import MAX_TEMPLATE_CHARS


def prompt_preview(config: RunConfig, access: Access, count: int = 3) -> tuple[list[tuple[str, str]], bool]:
    """The first ``count`` prompts of the config's data set as the model will see them, each with its reference
    answer, and whether the model's chat template rendered them (else they are the chat messages, one a line). A
    model or data-set path the operator's ``access`` rules keep from being read is refused before anything opens it
    (ActionError with exit code 2, one problem a field); otherwise reads only the head of a data file, and an
    ActionError with exit code 1 says why the data or the template can't be read."""
    from trainer.loading.chat_template import TemplateRenderError, render_chat_template
    from trainer.loading.data import DataError, load_problems, make_prompt

    if refused := access.path_problems(config.to_dict()):
        raise ActionError(problems_message(refused), refused)
    try:
        rows = load_problems(config, limit=count)[:count]
    except (DataError, OSError, ValueError) as exc:
        raise ActionError(str(exc), exit_code=1) from None
    except Exception as exc:  # the hub unreachable, etc.
        said = f"could not load {config.dataset_name}: {type(exc).__name__}: {str(exc)[:300]}"
        raise ActionError(said, exit_code=1) from None
    from trainer.loading.backend import existing_model_path

    # a GGUF model's template is in its dequantized folder, once made (a preview never converts one)
    model = config.model_name_or_path
    template = local_chat_template(model if model.startswith("builtin:") else existing_model_path(config) or model)
    shown = []
    for problem in rows:
        messages = make_prompt(problem.question, config.system_prompt, config.few_shot_examples)
        if template:
            try:
                text = render_chat_template(template, messages)
            except TemplateRenderError as exc:
                raise ActionError(str(exc), exit_code=1) from None
        else:
            text = "\n".join(f"[{m['role']}] {m['content']}" for m in messages)
        shown.append((text, problem.answer))
    return shown, bool(template)


def local_chat_template(model: str) -> str | None:
    """The model's chat template source, read from its files without loading transformers (it is rendered only by
    trainer.loading.chat_template, sandboxed)."""
    if model == BUILTIN_MODEL:
        from trainer.loading.tiny import CHAT_TEMPLATE

        return CHAT_TEMPLATE
    path = Path(model).expanduser()
    try:
        if (path / "chat_template.jinja").is_file():
            return (path / "chat_template.jinja").read_text()[: MAX_TEMPLATE_CHARS + 1]
        config_file = path / "tokenizer_config.json"
        if config_file.is_file() and config_file.stat().st_size < 20_000_000:
            source = json.loads(config_file.read_text()).get("chat_template")
            return source if isinstance(source, str) else None
    except (OSError, ValueError, AttributeError):
        return None
    return None
