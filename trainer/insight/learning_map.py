"""The per-prompt learning map (issues 31 and 34): for every training prompt its pass rate each time it was sampled,
for every held-out problem its greedy result at each evaluation, and one class per prompt.

The classes, judged on a prompt's visits up to a step (so the map can be read "as of" any step, and a prompt can be
seen moving from one class to another). A visit is *solved* when at least ``SOLVED`` of its answers were right (7 of
8 at G = 8, G/G at G = 4: sampling at temperature 1 misses the odd answer of a learnt problem); a held-out problem's
evaluation is one greedy answer, solved when right. Each name says what the rows show, nothing more:

- **seen once**: one visit so far; its pass rate is all there is, and one visit is no trend (a training prompt of a
  run that sees each prompt once never gets another class).
- **always solved**: solved at every one of its visits (two at least). GRPO learns nothing from it: its groups score
  alike.
- **never solved**: no answer to it was ever right (two visits at least). No signal either, from the other end.
- **learnt**: a training prompt solved at its latest ``window`` visits (fewer when it has fewer after its first)
  whose visits before them were solved less than ``SOLVED`` of the time on average; a held-out problem wrong at its
  first evaluation (before training) and right at its latest. What the run taught. (An easy prompt with one unlucky
  visit among solved ones is not learnt.)
- **mostly solved**: solved at its latest ``window`` visits, and at least ``SOLVED`` of the time on average before,
  but not at every visit (an easy prompt with an unlucky group): not "always".
- **forgetting**: the mean of its latest ``window`` visits is well below (``FORGET_MARGIN``) its best stretch of
  ``window`` visits before (a held-out problem: right at an earlier evaluation, wrong now).
- **learning**: everything else: right sometimes, not yet every time, and not falling. These groups disagree, which is
  what GRPO's advantages feed on; those whose latest visit still carried signal are the **frontier**, and so are
  the prompts *seen once* in the latest ``FRONTIER_STEPS`` steps whose group disagreed (a single-pass run's).

"Solved" reads the run's correctness reward: the first reward whose name contains "correct" (the built-in
``correctness``, or a custom ``my_correct``), an answer passing when it scored above 0. A run without one counts an
answer as solved when its total reward is the best total of the run (a run without a verifier has no pass rate; the
best-seen total is the nearest thing to it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from storage.learning import HeldOutPoint, ScoredSample

ALWAYS, NEVER, LEARNING, FORGETTING = "always solved", "never solved", "learning", "forgetting"
LEARNT, SEEN_ONCE, MOSTLY = "learnt", "seen once", "mostly solved"
# the map's order: the prompts still moving first
CLASSES = (LEARNING, FORGETTING, LEARNT, SEEN_ONCE, NEVER, MOSTLY, ALWAYS)
WINDOW = 3  # a training prompt's latest visits that must all be solved to call it learnt: one lucky visit is not it
HELDOUT_WINDOW = 1  # a held-out problem's answer is greedy (no luck): its latest evaluation says where it is now
# the share of a group that counts as solving it: 7 of 8 answers sampled at temperature 1 is a solved prompt (the
# built-in model's easiest problems score 7/8 or 8/8 at random); with G = 4 it takes all four
SOLVED = 0.85
FORGET_MARGIN = 0.25  # how far below its best earlier pass rate a prompt's recent mean must fall to be forgetting
TRAIN, HELDOUT = "train", "held-out"
# A prompt seen once is on the frontier while its one group is among the latest 10 sampled steps (the health signs'
# window): its group disagreed, so GRPO learnt from it just now; older ones are history, not "now". On the demo
# (8 prompts a step, about 28 % of groups disagreeing) that was 22 prompts of a 100-step run, not its 359.
FRONTIER_STEPS = 10


@dataclass(frozen=True)
class Visit:
    """One time a prompt was sampled (a held-out problem: one evaluation): how many answers, how many solved, their
    mean total reward, and whether the group's rewards differed (a learning signal)."""

    step: int
    n: int
    solved: int
    mean_reward: float | None = None
    signal: bool = False

    @property
    def rate(self) -> float:
        """The share of answers solved."""
        return self.solved / self.n if self.n else 0.0


def classify(visits: Sequence[Visit], window: int = WINDOW, since_first: bool = False) -> str:
    """The class of a prompt with these visits (in step order); see the module docstring. ``since_first``: learnt
    means unsolved at the first visit (a held-out problem's first evaluation is the model before training), else
    mostly unsolved before the latest ``window`` (a training prompt's first group is sampled: 7 of 8 by luck on a
    problem the model still gets wrong half the time is no level it was at)."""
    if not visits:
        raise ValueError("a prompt with no visits has no class")
    if len(visits) == 1:
        return SEEN_ONCE
    rates = [v.rate for v in visits]
    if all(r >= SOLVED for r in rates):
        return ALWAYS
    if all(r <= 0.0 for r in rates):
        return NEVER
    k = min(window, len(rates) - 1)
    latest, before = rates[-k:], rates[:-k]
    mostly = sum(before) / len(before) >= SOLVED
    if all(r >= SOLVED for r in latest):
        if rates[0] < SOLVED if since_first else not mostly:
            return LEARNT
        if mostly:
            return MOSTLY
    recent, earlier = rates[-window:], rates[:-window]
    recent_mean = sum(recent) / len(recent)
    # the best stretch of ``window`` visits before, not the best single one: a lucky visit is no level to fall from
    stretches = [earlier[i : i + window] for i in range(max(1, len(earlier) - window + 1))] if earlier else []
    if stretches and recent_mean <= max(sum(s) / len(s) for s in stretches) - FORGET_MARGIN:
        return FORGETTING
    return LEARNING


@dataclass(frozen=True)
class PromptLine:
    """One row of the map: a prompt (``source`` train or held-out), its visits and its class."""

    prompt: str
    source: str
    visits: tuple[Visit, ...]
    cls: str

    @property
    def cells(self) -> dict[int, float]:
        """Pass rate by step."""
        return {v.step: v.rate for v in self.visits}


@dataclass
class LearningMap:
    """Every prompt's line sorted by class, each step's share of groups that carried signal, and the frontier."""

    lines: list[PromptLine] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    signal: dict[int, float] = field(default_factory=dict)  # step → share of its groups whose rewards differed
    upto: int | None = None

    def counts(self, source: str = TRAIN) -> dict[str, int]:
        """How many prompts of ``source`` are in each class (every class named, 0 included)."""
        out = dict.fromkeys(CLASSES, 0)
        for line in self.lines:
            if line.source == source:
                out[line.cls] += 1
        return out

    @property
    def frontier(self) -> list[PromptLine]:
        """Training prompts being learnt now, their latest visit's group disagreed: class learning, or seen once at
        one of the map's latest ``FRONTIER_STEPS`` steps (a run that samples each prompt once has no other class, and
        its frontier was always empty: issue 57)."""
        sampled = sorted({v.step for ln in self.lines if ln.source == TRAIN for v in ln.visits})
        recent = set(sampled[-FRONTIER_STEPS:])
        return [
            ln
            for ln in self.lines
            if ln.source == TRAIN
            and ln.visits[-1].signal
            and (ln.cls == LEARNING or (ln.cls == SEEN_ONCE and ln.visits[-1].step in recent))
        ]

    def line(self, prompt: str, source: str = TRAIN) -> PromptLine | None:
        """The line of one prompt, or None when it was never seen (up to ``upto``)."""
        return next((ln for ln in self.lines if ln.prompt == prompt and ln.source == source), None)


def pass_key(samples: Iterable[ScoredSample]) -> str | None:
    """The reward that says whether an answer is right: the first whose name contains "correct", else None."""
    for sample in samples:
        for name in sample.rewards:
            if "correct" in name.lower():
                return name
        return None
    return None


def train_visits(samples: Sequence[ScoredSample]) -> dict[str, list[Visit]]:
    """Each training prompt's visits, in step order: a prompt sampled in two groups of one step is one visit."""
    key = pass_key(samples)
    best = max((s.total_reward for s in samples if s.total_reward is not None), default=None)

    def solved(s: ScoredSample) -> bool:
        if key is not None:
            value = s.rewards.get(key)
            return value is not None and value > 0
        return s.total_reward is not None and best is not None and s.total_reward >= best - 1e-9

    answers: dict[tuple[str, int], list[ScoredSample]] = defaultdict(list)
    for s in samples:
        answers[(s.prompt, s.step)].append(s)
    out: dict[str, list[Visit]] = defaultdict(list)
    for (prompt, step), group in sorted(answers.items(), key=lambda kv: kv[0][1]):
        totals = [s.total_reward for s in group if s.total_reward is not None]
        out[prompt].append(
            Visit(
                step,
                len(group),
                sum(1 for s in group if solved(s)),
                sum(totals) / len(totals) if totals else None,
                bool(totals) and max(totals) - min(totals) > 1e-9,
            )
        )
    return dict(out)


def heldout_visits(points: Sequence[HeldOutPoint]) -> dict[str, list[Visit]]:
    """Each held-out problem's evaluations, in step order (one greedy answer each)."""
    out: dict[str, list[Visit]] = defaultdict(list)
    for p in sorted(points, key=lambda p: (p.step, p.problem)):
        out[p.question].append(Visit(p.step, 1, 1 if p.correct > 0 else 0, p.correct))
    return dict(out)


def signal_shares(samples: Sequence[ScoredSample]) -> dict[int, float]:
    """For each step, the share of its groups whose total rewards differed (a group that scored alike teaches
    nothing: its advantages are all 0)."""
    groups: dict[tuple[int, int], list[float]] = defaultdict(list)
    for s in samples:
        if s.total_reward is not None:
            groups[(s.step, s.group_index)].append(s.total_reward)
    by_step: dict[int, list[bool]] = defaultdict(list)
    for (step, _), totals in groups.items():
        by_step[step].append(max(totals) - min(totals) > 1e-9)
    return {step: sum(flags) / len(flags) for step, flags in sorted(by_step.items())}


def build_map(
    samples: Sequence[ScoredSample],
    heldout: Sequence[HeldOutPoint] = (),
    upto: int | None = None,
    window: int = WINDOW,
    heldout_window: int = HELDOUT_WINDOW,
) -> LearningMap:
    """The learning map of a run's rows as of step ``upto`` (None: the latest)."""
    if upto is not None:
        samples = [s for s in samples if s.step <= upto]
        heldout = [p for p in heldout if p.step <= upto]
    lines = [PromptLine(p, TRAIN, tuple(v), classify(v, window)) for p, v in train_visits(samples).items()]
    lines += [
        PromptLine(p, HELDOUT, tuple(v), classify(v, heldout_window, since_first=True))
        for p, v in heldout_visits(heldout).items()
    ]
    order = {cls: i for i, cls in enumerate(CLASSES)}
    lines.sort(key=lambda ln: (ln.source != TRAIN, order[ln.cls], ln.visits[0].step, ln.prompt))
    steps = sorted({v.step for ln in lines for v in ln.visits})
    return LearningMap(lines, steps, signal_shares(samples), upto)


def moved(before: LearningMap, after: LearningMap, source: str = TRAIN) -> dict[tuple[str, str], list[str]]:
    """Prompts whose class changed between two maps of one run, by (class before, class after)."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for line in after.lines:
        if line.source != source:
            continue
        old = before.line(line.prompt, source)
        if old is not None and old.cls != line.cls:
            out[(old.cls, line.cls)].append(line.prompt)
    return dict(out)
