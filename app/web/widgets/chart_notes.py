"""Notes that a run's config adds to its Monitor charts, where a chart would otherwise mislead or go silent.

- Clipped policy ratios: TRL keeps the sampling policy's log-probabilities (the ratio's denominator) only when
  ``gradient_accumulation_steps`` is not a multiple of ``steps_per_generation × num_iterations`` (trl 1.16.0
  grpo_trainer.py:2642-2644; ``steps_per_generation`` counts micro-batches, 0 meaning ``gradient_accumulation_steps``),
  or when vLLM generates with its importance-sampling correction. Otherwise every use of a generation batch falls
  within one optimizer step, the ratio pi_new/pi_old is exactly 1 by construction, clipping never acts and the chart
  is flat at 0: without a word that reads as "the speed limit is working". The note says, for the run's own settings,
  whether clipping can act (measured: 0 at every step with GA 2, steps_per_generation 1, μ 2, which TRL's defaults
  call reuse).
- KL with beta = 0 (TRL's default): TRL computes no KL term at all (docs/grpo.md § GRPO in five quantities, quantity 5),
  so no KL series is logged. The empty chart says so instead of "nothing logged yet"; when the worker measured KL
  itself (``measured_kl_steps``), the chart shows that line and says it is measured, not in the loss.
- A measure the worker turned off mid-run (it failed; trainer.job.measures says so in the run's log): the KL chart at
  beta 0 says "measured KL turned off at step N" with the reason, instead of going silent.
- Where each step's time goes: the biggest part over the latest steps and what would shrink it, from the run's own
  measures (trainer.job.step_times) and its settings (:func:`time_note`).

A run's stored config is read as a RunConfig (:meth:`RunConfig.from_stored`), as its worker read it: a setting the
stored config lacks reads as RunConfig's default, the value the run trained with, not a default of this module's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.markup import html_text
from app.web.widgets.charts import CHARTS, Chart, words_instead
from trainer.config.run_config import CISPO_EPSILON_MAX, RunConfig

# A run's config as the Monitor holds it (the mapping stored on its row), or already read as a RunConfig.
Stored = Mapping[str, Any] | RunConfig

CLIP_NOTE = (
    "num_iterations = 1: one optimisation pass per batch, within one optimizer step, so the ratio is exactly 1 and "
    "clipping never acts;<br>0 is expected here (it can act only when gradient_accumulation_steps is not a multiple "
    "of steps_per_generation × num_iterations)"
)
CLIP_ALIGNED_NOTE = (
    "gradient_accumulation_steps = {ga} is a multiple of steps_per_generation × num_iterations = {spg} × {mu}: every "
    "use of a batch falls within one optimizer step,<br>so the ratio is exactly 1 and clipping never acts; 0 is "
    "expected here"
)
CLIP_CAN_ACT_NOTE = (
    "gradient_accumulation_steps = {ga} is not a multiple of steps_per_generation × num_iterations = {spg} × {mu}: "
    "some micro-batches learn from an older policy's samples,<br>so clipping can act (at a small learning rate the "
    "ratio moves little and it may still read 0)"
)


def _settings(config: Stored) -> RunConfig:
    """The run's settings: its stored config read back as its worker read it."""
    return config if isinstance(config, RunConfig) else RunConfig.from_stored(config)


def clip_note(config: Stored) -> str:
    """Whether clipping can act under this run's settings, in words (see the module docstring); with vLLM generating,
    TRL's importance-sampling correction makes the ratio move whatever the alignment, which the note can't see from
    the config alone (the backend decides whether vLLM runs), so it reads the alignment only. A cispo run's chart is
    its cap on the importance weight, said first (:func:`cispo_note`)."""
    settings = _settings(config)
    mu = settings.num_iterations or 1
    ga = settings.gradient_accumulation_steps or 1
    spg = settings.steps_per_generation or ga  # 0: TRL's default, one batch per optimizer step
    if ga % (spg * mu) != 0:
        note = CLIP_CAN_ACT_NOTE.format(ga=ga, spg=spg, mu=mu)
    else:
        note = CLIP_NOTE if mu == 1 and spg == ga else CLIP_ALIGNED_NOTE.format(ga=ga, spg=spg, mu=mu)
    return cispo_note(settings, note) if settings.loss_type == "cispo" else note


def cispo_note(config: Stored, alignment: str) -> str:
    """cispo's clip: TRL caps each token's importance weight at epsilon_high itself and logs the share of tokens
    above it as ``cispo_clip_ratio`` (trl 1.16 grpo_trainer.py:3109-3110, 3284-3286). A cap below 1 (a run stored
    before grpo-studio refused one, or 0 read as epsilon by an older grpo-studio) clips unchanged tokens too."""
    cap = _settings(config).epsilon_high or CISPO_EPSILON_MAX
    if cap <= 1:
        return (
            f"cispo caps each token's importance weight at epsilon_high = {cap:g}, below 1: even a token the update "
            f"did not change is capped,<br>so this share is high and every update shrinks to {cap:g} of its size"
        )
    return f"cispo caps each token's importance weight at epsilon_high = {cap:g}; " + alignment.replace(
        "clipping", "the cap"
    ).replace("the ratio is exactly 1 and", "the weight is exactly 1 and")


# What a loss of ~0 means depends on how token losses are aggregated (trl 1.16 grpo_trainer.py _compute_loss): per
# sequence first (grpo, sapo), a group's advantages summing to 0 make the loss ~0 on-policy; any other aggregation
# weighs a sequence by its length or scales it, so its loss moves with the lengths of the group's answers.
LOSS_NOTES = {
    "dapo": "dapo averages tokens over the whole batch, so longer answers weigh more:<br>the loss is ~0 only when a "
    "group's answers are equally long; watch reward and KL for progress",
    "bnpo": "bnpo averages tokens over the batch, so longer answers weigh more:<br>the loss is ~0 only when a group's "
    "answers are equally long; watch reward and KL for progress",
    "dr_grpo": "dr_grpo divides by a constant (max_completion_length), so longer answers weigh more:<br>the loss is ~0 "
    "only when a group's answers are equally long; watch reward and KL for progress",
    "cispo": "cispo's loss is a capped weight × advantage × log-probability, a sum of log-probabilities,<br>not ~0; "
    "watch reward and KL for progress",
    "luspo": "luspo scales each sequence's loss by its length, so the loss moves with the answers' lengths,<br>not ~0; "
    "watch reward and KL for progress",
    "vespo": "vespo weights whole sequences smoothly instead of clipping; its loss need not be ~0:<br>watch reward and "
    "KL for progress",
}


KL_NOTE = "beta = 0: TRL computes no KL term at all, so there is none to chart<br>(set beta > 0, e.g. 0.04, to penalise and chart it)"
# at beta 0 the worker measures KL against the base itself (trainer/job/measures.py, every measured_kl_steps)
KL_MEASURED_NOTE = (
    "beta = 0: TRL computes no KL term; this line is measured against the base every few steps<br>on 16 completions "
    "spread over every group of the step's batch, not in the loss"
)


# the charts that show a measure of the worker's (metric key -> chart name)
MEASURE_CHARTS = {"kl_measured": "kl"}


def off_note(measure: str, when: str) -> str:
    """The note on a chart whose measure turned itself off: ``when`` is "at step N: reason"."""
    step, _, reason = when.partition(": ")
    label = "measured KL" if measure == "kl_measured" else measure
    return f"{label} turned off {step}, so the line ends there:<br>{reason[:140]}"


TIME_STEPS = 20  # the latest steps the time note averages: recent enough to follow a change, steady enough to name


def time_note(config: Stored, series: Mapping[str, Any]) -> str | None:
    """The part of a step that took the biggest share of the latest :data:`TIME_STEPS` steps (``series``: the run's
    points by key, the ``time/`` keys of trainer.job.step_times), and what would shrink it under this run's
    settings; None before a step was measured."""
    means = {}
    for key, points in series.items():
        if key.startswith("time/") and len(points):
            values = [float(point[1]) for point in points[-TIME_STEPS:]]
            means[key] = sum(values) / len(values)
    total = sum(means.values())
    if total <= 0:
        return None
    key = max(means, key=means.get)
    steps = min(TIME_STEPS, max(len(series[k]) for k in means))
    share = f"{means[key] / total:.0%} of a step ({means[key]:.2g} s of {total:.2g} s, the latest {steps} steps)"
    if key.startswith("time/rewards/"):
        name = html_text(key[len("time/rewards/") :])
        return (
            f"the reward {name} takes {share}<br>make {name} cheaper (a faster check, a cache, a smaller judge) or "
            "take it out of reward_funcs: every other part waits for it"
        )
    what, advice = TIME_ADVICE.get(key, TIME_ADVICE["time/other"])
    return f"{what} takes {share}<br>{advice(_settings(config))}"


def _generation_advice(config: RunConfig) -> str:
    less = (
        f"a shorter max_completion_length ({config.max_completion_length}) or fewer num_generations "
        f"({config.num_generations}) samples fewer tokens"
    )
    return less if config.use_vllm else f"use_vllm: true (on a GPU) samples faster; {less}"


def _logprobs_advice(config: RunConfig) -> str:
    if config.beta:
        return f"beta = {config.beta:g} runs the reference model over every batch (beta 0 skips that pass)"
    return (
        "at beta 0: the old policy's pass runs when a batch is reused (num_iterations > 1), the measured KL every "
        f"measured_kl_steps ({config.measured_kl_steps}) steps"
    )


def _update_advice(config: RunConfig) -> str:
    advice = (
        f"a smaller per_device_train_batch_size ({config.per_device_train_batch_size}) or lora_r "
        f"({config.lora_r}) makes each update cheaper"
    )
    if config.gradient_checkpointing:
        advice += "; gradient_checkpointing recomputes activations: off where memory allows (on a CPU, always)"
    return advice


# time/ key -> (what the note calls it, the advice for the run's settings)
TIME_ADVICE: dict[str, tuple[str, Callable[[RunConfig], str]]] = {
    "time/generation": ("generation", _generation_advice),
    "time/sync": (
        "the weight sync to vLLM",
        lambda c: (
            "it runs before every generation batch: steps_per_generation above gradient_accumulation_steps "
            "reuses a batch over several updates, so it syncs less often"
        ),
    ),
    "time/logprobs": ("log-prob passes outside the loss", _logprobs_advice),
    "time/backward": ("the update (forward, backward, optimizer)", _update_advice),
    "time/eval": (
        "held-out evaluation",
        lambda c: f"fewer eval_problems ({c.eval_problems}) or a larger eval_steps ({c.eval_steps})",
    ),
    "time/writes": (
        "grpo-studio's own writes",
        lambda c: (
            f"mostly the token view's passes: fewer token_samples_per_step ({c.token_samples_per_step}; 0 keeps none)"
        ),
    ),
    "time/checkpoint": (
        "saving checkpoints",
        lambda c: f"a larger save_steps ({c.save_steps}) saves less often",
    ),
    "time/other": (
        "the rest",
        lambda c: "none of the timed parts: fetching the batch, TRL's batching, advantages and logging, callbacks",
    ),
}


def chart_notes(
    config: Stored, off: Mapping[str, str] | None = None, series: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """Chart name -> the note this run's config calls for, for a measure that turned itself off (``off``:
    storage.queries.measures_off), that, and with the run's points (``series``), where its steps' time goes."""
    settings = _settings(config)
    notes = {"clip_ratio": clip_note(settings)}
    if series and (note := time_note(settings, series)):
        notes["step_time"] = note
    if note := LOSS_NOTES.get(settings.loss_type):
        notes["loss"] = note
    if settings.beta == 0.0:
        notes["kl"] = KL_NOTE
        for measure, when in (off or {}).items():
            if measure in MEASURE_CHARTS:
                notes[MEASURE_CHARTS[measure]] = off_note(measure, when)
    return notes


def add_notes(
    figures: Sequence[Any],
    config: Stored,
    charts: Sequence[Chart] = CHARTS,
    off: Mapping[str, str] | None = None,
    series: Mapping[str, Any] | None = None,
) -> list[Any]:
    """The figures (in ``charts`` order) with the notes of :func:`chart_notes` (``series``: the main run's points):
    on an empty chart in place of its "nothing logged" words; on a drawn chart under its title (a drawn KL chart at
    beta 0 is the measured KL, and says so, or that it turned off)."""
    notes = chart_notes(config, off, series)
    out = list(figures)
    for index, chart in enumerate(charts):
        note = notes.get(chart.name)
        figure = out[index] if index < len(out) else None
        if note is None or figure is None or not hasattr(figure, "layout"):
            continue
        if not figure.data:
            figure.layout.annotations = [words_instead(note)]
        else:
            # between the title and the plot, in a top margin made room for: inside the plot it covered the line
            figure.update_layout(
                margin={"t": 66}, title={"y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 8}}
            )
            figure.add_annotation(
                text=KL_MEASURED_NOTE if chart.name == "kl" and note == KL_NOTE else note,
                xref="paper",
                yref="paper",
                x=0.5,
                y=1,
                yanchor="bottom",
                showarrow=False,
                font={"size": 11},
            )
    return out
