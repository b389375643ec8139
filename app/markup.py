"""Text that a user, a data file or a model wrote, made safe to join into the dashboard's markup.

Gradio's Markdown renders raw HTML, and its sanitizer keeps links, images and ``style`` attributes: a run named
``<a href=//elsewhere style=position:fixed;inset:0>Session expired</a>`` covered the Monitor with a link to another
host, and an ``<img src=//elsewhere/b>`` made every viewer's browser call that host on every refresh. Plotly's text
(legends, axis labels, hover) takes a subset of HTML too (``<a href>``, ``<span style>``), and a gr.Error's message
is shown as HTML. So every value grpo-studio did not write itself (run names, prompts, completions, references,
errors, log lines, metric keys, reward names, file names) goes through one of these functions at the point where it
is joined into markup, and nowhere else is such a value formatted. Our own sentences around it keep their Markdown.

- :func:`md` for running Markdown text: the HTML characters become entities and every mark that could start a
  Markdown construct is backslash-escaped, so nothing in the value starts emphasis, a link or an image, an autolink
  (``www.x.org``, ``a@b.org``, ``https://``), a heading, a list, a table, a code span or math (``$$``).
- :func:`code` for an inline code-looking value, :func:`fenced` for a block: a fence longer than any run of
  backticks in the value, so a completion holding three backticks can't end its fence.
- :func:`html_text` for gr.HTML, Plotly text and a gr.Error's message.
"""

from __future__ import annotations

import html
import re

_BACKTICKS = re.compile(r"`+")
# The characters that start a construct wherever they stand: HTML's as entities, Markdown's backslash-escaped
# (CommonMark allows a backslash before any ASCII punctuation). "[" covers links and images, "@" e-mail autolinks.
_ALWAYS = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    **{c: "\\" + c for c in "\\`*[]#|~$@"},
}
_CONSTRUCTS = re.compile(
    r"[&<>\\`*\[\]#|~$@]"
    r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"  # emphasis by "_" needs a word boundary: per_device_batch_size is text
    r"|:(?=//)|(?<=[wW][wW][wW])\."  # GFM's autolinks: "https://", "www."
    r"|^[ \t]*[-+=]|^[ \t]*\d+[.)]",  # at a line's start: a list item, a setext heading's underline
    re.MULTILINE,
)


def _escaped(match: re.Match) -> str:
    found = match.group()
    if found in _ALWAYS:
        return _ALWAYS[found]
    return found[:-1] + "\\" + found[-1]


def md(value: object) -> str:
    """``value`` as literal text inside Markdown (also inside an HTML element that Markdown surrounds): it reads
    exactly as written and builds no element. Only what could start a construct is escaped, so a sentence's own
    punctuation ("e.g.", "--allow-path", "per_device_train_batch_size") stays as it is in the Markdown source too.
    Line breaks are kept, as Markdown's soft breaks."""
    return _CONSTRUCTS.sub(_escaped, str(value))


def code(value: object) -> str:
    """``value`` as inline code. Not a backtick code span (a value can hold backticks): a <code> element around
    :func:`md`'s text, which Gradio's sanitizer keeps and no value can close."""
    return f"<code>{md(value)}</code>"


def fenced(value: object, info: str = "") -> str:
    """``value`` as a fenced code block: its fence is one backtick longer than the longest run of backticks inside
    (at least three), which CommonMark requires of the closing fence, so the value can't end the block early."""
    text = str(value)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def html_text(value: object, quote: bool = True) -> str:
    """``value`` as text inside HTML (gr.HTML, Plotly's legends, labels and hover text, a gr.Error's message);
    ``quote=False`` leaves quotes alone where the text is no attribute's value (a sentence's "can't" stays as
    written for an API client, which receives a gr.Error's message as it is)."""
    return html.escape(str(value), quote=quote)
