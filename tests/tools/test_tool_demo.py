"""The calculator demo's preset (trainer/presets/tiny-calculator.yaml) trains with the calculator on builtin:tiny-tools:
a worker run of two of its steps completes, and the stored metrics show the model calling the tool (TRL's
``tools/call_frequency``, calls per sampled completion, trl 1.16.0 trainer/grpo_trainer.py:2312-2320). The whole demo
and its figures are bench/tool_demo.py's (docs/benchmarks.md)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.helpers import create_run
from trainer.presets import PRESET_DIR, load_preset


@pytest.mark.slow
def test_the_calculator_preset_trains_and_the_model_calls_the_tool():
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.job.worker import run_worker

    preset = load_preset(PRESET_DIR / "tiny-calculator.yaml")
    assert preset.model_name_or_path == "builtin:tiny-tools" and preset.tools == ["builtin:calculator"]
    # two steps of the preset's own batch (64 completions: about six calls a step at the warm-up's one in ten),
    # without its held-out curve, which is bench/tool_demo.py's to measure
    config = dataclasses.replace(preset, name="calculator-demo", max_steps=2, eval_steps=0, save_steps=100)
    run_id = create_run(config)
    assert run_worker(run_id).value == "completed"
    with get_sessionmaker().begin() as s:
        calls = queries.metric_series(s, run_id, "tools/call_frequency")
        failures = queries.metric_series(s, run_id, "tools/failure_frequency")
    assert [p.step for p in calls] == [1, 2]
    assert sum(p.value for p in calls) > 0  # some sampled answers called the calculator
    assert all(p.value < 1 for p in calls)  # and rarely, as the warm-up left it (one call in ten)
    assert all(p.value == 0 for p in failures)  # every call parsed into a calculator call that ran


def test_the_calculator_presets_comment_claims_what_docs_tools_says_it_teaches():
    """Issue 57.7: the demo teaches the model *to* call the calculator, not *when* (every problem of
    builtin:arithmetic3 needs it, docs/tools.md § Not yet); its comment said "when to call". The examples/ copy is the
    same file byte for byte (tests/web/test_dashboard_logic.py)."""
    from pathlib import Path

    header = [line for line in (PRESET_DIR / "tiny-calculator.yaml").read_text().splitlines() if line.startswith("#")]
    said = " ".join(line.lstrip("# ") for line in header)
    assert "to call a calculator, not when" in said and "when to call" not in said
    tools_doc = (Path(__file__).resolve().parents[2] / "docs" / "tools.md").read_text()
    assert "teaching the model *to* call, not *when*" in tools_doc
