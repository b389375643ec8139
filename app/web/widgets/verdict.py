"""Verdicts as the dashboard writes them: a word and a colour that carry the meaning, an emoji that only decorates.

A machine without an emoji font draws ❌ ✅ ⏳ as empty boxes, so "❌ no run with id 7" read as "□ no run with id 7".
Every verdict therefore starts with a word ("Problem", "Valid", "Queued"...) in a colour of its kind, and the emoji
beside it is marked as decoration (Gradio's Markdown sanitiser keeps its class but drops its aria-hidden). The colours are the theme's where Gradio has them (app/web/widgets/styles.py).
"""

from __future__ import annotations

from html import escape

from app.markup import md

# kind -> the emoji that decorates it (the CSS class verdict-<kind> gives the colour)
EMOJI = {"bad": "❌", "ok": "✅", "wait": "⏳", "warn": "⚠️", "go": "🚀", "info": "ℹ️"}


def verdict(kind: str, word: str, text: str = "") -> str:
    """``text`` (Markdown) after a coloured verdict word, e.g. ``verdict("bad", "Problem", "no run with id 7")``.
    ``kind`` is one of :data:`EMOJI`; the word must say it all on its own."""
    badge = f'<span class="verdict verdict-{kind}"><span class="verdict-emoji" aria-hidden="true">{EMOJI[kind]}</span> {escape(word)}</span>'
    return f"{badge} {text}" if text else badge


def problem(text: str) -> str:
    """A failed action or a refused input: "Problem" in red. ``text`` is a plain sentence (it often quotes what the
    user typed), shown as written (app.markup.md)."""
    return verdict("bad", "Problem:", md(text))
