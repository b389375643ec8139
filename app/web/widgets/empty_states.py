"""What the dashboard says where it has nothing to show yet: what to do next, instead of an empty table or a row of
empty chart boxes."""

from __future__ import annotations

from typing import Any

NO_RUNS = (
    "**No runs yet.** Launch one on the **New run** tab: the *Tiny offline demo* preset trains a built-in model on "
    "this machine's CPU in about a minute."
)
NO_RUNS_MONITOR = NO_RUNS + " Its charts, sampled completions and log then appear here."
PICK_A_RUN = "**Pick a run** in the *Run* box above to see its charts, its sampled completions and its log."


def runs_table_note(rows: Any, query: str | None) -> str:
    """The line above the Runs table: empty while it lists runs; else why it is empty and what to do (``rows``: the
    table's value, a pandas DataFrame or a list of rows; ``query``: the search box)."""
    count = len(rows) if rows is not None else 0
    if count and not _blank(rows):
        return ""
    if query and query.strip():
        return f"No run matches *{query.strip()}*: clear the search box to list every run."
    return NO_RUNS


def _blank(rows: Any) -> bool:
    """Gradio hands an empty Dataframe over as one row of empty cells."""
    values = rows.values.tolist() if hasattr(rows, "values") else rows
    return all(all(cell in ("", None) for cell in row) for row in values)
