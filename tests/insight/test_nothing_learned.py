"""Nothing learned is said (issue 55, item 4): a run none of whose groups ever disagreed says, while it runs and when
it ends, that nothing can be learned, the same sentence in ``grpo-studio run``'s output, ``/run``'s answer and the
Monitor's alerts; the honest demo never says it.

Each test computes the fact itself from the stored sample rows (every group of every training step has reward std
0, and over how many steps) and compares what the product says with it. The rows go in through storage's own
writers, as the worker writes them (its per-step shares from trainer/job/callback.py's zero_std_shares); the slow
tests train real runs of the built-in model through the command line."""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from app import actions
from app.cli.output import ProgressPrinter, heldout_missing, summary
from storage import learning, queries
from storage.db import get_sessionmaker
from tests.conftest import ROOT
from tests.helpers import create_run, tiny_config
from trainer.insight.collapse import REPEATING_KEY, UNUSUAL_KEY
from trainer.insight.health import health_alerts
from trainer.insight.spread import LEAST_STEPS, PROBE_KEY, PROBE_WHERE, no_spread
from trainer.job.callback import zero_std_shares

HEAD = "no group had a reward spread in {} steps: nothing can be learned"
NO_PROBE = f"; the probe ({PROBE_WHERE}) tells this before training"  # a run launched without a probe


# --- rows and the fact read off them --------------------------------------------------------------------------------
def _store_step(run_id: int, step: int, groups: list[list[float]]) -> None:
    """One training step as the worker stores it: each answer's sample row (group by group), the step's reward and
    TRL's share of groups with zero std, and the worker's split of that share."""
    rows = [
        {
            "run_id": run_id,
            "step": step,
            "group_index": g,
            "prompt": f"problem {g}",
            "completion": f"answer {i}",
            "rewards": {"correctness": total},
            "total_reward": total,
            "advantage": 0.0,
            "reference_answer": None,
        }
        for g, totals in enumerate(groups)
        for i, total in enumerate(totals)
    ]
    flat = sum(1 for totals in groups if max(totals) == min(totals)) / len(groups)
    logs = {"reward": statistics.mean(t for totals in groups for t in totals), "frac_reward_zero_std": flat}
    with get_sessionmaker().begin() as s:
        queries.add_sample_rows(s, rows)
        queries.add_metric_rows(s, queries.metric_rows(run_id, step, logs | zero_std_shares(rows), float(step)))


def _rows_fact(run_id: int) -> tuple[bool, int]:
    """From the stored samples alone: whether every group of every training step had reward std 0, and how many
    training steps there were (step 0, a probe's samples, is not training)."""
    with get_sessionmaker().begin() as s:
        samples = learning.scored_samples(s, run_id)
    groups: dict[tuple[int, int], list[float]] = defaultdict(list)
    for sample in samples:
        if sample.step >= 1 and sample.total_reward is not None:
            groups[(sample.step, sample.group_index)].append(sample.total_reward)
    flat = all(statistics.pstdev(totals) == 0 for totals in groups.values())
    return flat and len(groups) > 0, len({step for step, _ in groups})


def _said(run_id: int) -> dict[str, str | None]:
    """What each entrance says of the run: ``/run``'s ``nothing_learned`` and the zero-std alert of ``/alerts``,
    which is the Monitor's banner (checked to show it)."""
    from app.web.pages.monitor import health_markdown
    from storage.series import series_since

    alerts = [a for a in actions.alerts(run_id) if a["name"] == "zero_std"]
    alert = alerts[0]["message"] if alerts else None
    with get_sessionmaker().begin() as s:
        banner = health_markdown(series_since(s, run_id), None)
    assert alert is None or alert in banner
    return {"api": actions.run_detail(run_id)["nothing_learned"], "alert": alert}


WRONG = [[0.0] * 4, [0.0] * 4]  # two groups of four answers, every one scoring 0: the newcomer's steps
DEMO = [[2.0] * 8] * 5 + [[0.0] * 8] + [[0.0, 2.0] * 4, [2.0, 2.5, 2.0, 2.0, 3.0, 2.0, 2.5, 2.0]]  # 6 of 8 alike


# --- the rule on synthetic rows -------------------------------------------------------------------------------------
def test_a_run_whose_groups_never_disagree_says_so_everywhere_and_once_while_it_runs():
    run_id = create_run(tiny_config(name="flat", reward_funcs=["correctness"], max_steps=10))
    out = io.StringIO()
    printer = ProgressPrinter(run_id, out)
    for step in range(1, LEAST_STEPS):
        _store_step(run_id, step, WRONG)
    printer.poll()
    assert "warning" not in out.getvalue() and _said(run_id) == {"api": None, "alert": None}  # too early to tell
    for step in range(LEAST_STEPS, LEAST_STEPS + 3):
        _store_step(run_id, step, WRONG)
        printer.poll()
    flat, steps = _rows_fact(run_id)
    assert flat and steps == LEAST_STEPS + 2
    sentence = HEAD.format(steps) + NO_PROBE
    assert _said(run_id) == {"api": sentence, "alert": sentence}
    # the per-step output warns once, the first time it holds (after step 3), and not again
    lines = out.getvalue().splitlines()
    warnings = [i for i, line in enumerate(lines) if line.startswith("warning: ")]
    assert [lines[i] for i in warnings] == [f"warning: {HEAD.format(LEAST_STEPS)}{NO_PROBE}"]
    assert lines[warnings[0] - 1].split()[:2] == ["step", f"{LEAST_STEPS}/10"]
    printer.finish("completed")
    tail = out.getvalue().splitlines()[len(lines) :]
    assert f"  warning: {sentence}" in tail
    (next_line,) = [line for line in tail if line.startswith("  next: ")]
    assert "grpo-studio eval" not in next_line  # an adapter that learned nothing is not worth a held-out evaluation
    assert "easier problems" in next_line and "larger group" in next_line and "grpo-studio probe" in next_line


def test_the_honest_demos_rows_never_say_it():
    """The demo's shape: most groups of a step solved alike, some disagreeing, a step now and then with every group
    alike; the groups that disagree carry the signal, so nothing says nothing can be learned."""
    run_id = create_run(tiny_config(name="demo-like", max_steps=10))
    out = io.StringIO()
    printer = ProgressPrinter(run_id, out)
    for step in range(1, 11):
        _store_step(run_id, step, [[2.0] * 8] * 8 if step == 4 else DEMO)
        printer.poll()
    flat, steps = _rows_fact(run_id)
    assert not flat and steps == 10
    assert _said(run_id)["api"] is None
    assert not any("nothing can be learned" in a["message"] for a in actions.alerts(run_id))
    printer.finish("completed")
    assert "nothing can be learned" not in out.getvalue() and "warning" not in out.getvalue()


def test_one_group_that_disagreed_once_is_a_signal():
    run_id = create_run(tiny_config(name="one-spread"))
    for step in range(1, 6):
        _store_step(run_id, step, [[0.0] * 4, [0.0, 0.0, 0.0, 2.0]] if step == 5 else WRONG)
    assert _rows_fact(run_id) == (False, 5)
    assert _said(run_id)["api"] is None


def _probed_launch(zero_std_share: float) -> int:
    """A run launched as the dashboard launches a probed config: the probe's samples its step 0 (two groups of
    four: all alike, or one disagreeing) and its share of groups alike."""
    from trainer.config.access import Access
    from trainer.probe.report import ProbeReport

    config = tiny_config(name="probed", reward_funcs=["correctness"])
    totals = [[0.0] * 4, [0.0] * 4 if zero_std_share == 1.0 else [0.0, 2.0, 0.0, 0.0]]
    samples = [
        {"group_index": g, "prompt": f"p{g}", "completion": "c", "rewards": {"correctness": t}, "total_reward": t}
        for g, group in enumerate(totals)
        for t in group
    ]
    report = ProbeReport(
        model="builtin:tiny",
        prompts=2,
        group_size=4,
        rewards=[],
        zero_std_share=zero_std_share,
        signal_share=1 - zero_std_share,
        step_signal_share=1 - zero_std_share,
        mean_length=3.0,
        max_completion_length=8,
        truncated_share=0.0,
        seconds_per_group=0.1,
        seconds_per_step=1.0,
        seconds_per_run=2.0,
        device="cpu",
        peak_memory_gb=None,
        training_memory_gb=None,
        risks=[],
        samples=samples,
    )
    probed = {"config": config.to_dict(), "report": report.to_dict()}
    launched = actions.launch(config, Access(), probed=probed)
    assert launched.kept_probe
    return launched.run_id


def test_a_probed_run_says_whether_the_probe_agreed():
    agreeing = _probed_launch(1.0)
    with get_sessionmaker().begin() as s:
        assert [(p.step, p.value) for p in queries.metric_series(s, agreeing, PROBE_KEY)] == [(0, 1.0)]
    for step in range(1, 4):
        _store_step(agreeing, step, WRONG)
    assert _rows_fact(agreeing) == (True, 3)  # step 0, the probe's samples, is not a training step
    assert _said(agreeing)["api"] == _said(agreeing)["alert"] == HEAD.format(3) + "; the probe said so too"

    disagreeing = _probed_launch(0.5)
    for step in range(1, 4):
        _store_step(disagreeing, step, WRONG)
    assert _said(disagreeing)["api"] == (
        HEAD.format(3) + ", though the probe found a spread in 50% of its groups before training"
    )


def test_every_group_solved_at_every_step_is_no_longer_a_normal_note():
    """A run whose every group was solved from the first step learns nothing either: a warning that says so, with
    harder problems as the fix, not the "normal for a working run" note of a run where some groups still disagree."""
    series = {
        "frac_reward_zero_std": [(s, 1.0) for s in range(1, 6)],
        "zero_std/all_high": [(s, 1.0) for s in range(1, 6)],
        "zero_std/all_low": [(s, 0.0) for s in range(1, 6)],
    }
    (alert,) = health_alerts(series)
    assert (alert.name, alert.level) == ("zero_std", "warning")
    assert alert.message.startswith(HEAD.format(5)) and "harder" in alert.hint
    # one step with a group that disagreed: the note again
    series["frac_reward_zero_std"][2] = (3, 0.75)
    assert [a.name for a in health_alerts(series)] == ["zero_std_solved"]


def test_without_trls_share_the_workers_split_decides():
    shares = {"zero_std/all_high": [(s, 0.0) for s in range(1, 4)], "zero_std/all_low": [(s, 1.0) for s in range(1, 4)]}
    assert no_spread(shares).steps == 3 and no_spread(shares).cause == "low"
    assert no_spread({}) is None


# --- the `next:` line and held-out problems -------------------------------------------------------------------------
def test_next_suggests_a_heldout_evaluation_only_where_the_data_has_heldout_problems(tmp_path):
    data = tmp_path / "word-problems.jsonl"
    data.write_text(json.dumps({"question": "Ann has 3 apples...", "answer": "918273"}) + "\n")
    own = tiny_config(dataset_name=str(data)).to_dict()
    assert "single local file" in heldout_missing(own)
    assert heldout_missing(tiny_config(dataset_name=str(data), heldout_fraction=0.5).to_dict()) is None
    assert "builtin:code" in heldout_missing(tiny_config(dataset_name="builtin:code").to_dict())
    assert heldout_missing(tiny_config().to_dict()) is None  # builtin:arithmetic: its test split

    (tmp_path / "adapter").mkdir()
    lines = summary(5, "completed", [0.5, 0.7], str(tmp_path), None, no_heldout=heldout_missing(own)).splitlines()
    assert lines[-1].startswith("  next: grpo-studio serve and open http://127.0.0.1:7860/?tab=monitor&run=5")
    assert "grpo-studio eval" not in lines[-1] and "no held-out evaluation" in lines[-1]
    assert "heldout_fraction" in lines[-1]
    lines = summary(5, "completed", [0.5, 0.7], str(tmp_path), None).splitlines()
    assert lines[-1].startswith("  next: grpo-studio eval 5 (base vs tuned on held-out problems)")


# --- real runs through the command line -----------------------------------------------------------------------------
def _cli_run(config_path: Path) -> tuple[int, str]:
    """``grpo-studio run CONFIG`` as a user types it (its own process, this test's database); (run id, stdout)."""
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "run", str(config_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("run ") and ":" in first, done.stdout
    return int(first.split(":")[0].removeprefix("run ")), done.stdout


@pytest.mark.slow
def test_the_newcomers_run_says_nothing_can_be_learned(tmp_path, tiny_model_path):
    """The newcomer's run: their own word problems (a local file: no held-out split), the correctness reward only,
    which the tiny model (trained on sums) never earns on them; three short steps."""
    data = tmp_path / "word-problems.jsonl"
    questions = [f"A train leaves at {h} o'clock with {h * 37} passengers. How many seats are empty?" for h in range(8)]
    data.write_text(
        "".join(json.dumps({"question": q, "answer": str(918273 + i)}) + "\n" for i, q in enumerate(questions))
    )
    config = tiny_config(name="word-problems", dataset_name=str(data), reward_funcs=["correctness"], max_steps=3)
    path = tmp_path / "run.yaml"
    config.save(path)
    run_id, out = _cli_run(path)
    flat, steps = _rows_fact(run_id)
    assert flat and steps == 3, "the broken config's groups disagreed: it no longer breaks the run"
    sentence = HEAD.format(steps) + NO_PROBE
    lines = out.splitlines()
    assert lines.count(f"warning: {sentence}") == 1  # while it ran, after its third step
    assert f"  warning: {sentence}" in lines  # and in its summary
    (next_line,) = [line for line in lines if line.startswith("  next: ")]
    assert "grpo-studio eval" not in next_line and "grpo-studio probe" in next_line
    assert _said(run_id) == {"api": sentence, "alert": sentence}


@pytest.mark.slow
def test_the_honest_demo_never_says_it(tmp_path, tiny_model_path):
    """``grpo-studio run tiny-offline``, shortened to three steps without its held-out curve."""
    import dataclasses

    from trainer.presets import tiny_demo

    path = tmp_path / "demo.yaml"
    dataclasses.replace(tiny_demo(), max_steps=3, eval_steps=0).save(path)
    run_id, out = _cli_run(path)
    flat, steps = _rows_fact(run_id)
    assert not flat and steps == 3
    assert "nothing can be learned" not in out and _said(run_id)["api"] is None
    (next_line,) = [line for line in out.splitlines() if line.startswith("  next: ")]
    assert next_line.startswith(f"  next: grpo-studio eval {run_id} ")
    # nor any sign of a collapse (issue 57): the base's honest answers neither loop nor leave its alphabet
    with get_sessionmaker().begin() as s:
        signs = {key: [p.value for p in queries.metric_series(s, run_id, key)] for key in (REPEATING_KEY, UNUSUAL_KEY)}
    assert signs == {REPEATING_KEY: [0.0] * 3, UNUSUAL_KEY: [0.0] * 3}
    assert "collapse" not in {a["name"] for a in actions.alerts(run_id)}
    # its learning map's frontier (issue 57.6): every prompt is seen once, and the frontier is those whose group
    # disagreed (all 3 steps are within its latest 10), read here off the stored samples
    from trainer.insight.report import learning_report

    with get_sessionmaker().begin() as s:
        samples = learning.scored_samples(s, run_id)
    totals: dict[tuple[int, int], list[float]] = defaultdict(list)
    prompts = {}
    for sample in samples:
        totals[(sample.step, sample.group_index)].append(sample.total_reward)
        prompts[(sample.step, sample.group_index)] = sample.prompt
    disagreed = {prompts[k] for k, values in totals.items() if max(values) > min(values)}
    frontier = learning_report(run_id).map.frontier
    assert disagreed and {ln.prompt for ln in frontier} == disagreed and len(frontier) == len(disagreed)
