"""User-written text in the dashboard's markup (issue 35 item 1): a run name, a prompt, a completion, an error or a
metric key reads as written and builds no element, in Markdown, in a code fence, in Plotly's legends and in an error
toast. Rendered here with markdown-it (CommonMark with raw HTML on, as Gradio's Markdown has it); the browser test
(tests/browser/test_browser_markup.py) checks the same payloads in Chromium with Gradio's own renderer."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from markdown_it import MarkdownIt

from app.markup import code, fenced, html_text, md

RENDER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render

PAYLOADS = [
    "<a href=//elsewhere.invalid/p style=position:fixed;inset:0;z-index:999>Session expired: log in again</a>",
    "<img src=//elsewhere.invalid/b>",
    "![x](//elsewhere.invalid/md.png) and [a link](//elsewhere.invalid/l) and <https://elsewhere.invalid/auto>",
    "**bold** _em_ `code` ~~gone~~ # heading",
    "# a heading\n\n- a list\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted",
    "&lt;script&gt; &amp; &#60;img&#62;",
    "back\\slash \\<b>x\\</b>",
    "1. first\n2) second\n+ plus\n===\n    indented <i>x</i>",
    "__init__ _em_ per_device_train_batch_size www.elsewhere.invalid WWW.x.invalid a@elsewhere.invalid https://e.invalid",
]


def test_a_sentence_keeps_its_own_punctuation_in_the_source():
    """Only what could start a construct is escaped: a refusal's "e.g.", "--allow-path" and a setting's name are
    found in the Markdown as written."""
    sentence = "beta -1 is negative (e.g. 0.04); per_device_train_batch_size needs --allow-custom-rewards: can't"
    assert md(sentence) == sentence


def _tags(rendered: str) -> set[str]:
    return set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", rendered))


@pytest.mark.parametrize("payload", PAYLOADS)
def test_text_reads_as_written_and_builds_no_element(payload):
    rendered = RENDER(md(payload))
    assert _tags(rendered) <= {"p"}, rendered
    # what the reader sees is the payload itself (line breaks aside)
    from html import unescape

    shown = unescape(re.sub(r"</?p>", "", rendered)).replace("\n", " ").split()
    assert shown == payload.replace("\n", " ").split()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_inline_code_holds_any_value(payload):
    rendered = RENDER(f"reference answer: {code(payload + ' ` `` x')}")
    assert _tags(rendered) == {"p", "code"}, rendered
    assert rendered.count("<code>") == 1


def test_a_completion_holding_backticks_stays_inside_its_fence():
    completion = "```\n</code></pre><img src=//elsewhere.invalid/x>\n````\nstill code"
    rendered = RENDER(f"**Completion**\n{fenced(completion)}\nreference answer: 4")
    assert rendered.count("<pre>") == 1 and "<img" not in rendered
    from html import unescape

    inside = unescape(rendered.split("<code>", 1)[1].split("</code>", 1)[0])
    assert inside == completion + "\n"
    assert rendered.rstrip().endswith("<p>reference answer: 4</p>")


def test_html_text_escapes_tags_and_quotes():
    assert html_text('<a href="x">') == "&lt;a href=&quot;x&quot;&gt;"
    assert html_text("can't", quote=False) == "can't"


def test_the_monitor_header_shows_a_run_name_as_text():
    from app.actions.monitor_state import progress_text

    name = PAYLOADS[0]
    run = SimpleNamespace(name=name, id=6, status="completed", current_step=2, total_steps=2, started_at=None)
    rendered = RENDER(progress_text(run, now=datetime.now(UTC)))
    assert _tags(rendered) <= {"p", "strong"}, rendered
    from html import unescape

    assert unescape(rendered).startswith(f"<p><strong>{name}</strong> (run 6)")


def test_the_completion_detail_keeps_each_field_in_its_place():
    from app.web.pages.monitor import completion_detail

    row = [3, 1, "best", PAYLOADS[1], "```\n" + PAYLOADS[0] + "\n```", "`4` <b>4</b>", "x=1", 1.0, 0.5]
    rendered = RENDER(completion_detail(SimpleNamespace(row_value=row)))
    assert rendered.count("<pre>") == 2 and "<img" not in rendered and "<a " not in rendered and "<b>" not in rendered
    assert rendered.count("<code>") == 3  # two blocks and the reference answer


def test_chart_legends_show_run_names_and_metric_keys_as_text():
    import numpy as np

    from app.web.widgets.charts import CHARTS, build_figure

    series = {"reward": np.array([[1, 0.5, 0.0], [2, 0.7, 1.0]])}
    figure = build_figure(CHARTS[0], {"6: <a href=//elsewhere.invalid>x</a>": series, "7: b": series})
    names = [trace.name for trace in figure.data]
    assert names and all("<" not in n for n in names), names
    assert any("&lt;a href=//elsewhere.invalid&gt;x&lt;/a&gt;" in n for n in names)


def test_an_error_toast_shows_its_message_as_text_and_the_page_as_written():
    from app.web.widgets.errors import said, user_error
    from app.web.widgets.verdict import problem

    error = user_error("no run named <img src=//elsewhere.invalid/t> here")
    assert error.message == "no run named &lt;img src=//elsewhere.invalid/t&gt; here"
    assert said(error) == "no run named <img src=//elsewhere.invalid/t> here"
    assert "<img" not in RENDER(problem(said(error)))


def test_the_probe_report_quotes_the_values_it_did_not_write():
    from app.markup import md as quote
    from trainer.probe.report import ProbeReport, RewardStats, Risk

    report = ProbeReport(
        model="<img src=//elsewhere.invalid/m>",
        prompts=2,
        group_size=2,
        rewards=[RewardStats("<b>r</b>", 1.0, None, 0.0, error="<a href=//elsewhere.invalid>boom</a>")],
        zero_std_share=0.0,
        signal_share=1.0,
        step_signal_share=1.0,
        mean_length=3.0,
        max_completion_length=8,
        truncated_share=0.0,
        seconds_per_group=0.1,
        seconds_per_step=1.0,
        seconds_per_run=2.0,
        device="cpu",
        peak_memory_gb=None,
        training_memory_gb=None,
        risks=[Risk("reward <b>r</b> raised", "fix <i>it</i>")],
    )
    rendered = RENDER(report.to_text(quote))
    assert "<img" not in rendered and "<a " not in rendered and "<b>" not in rendered
    assert "&lt;img src=//elsewhere.invalid/m&gt;" in rendered
