"""The dashboard's own CSS beyond Gradio's theme (app/web/server.py passes it to ``launch(css=...)``): verdict colours,
tables that scroll sideways on a phone instead of squeezing their columns, and the Monitor's chart boxes (a loading
state until a chart's data arrives; no box at all where there is nothing to chart).

Some selectors lean on Gradio 6's markup (the table inside a Dataframe, the tab buttons); a Gradio upgrade that
renames them loses the looks, not the data.
"""

from __future__ import annotations

VERDICT_COLOURS = {
    "bad": "#b91c1c",
    "ok": "#15803d",
    "wait": "#a16207",
    "warn": "#b45309",
    "go": "#1d4ed8",
    "info": "#475569",
}
DARK_COLOURS = {
    "bad": "#f87171",
    "ok": "#4ade80",
    "wait": "#facc15",
    "warn": "#fb923c",
    "go": "#93c5fd",
    "info": "#cbd5e1",
}

# the classes of a Monitor chart's box (app/web/pages/monitor.py): shown, or none to show (app/web/monitor_charts.js)
CHART_SHOWN, CHART_NONE = ("monitor-chart", "monitor-chart-none")

# Gradio's light theme below WCAG AA's 4.5:1 for text (axe-core's color-contrast, issue 59): white on the primary
# orange (#f97316, 2.8:1: Launch, Sample both, Open in Monitor) and on the stop red (#ef4444, 3.8:1: Delete, Stop
# sweep), the accent orange of the selected tab's label (2.8:1), and the grey of every field's help text, a slider's
# min and max and the footer (1.9:1). The darker shades are Tailwind's 700s of the same hues; the dark theme
# (Gradio's ``.dark``) already uses them and is left alone.
LIGHT_CONTRAST = """
:root:not(.dark) {
    --button-primary-background-fill: #c2410c; --button-primary-background-fill-hover: #9a3412;
    --button-primary-border-color: #c2410c; --button-primary-border-color-hover: #9a3412;
    --button-cancel-background-fill: #b91c1c; --button-cancel-background-fill-hover: #991b1b;
    --color-accent: #c2410c;
    --body-text-color-subdued: #52525b; --block-info-text-color: #52525b;
}
"""

# A verdict's mark (app/web/widgets/verdict.py) drawn by CSS on the verdict's colour, its emoji kept in the page but not drawn: a
# Chromium without an emoji font drew "✅ Valid:" and "❌ Not valid:" as an empty box before the word (issue 59). The
# ok mark is a tick and the bad one a cross, made of borders; the others carry an ASCII sign that every text font has.
MARK_SIGNS = {"wait": "...", "warn": "!", "go": ">", "info": "i"}
MARKS = """
.verdict-emoji { display: inline-block; position: relative; font-size: 0; width: 1.1rem; height: 1.1rem;
    border-radius: 50%; vertical-align: middle; margin-right: 0.15rem; }
.verdict-emoji::before, .verdict-emoji::after { position: absolute; font-size: 0.75rem; font-weight: 700;
    line-height: 1.1rem; left: 0; right: 0; text-align: center; color: var(--background-fill-primary, #fff);
    border-color: var(--background-fill-primary, #fff); }
.verdict-ok .verdict-emoji::after { content: ""; left: 0.38rem; right: auto; top: 0.2rem; width: 0.3rem; height: 0.55rem;
    border-style: solid; border-width: 0 2px 2px 0; transform: rotate(45deg); }
.verdict-bad .verdict-emoji::before, .verdict-bad .verdict-emoji::after { content: ""; left: 0.25rem; right: auto;
    top: 0.5rem; width: 0.6rem; height: 2px; background: var(--background-fill-primary, #fff); transform: rotate(45deg); }
.verdict-bad .verdict-emoji::after { transform: rotate(-45deg); }
"""
MARKS += "".join(
    f'.verdict-{kind} .verdict-emoji::after {{ content: "{sign}"; }}\n' for kind, sign in MARK_SIGNS.items()
)
# the fill named, not inherited: Gradio's Markdown gives a nested span the body's text colour
MARKS += "".join(
    f".verdict-{kind} .verdict-emoji {{ background: {colour}; }}\n" for kind, colour in VERDICT_COLOURS.items()
)
MARKS += "".join(
    f".dark .verdict-{kind} .verdict-emoji {{ background: {colour}; }}\n" for kind, colour in DARK_COLOURS.items()
)

CSS = (
    LIGHT_CONTRAST
    + MARKS
    + "".join(f".verdict-{kind} {{ color: {colour}; font-weight: 600; }}\n" for kind, colour in VERDICT_COLOURS.items())
    + "".join(f".dark .verdict-{kind} {{ color: {colour}; }}\n" for kind, colour in DARK_COLOURS.items())
    + f"""
/* the Monitor's chart boxes (app/web/pages/monitor.py chart_grid): side by side as the width allows, four on the first
   row of a laptop, two a row under "More charts", one a row on a phone */
.chart-grid {{ display: grid; gap: 12px; width: 100%;
    grid-template-columns: repeat(auto-fit, minmax(250px, 1fr)); }}
#monitor-more .chart-grid {{ grid-template-columns: repeat(auto-fit, minmax(max(250px, calc(50% - 12px)), 1fr)); }}
.chart-box {{ min-width: 0; }}
/* the full width of the page's column, as a gr.Plot had it (gr.HTML pads its content by the block's padding) */
.html-container:has(.chart-grid) {{ padding-left: 0 !important; padding-right: 0 !important; }}
.{CHART_SHOWN} {{ position: relative; }}
/* a chart says it is loading until Plotly has drawn it: before its data arrives and while the page fetches and
   evaluates the Plotly bundle (app/web/monitor_charts.js) */
.{CHART_SHOWN}:not(:has(.js-plotly-plot))::before {{
    content: "Loading chart…"; position: absolute; top: 45%; left: 0; right: 0; text-align: center; z-index: 1;
    color: var(--body-text-color-subdued);
}}
.{CHART_SHOWN}:not(:has(.js-plotly-plot)) {{ min-height: 300px; }}
/* no run picked, or a queued run with nothing logged, or a chart with nothing to say for this run (the tool chart
   of a run without tools): no chart box at all, caption and all */
.chart-box:has(> .{CHART_NONE}) {{ display: none !important; }}
/* tables keep readable columns and scroll sideways inside their box on a narrow screen (the pinned first columns
   stay); without this a phone squeezed every column until "status" wrapped one letter per line */
#runs-table th, #runs-table td, #completions-table th, #completions-table td,
#compare-base th, #compare-base td, #compare-tuned th, #compare-tuned td,
#sweeps-table th, #sweeps-table td {{ word-break: normal; overflow-wrap: normal; }}
/* a completion read in full wraps its long lines (a chain of arithmetic ran 1,000 px wide) instead of scrolling
   sideways in a block the keyboard can't reach (axe-core's scrollable-region-focusable, issue 59) */
#completion-detail pre, #completion-detail pre code {{ white-space: pre-wrap; overflow-wrap: anywhere; }}
/* a Compare answer keeps its lines: a tool run's turns (a call, the tool's answer, the final answer) a line each,
   and a plain answer's reasoning and answer tags as the model wrote them (else all ran together on one line) */
#compare-base .cell-wrap .text, #compare-tuned .cell-wrap .text {{ white-space: pre-wrap; }}
/* the five tabs in one row on a phone (390 px): at Gradio's padding the last two went into its overflow menu, where a
   deep link's tab (?tab=sweeps) has no tab button to open */
@media (max-width: 480px) {{
    .tab-container button, button[role=tab] {{ padding-left: 8px !important; padding-right: 8px !important; }}
}}
/* the first column (a run's id, a completion's step) stays in view while the table scrolls sideways: Gradio 6's
   pinned_columns marks it (.first-column) but its virtual table body leaves it static */
#runs-table .first-column, #completions-table .first-column, #sweeps-table .first-column {{
    position: sticky !important; left: 0; z-index: 3; background: var(--table-even-background-fill, var(--background-fill-primary));
}}
"""
)
