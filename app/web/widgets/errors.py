"""User errors in the dashboard: a refusal the user can act on ("pick a run first"), shown in the page and logged
as one line on the server, not as a traceback (Gradio prints one for every gr.Error unless told otherwise)."""

from __future__ import annotations

import logging

import gradio as gr

from app.markup import html_text

log = logging.getLogger("grpo_studio.ui")


def acted(action, *args, **kwargs):
    """An action's result (app.actions), its refusal raised as the user error the page or the API client shows."""
    from app.actions import ActionError  # the action layer imports nothing of Gradio: this module is its adapter

    try:
        return action(*args, **kwargs)
    except ActionError as exc:
        raise user_error(exc.message) from None


def user_error(message: str) -> gr.Error:
    """The gr.Error to raise for ``message``; the server's log gets one line saying what the user was told.

    The browser shows a gr.Error's message as HTML, and a message can quote a run name or a path, so it is escaped
    (app.markup); ``plain`` keeps the sentence as written for a page that shows it in Markdown (:func:`said`)."""
    log.info("user error: %s", message)
    error = gr.Error(html_text(message, quote=False), print_exception=False)
    error.plain = message
    return error


def said(error: gr.Error) -> str:
    """The sentence a gr.Error from :func:`user_error` carries, unescaped (to be escaped where it is shown)."""
    return getattr(error, "plain", error.message)


def show(elem_id: str) -> str:
    """Browser code (an event's ``js``) bringing the answer ``elem_id`` into view where the user pressed: the New run
    form is taller than a screen, and on a phone a row of buttons is a tall stack above its answer."""
    return f"() => {{ document.querySelector('#{elem_id}')?.scrollIntoView({{block: 'nearest'}}); return []; }}"
