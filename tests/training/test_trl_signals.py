"""TRL's whole signal (issue 30): every key TRL logs has a place in the Monitor, KL is measured at beta 0, μ = 2 makes
the clip act, and a run also reports to trackio (offline, into a local directory).

One tiny run of 4 steps, trained by a real worker process, is shared by the tests that read it: beta 0 (TRL's default,
where TRL computes no KL), num_iterations 2 and a measured KL every step. The learning rate is large (0.05) so the
policy moves enough within one step that the second pass over a batch sees ratios beyond the clip range on the tiny
model: with 1e-3 clip_ratio/region_mean stayed 0 at every step (measured while writing this test).
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.web.widgets.other_metrics import charted_keys, other_keys
from storage.db import get_sessionmaker
from tests.conftest import ROOT
from tests.helpers import run_row, start_run, tiny_config, wait_for
from trainer import review
from trainer.insight.signals import signal_alerts, signal_notes

# The environment that would send trackio anywhere but a local directory (trackio 0.43.0 utils.py:168-169: a Space
# or a self-hosted server; __init__.py:409 and sqlite_storage.py:1919-1921, 3352: buckets and datasets on Spaces).
TRACKIO_REMOTE = ("TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL", "TRACKIO_BUCKET_ID", "TRACKIO_DATASET_ID", "SPACE_ID")


@pytest.fixture(scope="module")
def trackio_dir(tmp_path_factory):
    """A local trackio directory for the module's worker (trackio reads TRACKIO_DIR when imported, utils.py:205-208),
    and none of the variables that would send it to the network."""
    pytest.importorskip("trackio")
    saved = {name: os.environ.pop(name, None) for name in (*TRACKIO_REMOTE, "TRACKIO_DIR")}
    path = tmp_path_factory.mktemp("trackio")
    os.environ["TRACKIO_DIR"] = str(path)
    yield path
    for name, value in saved.items():
        os.environ.pop(name, None)
        if value is not None:
            os.environ[name] = value


@pytest.fixture(scope="module")
def signals_run(module_database, tiny_model_path, trackio_dir):
    """The module's finished run: (run id, every key's points)."""
    config = tiny_config(
        name="signals",
        beta=0.0,
        num_iterations=2,
        learning_rate=0.05,
        measured_kl_steps=1,
        report_to=["trackio"],
        max_steps=4,
        save_steps=100,  # no checkpoint: nothing here reads one
    )
    run_id = start_run(config)
    wait_for(lambda: run_row(run_id).status in ("completed", "failed", "stopped"), 600, "the signals run to end")
    run = run_row(run_id)
    assert run.status == "completed", run.error
    from storage.series import series_since

    with get_sessionmaker().begin() as s:
        return run_id, series_since(s, run_id)


def _values(series, key) -> list[tuple[int, float]]:
    return [(int(step), float(value)) for step, value, _ in series[key]]


@pytest.mark.slow
def test_every_key_the_run_logged_is_charted_or_listed_in_the_monitor(signals_run):
    from app.web.pages import monitor

    run_id, series = signals_run
    view = monitor.refresh(run_id, [], 0.0, "step", 0, {})
    # each chart comes as an update holding its figure (issue 29: only drawn charts are shown; the tool chart of a
    # run without tools comes empty and hidden)
    drawn = {trace.meta for update in view.figures if update["value"] is not None for trace in update["value"].data}
    listed = set(view.other_pick["choices"])
    assert drawn | listed == set(series) and not drawn & listed
    # the keys issue 30 names that this run logs have charts, not only a line in the list
    for key in ("clip_ratio/region_mean", "clip_ratio/high_max", "completions/mean_terminated_length", "entropy"):
        assert key in drawn, key
    for key in ("time/generation", "time/other", "throughput/tokens_per_second", "throughput/tokens_per_step"):
        assert key in drawn, key
    assert "num_tokens" in listed and "rewards/correctness/std" in listed
    # the worker's figures are consistent with TRL's counter: tokens per step add up to num_tokens
    tokens = dict(_values(series, "throughput/tokens_per_step"))
    assert sum(tokens.values()) == _values(series, "num_tokens")[-1][1]
    assert "memory/peak_gib" not in series  # a CPU run has no GPU memory figure


@pytest.mark.slow
def test_beta_zero_run_has_a_measured_kl_series(signals_run):
    from app.web.pages import monitor

    run_id, series = signals_run
    assert "kl" not in series  # TRL computes no KL at beta 0
    # μ = 2: a batch is generated at steps 1 and 3, and each generation batch gets a measured KL (every 1 step)
    kl = _values(series, "kl_measured")
    assert [step for step, _ in kl] == [1, 3]
    assert kl[0][1] == 0.0  # the fresh adapter's B is zero: the policy is the base
    assert kl[1][1] > 1e-3  # two steps at a learning rate of 0.05 moved it
    update = monitor.refresh(run_id, [], 0.0, "step", 0, {}).figures[[c.name for c in monitor.CHARTS].index("kl")]
    figure = update["value"]
    assert [trace.name for trace in figure.data] == ["KL measured (not in the loss)"]


@pytest.mark.slow
def test_two_iterations_make_the_clip_act(signals_run):
    _, series = signals_run
    region = _values(series, "clip_ratio/region_mean")
    assert [step for step, _ in region] == [1, 2, 3, 4]
    assert region[0][1] == 0.0  # the first pass over a batch: the ratio is exactly 1
    assert max(value for _, value in region) > 0.0


@pytest.mark.slow
def test_trackio_run_dir_holds_the_run_metrics(signals_run, trackio_dir):
    run_id, series = signals_run
    with sqlite3.connect(trackio_dir / "grpo-studio.db") as db:  # trackio's project database (one per project)
        rows = db.execute("SELECT metrics FROM metrics WHERE run_name = ?", (f"signals (run {run_id})",)).fetchall()
    # transformers' TrackioCallback logs each TRL log dict with its keys prefixed train/ and the step as
    # train/global_step (trackio numbers its rows itself; TRL's profiling timings are rows of their own)
    logged = [json.loads(metrics) for (metrics,) in rows]
    steps = {int(m["train/global_step"]): m for m in logged if "train/loss" in m}
    assert sorted(steps) == [1, 2, 3, 4]
    for key in ("reward", "clip_ratio/region_mean", "kl_measured", "throughput/tokens_per_second"):
        found = {step: m[f"train/{key}"] for step, m in steps.items() if f"train/{key}" in m}
        assert found == pytest.approx(dict(_values(series, key))), key


# --- TRL's keys against the Monitor, from both pinned TRLs' sources ---------------------------------------------
TRL115 = ROOT / ".ci-cache" / "trl115"
# Logged by TRL, listed under "other metrics" rather than charted: a cumulative counter (the throughput charts show
# it per step and per second), and TRL's step_time, its training_step in one figure (generation, scoring, the loss's
# passes; not the optimizer, callbacks or logging), which the step-time chart shows cut into parts since issue 57.
LISTED = {"num_tokens", "step_time"}  # vespo/phi_seq_mean is charted with the clip ratios since issue 38


def _trl_keys(source: Path) -> set[str]:
    text = source.read_text(encoding="utf-8")
    return set(re.findall(r'_metrics\[mode\]\["([^"]+)"\]', text))


def test_every_key_in_trl_sources_has_a_chart():
    import trl

    sources = [Path(trl.__file__).parent / "trainer" / "grpo_trainer.py"]
    if (TRL115 / "trl").is_dir():
        sources.append(TRL115 / "trl" / "trainer" / "grpo_trainer.py")
    for source in sources:
        keys = _trl_keys(source) | {"rewards/correctness/mean", "step_time"}  # the f-string family, the train loop
        assert len(keys) >= 30, source  # the pattern still finds TRL's keys
        assert keys - LISTED <= charted_keys(sorted(keys)), source
        assert other_keys({"run": dict.fromkeys(keys, [])}) == sorted(LISTED & keys)


@pytest.mark.slow
@pytest.mark.skipif(not (TRL115 / "trl").is_dir(), reason="TRL 1.15 is not installed in .ci-cache/trl115")
def test_clip_knobs_and_trackers_reach_grpo_config_on_trl_115():
    code = (
        "import trl; from trainer.config import RunConfig; from trainer.job.trl_args import to_trl;"
        "g = to_trl(RunConfig(num_iterations=2, steps_per_generation=2, report_to=['trackio']), '/tmp/x').grpo;"
        "print(trl.__version__, g.num_iterations, g.steps_per_generation, g.report_to, g.project)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TRL115), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-5:] == ["1.15.0", "2", "2", "['trackio']", "grpo-studio"]


def test_clip_knobs_reach_grpo_config_and_zero_means_trls_default():
    from trainer.config import RunConfig
    from trainer.job.trl_args import to_trl

    grpo = to_trl(RunConfig(num_iterations=3, steps_per_generation=2), "/tmp/x").grpo
    assert (grpo.num_iterations, grpo.steps_per_generation, grpo.report_to) == (3, 2, [])
    grpo = to_trl(RunConfig(gradient_accumulation_steps=2), "/tmp/x").grpo
    assert (grpo.num_iterations, grpo.steps_per_generation) == (1, 2)  # TRL's default: the accumulation steps


# --- config ---------------------------------------------------------------------------------------------------------
def test_bad_tracker_and_generation_batch_are_explained():
    from trainer.config import RunConfig

    problems = review.problems(
        RunConfig(report_to=["trackio", "neptune"], steps_per_generation=1, per_device_train_batch_size=4),
        check_rewards=False,
        check_files=False,
    )
    assert "report_to 'neptune': expected trackers among trackio, wandb, tensorboard, mlflow" in problems
    assert any(
        p.startswith("steps_per_generation 1: a generation batch of 4 completions is not divisible") for p in problems
    )


def test_a_tracker_that_is_not_installed_fails_the_worker_with_the_extra_to_install(monkeypatch):
    from trainer.config import RunConfig
    from trainer.job import trl_args

    monkeypatch.setitem(trl_args.TRACKER_MODULES, "mlflow", "grpo_studio_no_such_module")
    with pytest.raises(ValueError, match=r"report_to mlflow: not installed .*pip install 'grpo-studio\[mlflow\]'"):
        trl_args.to_trl(RunConfig(report_to=["mlflow"]), "/tmp/x")


def test_new_fields_show_in_the_form_with_their_help():
    from app.web.widgets.form import form_fields

    specs = {s.name: s for s in form_fields()}
    assert specs["num_iterations"].kind == "int" and "not a multiple of" in specs["num_iterations"].help
    assert specs["report_to"].kind == "list" and specs["measured_kl_steps"].advanced


# --- the measurements, with a fake clock and a fake GPU ------------------------------------------------------------
class FakeMemory:
    def __init__(self):
        self.resets, self.peak = 0, 0.0

    def reset(self):
        self.resets += 1

    def peak_gib(self):
        return self.peak

    def engine_gib(self):
        return 0.0  # no vLLM engine in this process


def test_step_measures_split_the_step_and_count_tokens_and_gpu_memory():
    from trainer.job.measures import StepMeasures

    now = [100.0]
    memory = FakeMemory()
    measures = StepMeasures(memory=memory, clock=lambda: now[0])
    measures.times.declare("time/generation")
    measures.begin_training(tokens_seen=0)
    measures.begin_step()

    def generate():
        now[0] += 1.5

    measures.times.timed("time/generation", generate)()
    now[0], memory.peak = 102.0, 3.25
    first = measures.end_step(tokens_seen=1000)
    assert first == {
        "time/generation": 1.5,
        "time/other": 0.5,
        "throughput/tokens_per_step": 1000.0,
        "throughput/tokens_per_second": 500.0,
        "memory/peak_gib": 3.25,
    }
    measures.begin_step()  # a step that reuses the batch: no generation, no new tokens
    now[0] = 103.0
    second = measures.end_step(tokens_seen=1000)
    assert second == {"time/generation": 0.0, "time/other": 1.0, "memory/peak_gib": 3.25}
    measures.begin_step()
    now[0] = 104.0
    third = measures.end_step(tokens_seen=1600)  # tokens over the two steps since the last generation
    assert third["throughput/tokens_per_second"] == 300.0 and memory.resets == 3


def test_the_training_peak_leaves_out_a_colocated_engines_reservation(monkeypatch):
    """Issue 38, item 4: a colocated vLLM engine takes about vllm_gpu_memory_utilization of the card through this
    process's torch when it is built; the step's peak is the training's, the reservation its own line."""
    import types

    import torch

    from trainer.job.measures import GIB, CudaMemory, EngineReservation, StepMeasures, count_engine_reservation

    allocated = [2 * GIB]  # the model's weights, before the engine

    class LLM:  # vllm.LLM as the boundary sees it: building it allocates its weights and KV cache
        def __init__(self, model, gpu_memory_utilization=0.6):
            allocated[0] += 6 * GIB

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: allocated[0])
    reservation = EngineReservation()
    count_engine_reservation(reservation)
    count_engine_reservation(reservation)  # once per process: a second call adds no second count
    LLM("tiny", gpu_memory_utilization=0.6)
    assert reservation.torch_bytes == 6 * GIB

    class Card(CudaMemory):
        def reset(self):
            pass

        def allocated_peak(self):
            return 11 * GIB  # 2 GiB of weights, 6 of engine, 3 of the step's activations and optimizer state

    measures = StepMeasures(memory=Card(reservation), clock=lambda: 0.0)
    measures.begin_step()
    found = measures.end_step(tokens_seen=0)
    assert found["memory/peak_gib"] == 5.0 and found["memory/engine_gib"] == 6.0
    assert "memory/engine_gib" not in StepMeasures(memory=Card(EngineReservation()), clock=lambda: 0.0).end_step(0)


def test_no_memory_figure_without_cuda_and_kl_every_n_steps():
    from trainer.job.measures import StepMeasures, cuda_memory

    assert cuda_memory("cpu") is None and cuda_memory(None) is None
    assert type(cuda_memory(type("Device", (), {"type": "cuda"})())).__name__ == "CudaMemory"
    measures = StepMeasures(kl_every=5)
    assert measures.kl_due(0)
    measures.last_kl_step = 0
    assert [step for step in range(1, 12) if measures.kl_due(step)] == [5, 6, 7, 8, 9, 10, 11]
    assert not StepMeasures(kl_every=0).kl_due(0)


def test_measured_kl_estimator_matches_trls_and_is_zero_for_equal_logprobs():
    import torch

    from trainer.job.measures import per_token_kl

    policy, base = torch.tensor([-0.5, -1.0]), torch.tensor([-0.5, -2.0])
    assert per_token_kl(policy, base).tolist() == pytest.approx([0.0, math.exp(-1.0) + 1.0 - 1.0])


# --- alerts ---------------------------------------------------------------------------------------------------------
def _series(**keys):
    return {
        k.replace("__", "/"): [(i + 1, float(v), 100.0 + i) for i, v in enumerate(vals)] for k, vals in keys.items()
    }


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (_series(sampling__sampling_logp_difference__mean=[0.02] * 10 + [0.3] * 10), "vllm_mismatch"),
        (_series(sampling__sampling_logp_difference__mean=[0.9] * 3), "vllm_mismatch"),
        (_series(completions__clipped_ratio=[1.0] * 5, reward_std=[0.0] * 5), "truncated_flat"),
    ],
)
def test_each_silent_failure_raises_its_alert(data, name):
    assert [a.name for a in signal_alerts(data)] == [name]


def test_healthy_signals_raise_nothing_and_a_zero_loss_is_explained():
    healthy = _series(
        sampling__sampling_logp_difference__mean=[0.03] * 20,
        completions__clipped_ratio=[1.0] * 5,
        reward_std=[0.4] * 5,
        loss=[0.0] * 5,
    )
    assert signal_alerts(healthy) == []
    assert [n.name for n in signal_notes(healthy)] == ["loss_zero"] and "trl#3452" in signal_notes(healthy)[0].hint
    assert signal_notes(_series(loss=[0.2, 0.1, 0.3])) == []


def test_kl_climb_alert_uses_the_measured_kl_at_beta_zero():
    from trainer.insight.health import health_alerts

    assert [a.name for a in health_alerts(_series(kl_measured=[0.05] * 10 + [1.0] * 10))] == ["kl_climb"]


def test_the_banner_marks_a_note_apart_from_the_alerts():
    from app.web.pages.monitor import health_markdown

    banner = health_markdown(_series(loss=[0.0] * 5, completions__clipped_ratio=[1.0] * 5, reward_std=[0.0] * 5), 200)
    lines = banner.split("\n\n")  # one paragraph an alert, each after its verdict word (app/web/widgets/verdict.py)
    assert [line.split("**")[1] for line in lines] == [
        "100% of completions hit the length limit",
        "100% of completions are cut at max_completion_length and the rewards are flat",
        "loss is 0: normal for GRPO",
    ]
    assert ["Warning:</span>" in line for line in lines] == [True, True, False] and "Note:</span>" in lines[2]


def test_other_metrics_are_listed_and_charted_on_request():
    from app.web.widgets.other_metrics import other_figure, other_text

    runs = {"1: a": _series(reward=[1.0, 2.0], num_tokens=[0.5, 0.6], my__custom=[3.0, 4.0])}
    assert other_keys(runs) == ["my/custom", "num_tokens"]
    assert other_text(other_keys(runs)) == (
        "<small>Logged but not charted above (2): `my/custom`, `num_tokens`</small>"
    )
    figure = other_figure(runs, ["my/custom"])
    assert [(trace.meta, list(trace.y)) for trace in figure.data] == [("my/custom", [3.0, 4.0])]


def test_the_measured_kl_reads_completions_of_every_group():
    """Issue 34: the first 16 rows of a batch were two groups of eight (two prompts); the sample now takes 16 rows
    at an even stride: at the demo's 64 rows in groups of 8, two answers of each of the 8 prompts."""
    from trainer.job.measures import kl_rows

    rows = kl_rows(64)
    assert len(rows) == 16 and len(set(rows)) == 16
    assert sorted(i // 8 for i in rows) == sorted(list(range(8)) * 2)
    assert kl_rows(12) == list(range(12))  # a smaller batch: every row
    assert len({i // 4 for i in kl_rows(128)}) == 16  # G = 4, 32 groups: 16 prompts, one answer each
