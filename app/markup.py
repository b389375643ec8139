"""Text that a user, a data file or a model wrote, made safe to join into the dashboard's markup.

Gradio's Markdown renders raw HTML, and its sanitizer keeps links, images and ``style`` attributes: a run named
``<a href=//elsewhere style=position:fixed;inset:0>Session expired</a>`` covered the Monitor with a link to another
host, and an ``<img src=//elsewhere/b>`` made every viewer's browser call that host on every refresh. Plotly's text
(legends, axis labels, hover) takes a subset of HTML too (``<a href>``, ``<span style>``), and a gr.Error's message
is shown as HTML. So every value grpo-studio did not write itself (run names, prompts, completions, references,
errors, log lines, metric keys, reward names, file names) goes through one of these functions at the point where it
is joined into markup, and nowhere else is such a value formatted. Our own sentences around it keep their Markdown.

- :func:`md` for running Markdown text: the HTML characters become entities and every other ASCII punctuation mark is
  backslash-escaped (CommonMark allows it for all of them), so nothing in the value starts emphasis, a link, an
  autolink (``www.x.org``, ``a@b.org``, ``https://``), a heading, a list, a table, a code span or math (``$$``).
- :func:`code` for an inline code-looking value, :func:`fenced` for a block: a fence longer than any run of
  backticks in the value, so a completion holding three backticks can't end its fence.
- :func:`html_text` for gr.HTML, Plotly text and a gr.Error's message.
"""

from __future__ import annotations

import html
import re
import string

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
# every ASCII punctuation mark: the HTML ones as entities, the others backslash-escaped
_MARKDOWN = str.maketrans({c: _ENTITIES.get(c, "\\" + c) for c in string.punctuation})
_BACKTICKS = re.compile(r"`+")


def md(value: object) -> str:
    """``value`` as literal text inside Markdown (also inside an HTML tag that Markdown surrounds): it reads exactly
    as written and builds no element. Line breaks are kept, as Markdown's soft breaks."""
    return str(value).translate(_MARKDOWN)


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
