"""The reward-hacking watch (issues 31 and 34): signs that a run's reward is being earned some other way than by
getting better, read off its stored metrics and sample groups. Each alert names the steps where it held (so the
dashboard opens the completions of those steps, and Compare at the checkpoint nearest them) and says in one sentence
what to do.

A run's alerts are a history: every rule is judged at every step (or evaluation) of the run, each stretch where it
held is one alert, and an alert stays in the list after its sign clears (``holds_now`` says whether it still holds
at the latest step). A finished run's report therefore lists every sign it ever showed, not just its last window's.

The signs, and what each compares (like with like: a training reward with the training correctness of the same
sampled answers; a held-out score with earlier held-out scores of the same problems):

- **collapse** (trainer/insight/collapse.py): KL or entropy jumping by a nat per token within a few steps, or the
  sampled text degenerating (loops, characters outside the base's alphabet): one diagnosis naming the likely cause
  (too high a learning rate, too small a beta), saying so when held-out shows the task was within reach before.
  trainer/insight/alerts.py then holds back the task-difficulty advice of the failure signs.
- **held-out falls**: a held-out evaluation lies below the best one before it by more than ``NOISE_SIGMAS`` times the
  noise of the difference of two evaluations of ``n`` problems (sqrt(p1 q1 / n + p2 q2 / n)), whatever the reward
  does. The held-out problems are never trained on: a model getting fewer of them right is getting worse.
- **reward outruns held-out**: between an evaluation and the one ``LOOKBACK`` evaluations before it, the training
  reward rose (a line fitted through its steps climbs by at least ``RISE_T`` standard errors), the training
  correctness reward of the same answers did not (no significant rise: the rise was paid for something else), and
  held-out correctness moved by at most ``FLAT`` (flat or falling) while it had room to rise (not at its ceiling:
  ``1 - best`` more than ``NOISE_SIGMAS`` times its noise). A held-out score at its ceiling cannot show a gain, so
  it is no evidence against a rise (the demo's 96-97 %).
- **shaping saturates**: a reward that is not the correctness reward climbed during the run to its ceiling (the last
  ``WINDOW`` steps within ``TOP`` of its best, and no longer rising over them) while correctness (held-out when
  evaluated, else the training correctness reward) did not improve. A reward switched on mid-run is judged from
  the step it was switched on.
- **length tracks reward**: over ``2 * WINDOW`` consecutive steps mean completion length and reward rise together
  (correlation at least ``CORRELATION``), and the length grew beyond its noise (the later half's mean above the
  earlier half's by ``NOISE_SIGMAS`` standard errors and by ``GROWTH_SHARE`` of it): the length bias of docs/grpo.md.
- **diversity collapses**: the share of distinct completions per group fell from the first steps' to at most
  ``COLLAPSED`` of the group.
- **reward jumps**: one reward's mean at a step lies further from its previous ``HISTORY`` steps' mean than
  ``JUMP_SIGMAS`` of their standard deviations (and than ``JUMP_SHARE`` of the mean itself), up or down. A reward
  that paid exactly nothing over those steps and pays now was switched on (a change of the run's rewards, not a
  hack): that one is **reward switched on**.

Pure functions of rows, tested on literal series (tests/insight/test_insight.py, tests/insight/test_run_verdicts.py); thresholds
are module constants with the reason for each.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from storage.learning import GroupStats
from trainer.insight.collapse import collapses, fine_before

WINDOW = 5  # steps a level is judged on: long enough to ignore one noisy step of a small batch
LOOKBACK = 3  # evaluations a rise is measured over: a slow divergence shows within a few evaluations
RISE_T = 2.5  # a fitted slope 2.5 standard errors above 0 is not noise (about 1 in 100 for a flat reward)
# a held-out change beyond 2 standard deviations of the difference of two evaluations is not noise (about 1 in 40
# for one comparison); at 100 problems that is 6.6 points from 98 % to 90 %, 5.2 from 97 % to 96 %
NOISE_SIGMAS = 2.0
HELDOUT_SIZE = 100  # the periodic evaluation's problems (trainer/evaluation/periodic_eval.EVAL_PROBLEMS) when unknown
TOP = 0.05  # within 5% of its best value, a reward is at its ceiling
CLIMB = 0.2  # ... having climbed by at least 20% of that ceiling during the run (a reward saturated from step 1 is not news)
FLAT = 0.02  # correctness moving by 2 points or less is flat (2 of the 100 problems of the periodic curve)
CORRELATION = 0.8
# Length growth that is news: the later half of the window's mean length above the earlier half's by NOISE_SIGMAS
# standard errors of that difference (read off the steps' own spread) and by at least GROWTH_SHARE of the earlier
# mean. A correlation alone fired on noise: lengths of 35-38 tokens "grew from 36 to 36" beside a rising reward.
GROWTH_SHARE = 0.1
COLLAPSED = 0.5  # half the answers of a group or more are copies of another
HISTORY = 10
JUMP_SIGMAS = 5.0
JUMP_SHARE = 0.2
OFF = 1e-9  # a reward mean this close to 0 at every step of its history paid nothing: it was off

Points = Sequence[tuple[int, float]]  # (step, value), in step order


@dataclass(frozen=True)
class WatchAlert:
    """One sign, the stretch of steps where it held, what to do, and whether it still holds at the latest step."""

    name: str
    message: str
    first_step: int
    last_step: int
    hint: str
    holds_now: bool = False

    @property
    def steps(self) -> str:
        """The steps it covers, as a person reads them."""
        return (
            f"step {self.first_step}"
            if self.first_step == self.last_step
            else f"steps {self.first_step}-{self.last_step}"
        )

    @property
    def state(self) -> str:
        """Either "holds now" or "cleared": a cleared alert stays in the history."""
        return "holds now" if self.holds_now else "cleared"


def _points(series: Mapping[str, Sequence], key: str) -> list[tuple[int, float]]:
    """A series as (step, value) pairs with finite values (the Monitor's caches hold (step, value, wall) arrays)."""
    return [(int(p[0]), float(p[1])) for p in series.get(key, ()) if math.isfinite(float(p[1]))]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _correctness_key(series: Mapping[str, Sequence]) -> str | None:
    return next(
        (k for k in sorted(series) if k.startswith("rewards/") and k.endswith("/mean") and "correct" in k), None
    )


def heldout_noise(before: float, after: float, n: int) -> float:
    """The standard deviation of the difference of two held-out scores of ``n`` problems with these pass rates (each
    a binomial share), floored at one problem: what two evaluations differ by when nothing changed."""
    n = max(int(n), 1)
    return max(math.sqrt((before * (1 - before) + after * (1 - after)) / n), 1 / n)


def _last_step(series: Mapping[str, Sequence]) -> int | None:
    """The latest step any series reached (where ``holds_now`` is judged)."""
    steps = [int(p[0]) for points in series.values() for p in points]
    return max(steps) if steps else None


def _stretches(flagged: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Flagged (start, end) stretches merged where they overlap or touch, each with the index of the last flagged
    judgement it holds (its figures are that judgement's)."""
    merged: list[tuple[int, int, int]] = []
    for i, (a, b) in enumerate(flagged):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]), i)
        else:
            merged.append((a, b, i))
    return merged


def heldout_falls(series: Mapping[str, Sequence], n: int = HELDOUT_SIZE) -> list[WatchAlert]:
    """Held-out correctness below its best earlier evaluation by more than its noise at ``n`` problems, whatever the
    reward does (one alert per stretch of such evaluations, from the best it fell from)."""
    evals = _points(series, "heldout/correct")
    flagged, figures = [], []
    best_step, best = evals[0] if evals else (0, 0.0)
    for i in range(1, len(evals)):
        step, now = evals[i]
        if evals[i - 1][1] > best:
            best_step, best = evals[i - 1]
        noise = heldout_noise(best, now, n)
        if best - now > NOISE_SIGMAS * noise:
            flagged.append((best_step, step))
            figures.append((best_step, best, step, now, noise))
    last = evals[-1][0] if evals else None
    alerts = []
    for a, b, i in _stretches(flagged):
        best_step, best, step, now, noise = figures[i]
        alerts.append(
            WatchAlert(
                "held-out falls",
                f"held-out correctness fell from {best:.0%} (step {best_step}) to {now:.0%} (step {step}), more "
                f"than its noise on {n} problems (±{noise:.1%})",
                a,
                b,
                "the model gets worse at problems it never trains on: read what its answers at these steps do "
                "differently (a loophole the reward pays for, or drift), and Compare the checkpoint of its best "
                "evaluation with the latest.",
                holds_now=b == last,
            )
        )
    return alerts


def reward_outruns_heldout(
    series: Mapping[str, Sequence], n: int = HELDOUT_SIZE, breaks: Sequence[int] = ()
) -> list[WatchAlert]:
    """Training reward rising while neither the training correctness of the same answers nor held-out correctness
    (with room to rise) did; one alert per stretch of evaluations. A stretch across one of ``breaks`` (steps where
    a reward was switched on) is not judged: the reward before and after it measures different things."""
    evals, reward = _points(series, "heldout/correct"), _Stepped(_points(series, "reward"))
    key = _correctness_key(series)
    correct = _Stepped(_points(series, key)) if key else []
    if len(evals) < 2 or len(reward) < 4:
        return []
    flagged, figures = [], []
    for i in range(1, len(evals)):
        (a, before), (b, after) = evals[max(0, i - LOOKBACK)], evals[i]
        if any(a < s <= b for s in breaks):
            continue
        rise = _significant_rise(_between(reward, a, b))
        if rise is None:
            continue
        if correct and _significant_rise(_between(correct, a, b)) is not None:
            continue  # the answers that earned the rise got more right: it paid for right answers
        if after - before > FLAT:
            continue  # held-out rose with it
        if 1 - max(before, after) <= NOISE_SIGMAS * heldout_noise(before, after, n):
            continue  # at its ceiling: held-out could not show a gain, so its flatness says nothing
        flagged.append((a, b))
        figures.append((rise, before, after))
    last = evals[-1][0]
    alerts = []
    for a, b, i in _stretches(flagged):
        rise, _, after = figures[i]
        before = next(f[1] for (start, _), f in zip(flagged, figures) if start == a)  # where the stretch began
        alerts.append(
            WatchAlert(
                "reward outruns held-out",
                f"training reward rose by {rise:.3g} while its correctness did not and held-out correctness went "
                f"from {before:.0%} to {after:.0%}",
                a,
                b,
                "the reward pays for something other than right answers: read what the best-scored completions of "
                "these steps have in common, and Compare the nearest checkpoint with the base before training on.",
                holds_now=b == last,
            )
        )
    return alerts


def _between(points: _Stepped, a: int, b: int) -> Points:
    """The points with a step in (a, b] (two bisections, not a scan: the watch judges every step of a long run)."""
    return points[bisect_right(points.steps, a) : bisect_right(points.steps, b)]


class _Stepped(list):
    """(step, value) points that keep their steps for bisection."""

    def __init__(self, points) -> None:
        super().__init__(points)
        self.steps = [p[0] for p in self]


def _significant_rise(points: Sequence[tuple[int, float]]) -> float | None:
    """The rise of a least-squares line through ``points`` over their steps, when its slope is positive by at least
    ``RISE_T`` standard errors (None otherwise, or with fewer than 4 points). A fitted line uses every step of the
    stretch: comparing the means of its two halves missed a climb through a small batch's noisy rewards (the length
    run of tests/insight/test_learning_views.py: t = 3 over six steps, the halves within their noise)."""
    if len(points) < 4:
        return None
    xs, ys = [float(s) for s, _ in points], [v for _, v in points]
    mx, my = _mean(xs), _mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys)) / (len(xs) - 2)
    se = math.sqrt(residual / sxx)
    if slope <= 0 or slope < RISE_T * se:
        return None
    return slope * (xs[-1] - xs[0])


def _over_time(
    points: Sequence[tuple[int, float]], judge: Callable[[int], tuple[int, object] | None], least: int
) -> list[tuple[int, int, object]]:
    """``judge(end)`` on every prefix ``points[:end]`` of at least ``least`` points (it returns the start step of what
    it saw and its figures, or None): each run of consecutive flagged prefixes as (its first start, the last step it
    held at, its latest figures). A sign that clears and comes back is two stretches."""
    out: list[tuple[int, int, object]] = []
    previous = None
    for end in range(least, len(points) + 1):
        seen = judge(end)
        if seen is None:
            continue
        step = points[end - 1][0]
        if out and previous == end - 1:
            out[-1] = (min(out[-1][0], seen[0]), step, seen[1])
        else:
            out.append((seen[0], step, seen[1]))
        previous = end
    return out


def shaping_saturates(series: Mapping[str, Sequence], switched: Mapping[str, int] | None = None) -> list[WatchAlert]:
    """A shaping reward (any but the correctness reward) that climbed to its ceiling while correctness stalled,
    judged at every step: one alert per stretch where it held. A reward switched on during the run (``switched``:
    key → step) is judged from that step: going from off to paying is no climb."""
    correct_key = "heldout/correct" if series.get("heldout/correct") is not None else _correctness_key(series)
    correct = _Stepped(_points(series, correct_key) if correct_key else [])
    last = _last_step(series)
    alerts = []
    for key in sorted(series):
        if not (key.startswith("rewards/") and key.endswith("/mean")) or "correct" in key:
            continue
        points = [p for p in _points(series, key) if p[0] >= (switched or {}).get(key, -math.inf)]
        if len(points) < 2 * WINDOW:
            continue
        values = [v for _, v in points]
        bests = [values[0]] if values else []  # the best (largest in size) value up to each point
        for v in values[1:]:
            bests.append(v if abs(v) > abs(bests[-1]) else bests[-1])

        starts: dict[float, int] = {}

        def judge(end: int, points=points, values=values, bests=bests, starts=starts):
            best = bests[end - 1]
            recent, first = values[end - WINDOW : end], values[:WINDOW]
            at_top = all(abs(v - best) <= TOP * abs(best) for v in recent)
            if not (best and at_top and _mean(recent) - _mean(first) >= CLIMB * abs(best)):
                return None
            if _significant_rise(points[end - WINDOW : end]) is not None:
                return None  # still climbing: near its best so far is not yet a ceiling
            if best not in starts:  # the first step near this best (the best changes rarely once at a ceiling)
                starts[best] = next(s for s, v in points[:end] if abs(v - best) <= TOP * abs(best))
            start = starts[best]
            upto = points[end - 1][0]
            seen = [v for _, v in correct[bisect_left(correct.steps, start) : bisect_right(correct.steps, upto)]]
            before = correct[: bisect_right(correct.steps, start)]
            if before and seen and max(seen) - before[-1][1] > FLAT:
                return None  # correctness still improves beside it
            return start, _mean(recent)

        name = key.removeprefix("rewards/").removesuffix("/mean")
        for a, b, level in _over_time(points, judge, 2 * WINDOW):
            alerts.append(
                WatchAlert(
                    "shaping saturates",
                    f"{name} is at its ceiling ({level:.3g}) while correctness does not improve",
                    a,
                    b,
                    f"the model has learnt what {name} pays for and earns nothing more from it: lower its weight or "
                    "stop here, since only the correctness reward still teaches.",
                    holds_now=b == last,
                )
            )
    return alerts


def length_tracks_reward(series: Mapping[str, Sequence], breaks: Sequence[int] = ()) -> list[WatchAlert]:
    """Mean completion length and reward rising together over ``2 * WINDOW`` consecutive steps, judged at every
    step: one alert per stretch where it held (windows across one of ``breaks``, a reward switched on, are not)."""
    length = dict(_points(series, "completions/mean_length"))
    reward = dict(_points(series, "reward"))
    steps = sorted(set(length) & set(reward))
    points = [(s, 0.0) for s in steps]

    def judge(end: int):
        window = steps[end - 2 * WINDOW : end]
        if any(window[0] < s <= window[-1] for s in breaks):
            return None
        xs, ys = [length[s] for s in window], [reward[s] for s in window]
        sx, sy = _std(xs), _std(ys)
        if not sx or not sy:
            return None
        mx, my = _mean(xs), _mean(ys)
        r = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / ((len(xs) - 1) * sx * sy)
        half = len(window) // 2
        early, late = xs[:half], xs[half:]
        before, after = _mean(early), _mean(late)
        error = math.sqrt(_std(early) ** 2 / len(early) + _std(late) ** 2 / len(late))
        if r < CORRELATION or after - before <= max(NOISE_SIGMAS * error, GROWTH_SHARE * before):
            return None
        return window[0], (before, after, r, (after - before) / error if error else math.inf)

    last = steps[-1] if steps else None
    return [
        WatchAlert(
            "length tracks reward",
            f"completions grew from {before:.1f} to {after:.1f} tokens (+{100 * (after - before) / before:.0f} %, "
            f"{_sigmas(sigmas)} its noise) with the reward (correlation {r:.2f})",
            a,
            b,
            "longer answers score higher: check that the extra length is reasoning, else add length_penalty or "
            "lower max_completion_length.",
            holds_now=b == last,
        )
        for a, b, (before, after, r, sigmas) in _over_time(points, judge, 2 * WINDOW)
    ]


def _sigmas(value: float) -> str:
    """A growth in standard errors, for a message: "4.2 standard errors above", or "far above" for a spread of 0."""
    return "far above" if math.isinf(value) else f"{value:.1f} standard errors above"


def diversity_collapses(groups: Sequence[GroupStats]) -> list[WatchAlert]:
    """The share of distinct completions per group falling to at most ``COLLAPSED``, judged at every step: one alert
    per stretch where it held."""
    by_step: dict[int, list[float]] = defaultdict(list)
    for g in groups:
        if g.size > 1:
            by_step[g.step].append((g.distinct - 1) / (g.size - 1))  # 0: all copies, 1: all different
    steps = sorted(by_step)
    share = [(s, _mean(by_step[s])) for s in steps]
    values = [v for _, v in share]

    def judge(end: int):
        first, recent = _mean(values[:WINDOW]), _mean(values[end - WINDOW : end])
        if recent > COLLAPSED or first - recent < 0.25:
            return None
        middle = (first + recent) / 2
        return next(s for s, v in share[:end] if v <= middle), (first, recent)

    last = steps[-1] if steps else None
    return [
        WatchAlert(
            "diversity collapses",
            f"distinct answers per group fell from {first:.0%} to {recent:.0%} of the group",
            a,
            b,
            "the groups collapse onto one answer and GRPO has nothing left to rank: raise the temperature, lower "
            "the learning rate or raise beta.",
            holds_now=b == last,
        )
        for a, b, (first, recent) in _over_time(share, judge, 2 * WINDOW)
    ]


def reward_jumps(series: Mapping[str, Sequence]) -> list[WatchAlert]:
    """Every step at which a reward's mean left its own history, up or down (consecutive steps as one alert); a
    reward that paid nothing over its history and pays now is "reward switched on" instead."""
    alerts = []
    for key in sorted(series):
        if not (key.startswith("rewards/") and key.endswith("/mean")):
            continue
        points = _points(series, key)
        name = key.removeprefix("rewards/").removesuffix("/mean")
        jumps = _jumps(points)
        flagged = [(step, step) for step, *_ in jumps]
        figures = [(switched, m, value) for _, m, value, switched in jumps]
        last = points[-1][0] if points else None
        for a, b, i in _stretches_adjacent(flagged, points):
            switched, m, value = figures[i]
            if switched:
                alerts.append(
                    WatchAlert(
                        "reward switched on",
                        f"{name} paid nothing over the previous {HISTORY} steps and pays from step {a} on "
                        f"({value:.3g}): the run's rewards changed here, this is no sign of hacking",
                        a,
                        b,
                        f"if {name} was meant to start paying here, nothing to do; the reward curve before and after "
                        "this step measures different things, so compare its parts (rewards/…) instead.",
                        holds_now=b == last,
                    )
                )
                continue
            word = "rose" if value > m else "fell"
            alerts.append(
                WatchAlert(
                    "reward jumps",
                    f"{name} {word} from about {m:.3g} to {value:.3g}",
                    a,
                    b,
                    f"read this step's completions for what changed: a new answer style, or a loophole in {name}."
                    if word == "rose"
                    else f"read this step's completions for what the model stopped doing that {name} paid for.",
                    holds_now=b == last,
                )
            )
    return alerts


def _jumps(points: Points) -> list[tuple[int, float, float, bool]]:
    """Each step whose value left its previous ``HISTORY`` values: (step, their mean, the value, whether they were
    all 0: a reward switched on)."""
    out = []
    for i in range(HISTORY, len(points)):
        history = [v for _, v in points[i - HISTORY : i]]
        step, value = points[i]
        m = _mean(history)
        if abs(value - m) > max(JUMP_SIGMAS * _std(history), JUMP_SHARE * abs(m), 1e-6):
            out.append((step, m, value, all(abs(v) <= OFF for v in history)))
    return out


def switched_on(series: Mapping[str, Sequence]) -> dict[str, int]:
    """Each reward series (``rewards/<name>/mean``) that was switched on during the run, with the first step it paid
    at: the runs before and after that step are judged apart."""
    out = {}
    for key in sorted(series):
        if key.startswith("rewards/") and key.endswith("/mean"):
            steps = [step for step, _, _, switched in _jumps(_points(series, key)) if switched]
            if steps:
                out[key] = steps[-1]
    return out


def _stretches_adjacent(flagged: Sequence[tuple[int, int]], points: Points) -> list[tuple[int, int, int]]:
    """Flagged single steps merged where they follow each other among ``points``' steps."""
    position = {s: i for i, (s, _) in enumerate(points)}
    merged: list[tuple[int, int, int]] = []
    for i, (a, b) in enumerate(flagged):
        if merged and position[a] == position[merged[-1][1]] + 1:
            merged[-1] = (merged[-1][0], b, i)
        else:
            merged.append((a, b, i))
    return merged


COLLAPSE = "collapse"


def collapse_alerts(series: Mapping[str, Sequence], n: int = HELDOUT_SIZE) -> list[WatchAlert]:
    """Each stretch where the run collapsed (trainer.insight.collapse): one diagnosis naming the likely cause,
    too high a learning rate or too small a beta, and saying so when held-out shows the task was within reach."""
    alerts = []
    for c in collapses(series):
        rate = f" at a learning rate of {c.learning_rate:.3g}" if c.learning_rate else ""
        before = fine_before(series, c.first_step, n)
        task = (
            f"; held-out was {before[1]:.0%} at step {before[0]}, so the task is not too hard: the model broke"
            if before
            else ""
        )
        alerts.append(
            WatchAlert(
                COLLAPSE,
                f"the policy collapsed{rate}: " + "; ".join(c.evidence) + task,
                c.first_step,
                c.last_step,
                "likely cause: too high a learning rate, or too small a beta to hold the policy near the base. "
                "Start again (or fork from a checkpoint before these steps) with a learning rate about 10 times "
                "lower or a larger beta; the completions of these steps show what the model writes now.",
                holds_now=c.holds_now,
            )
        )
    return alerts


def watch(
    series: Mapping[str, Sequence], groups: Sequence[GroupStats] = (), heldout_size: int | None = None
) -> list[WatchAlert]:
    """Every reward-hacking sign a run showed, each stretch where it held, earliest first (``heldout_size``: the
    number of held-out problems each evaluation scored, for its noise; default ``HELDOUT_SIZE``)."""
    n = heldout_size or HELDOUT_SIZE
    switched = switched_on(series)
    breaks = sorted(set(switched.values()))
    alerts = (
        collapse_alerts(series, n)
        + heldout_falls(series, n)
        + reward_outruns_heldout(series, n, breaks)
        + shaping_saturates(series, switched)
        + length_tracks_reward(series, breaks)
        + diversity_collapses(groups)
        + reward_jumps(series)
    )
    return sorted(alerts, key=lambda a: (a.first_step, a.name))


def nearest_checkpoint(checkpoints: Sequence[int], step: int) -> int | None:
    """The checkpoint step closest to ``step`` (the earlier one on a tie: it holds the model before what followed)."""
    if not checkpoints:
        return None
    return min(checkpoints, key=lambda c: (abs(c - step), c))
