"""The learning views' pure parts on literal rows (issue 31): the learning map's classes, the reward-hacking watch's
signs with the steps they cover, the float16 packing of token values, which completions keep token values, and the
figures and text built from them. The same parts on a real run: tests/insight/test_learning_views.py."""

from __future__ import annotations

import math

import pytest

from app.cli.prompts import map_text
from app.web.widgets.charts_learning import learning_heatmap, signal_figure, token_html
from storage.learning import GroupStats, HeldOutPoint, ScoredSample, TokenValues, pack_values, token_row, unpack_values
from trainer.insight.learning_map import (
    ALWAYS,
    FORGETTING,
    LEARNING,
    LEARNT,
    MOSTLY,
    NEVER,
    SEEN_ONCE,
    Visit,
    build_map,
    classify,
    moved,
    signal_shares,
)
from trainer.insight.report import LearningReport
from trainer.insight.watch import (
    diversity_collapses,
    length_tracks_reward,
    nearest_checkpoint,
    reward_jumps,
    reward_outruns_heldout,
    shaping_saturates,
    watch,
)
from trainer.job.token_capture import chosen_indices


def visits(*solved: int, n: int = 8) -> list[Visit]:
    return [Visit(step, n, s) for step, s in enumerate(solved, start=1)]


# --- the classes ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("solved", "expected"),
    [
        ((8, 8, 8), ALWAYS),
        ((8, 7), ALWAYS),  # solved at both visits: 7 of 8 at temperature 1 counts as solved (SOLVED = 0.85)
        ((8,), SEEN_ONCE),  # one visit is no trend, however well it went
        ((0,), SEEN_ONCE),
        ((2, 5, 7, 8, 7), LEARNT),  # unsolved at its first visit, solved at its latest three
        ((0, 8), LEARNT),  # with one visit after the first, that one says where it is now
        ((2, 8, 8, 5), LEARNING),  # its latest visit missed: not learnt yet
        ((8, 8, 5, 8, 8, 8, 8, 7, 8), MOSTLY),  # an easy prompt with one unlucky group: neither always nor learnt
        ((7, 2, 3, 5, 4, 6, 8, 8, 8), LEARNT),  # a lucky first group does not make it "solved before"
        ((0, 0, 0, 0), NEVER),
        ((0, 2, 3, 5), LEARNING),
        ((8, 8, 8, 2, 1, 2), FORGETTING),
        ((8, 3, 8, 5, 4, 5), LEARNING),  # one lucky visit is no level to fall from: the best stretch is 6.3/8
        ((1, 0, 0, 0), LEARNING),  # right once: not "never"; not enough history to be forgetting
    ],
)
def test_a_prompt_is_classed_by_its_visits(solved, expected):
    assert classify(visits(*solved)) == expected


def test_classify_refuses_a_prompt_never_seen():
    with pytest.raises(ValueError, match="no visits"):
        classify([])


def sample(step, prompt, correct, total=None, group=0):
    return ScoredSample(
        step, group, prompt, {"correctness": correct, "xmlcount": 0.5}, total if total is not None else correct + 0.5
    )


def test_the_map_moves_a_prompt_from_learning_to_learnt():
    """One prompt half solved in its first visits and fully in its last three; one solved from the start; one never.
    As of step 3 the first is learning, at the end learnt (it was not solved at first: always solved would be a
    claim the rows don't make), and moved() says so."""
    rows = []
    for step, right in enumerate([2, 4, 5, 8, 8, 8], start=1):
        rows += [sample(step, "19 + 24", 2.0 if i < right else 0.0) for i in range(8)]
        rows += [sample(step, "3 + 4", 2.0, group=1) for _ in range(8)]
        rows += [sample(step, "99 - 98", 0.0, group=2) for _ in range(8)]
    early, late = build_map(rows, upto=3), build_map(rows)
    assert early.line("19 + 24").cls == LEARNING and late.line("19 + 24").cls == LEARNT
    assert late.line("3 + 4").cls == ALWAYS and late.line("99 - 98").cls == NEVER
    assert moved(early, late) == {(LEARNING, LEARNT): ["19 + 24"]}
    assert [v.rate for v in late.line("19 + 24").visits] == [0.25, 0.5, 0.625, 1.0, 1.0, 1.0]
    assert late.counts() == {LEARNING: 0, FORGETTING: 0, LEARNT: 1, SEEN_ONCE: 0, NEVER: 1, MOSTLY: 0, ALWAYS: 1}
    # only the 19 + 24 group disagreed, in its first three steps: a third of the groups carried signal there
    assert early.signal == {1: pytest.approx(1 / 3), 2: pytest.approx(1 / 3), 3: pytest.approx(1 / 3)}
    assert [ln.prompt for ln in early.frontier] == ["19 + 24"] and late.frontier == []


def test_held_out_problems_are_classed_from_their_greedy_results():
    points = [HeldOutPoint(step, 0, "What is 19 + 6?", c) for step, c in ((0, 0.0), (10, 1.0), (20, 1.0))]
    points += [HeldOutPoint(step, 1, "What is 2 + 2?", 1.0) for step in (0, 10, 20)]
    points += [HeldOutPoint(step, 2, "What is 7 + 8?", c) for step, c in ((0, 1.0), (10, 1.0), (20, 0.0))]
    at_0, at_10, at_20 = build_map([], points, upto=0), build_map([], points, upto=10), build_map([], points)
    assert at_0.line("What is 19 + 6?", "held-out").cls == SEEN_ONCE
    # wrong before training, right now: learnt, from the first evaluation that has it right
    assert at_10.line("What is 19 + 6?", "held-out").cls == LEARNT
    assert at_20.line("What is 19 + 6?", "held-out").cls == LEARNT
    assert at_20.line("What is 7 + 8?", "held-out").cls == FORGETTING  # right before, wrong now
    assert at_20.counts("held-out") == {
        LEARNING: 0,
        FORGETTING: 1,
        LEARNT: 1,
        SEEN_ONCE: 0,
        NEVER: 0,
        MOSTLY: 0,
        ALWAYS: 1,
    }


def test_without_a_correctness_reward_the_best_total_counts_as_solved():
    rows = [ScoredSample(1, 0, "p", {"brevity": v}, v) for v in (-0.4, -0.2, -0.2, -0.6)]
    assert build_map(rows).line("p").visits[0].solved == 2


def test_signal_share_counts_groups_whose_rewards_differed():
    rows = [sample(1, "a", 2.0), sample(1, "a", 0.0), sample(1, "b", 2.0, group=1), sample(1, "b", 2.0, group=1)]
    assert signal_shares(rows) == {1: 0.5}


# --- the watch ------------------------------------------------------------------------------------------------------
def steady(values):
    return [(step, v) for step, v in enumerate(values, start=1)]


def test_reward_rising_while_heldout_stays_flat_is_flagged_over_the_steps_it_covers():
    reward = steady([0.5 + 0.05 * s + (0.01 if s % 2 else -0.01) for s in range(1, 21)])
    series = {"reward": reward, "heldout/correct": [(0, 0.30), (5, 0.31), (10, 0.30), (15, 0.29), (20, 0.30)]}
    (alert,) = reward_outruns_heldout(series)
    assert (alert.name, alert.first_step, alert.last_step) == ("reward outruns held-out", 0, 20)
    assert "30% to 30%" in alert.message and alert.hint.endswith(".")


def test_reward_rising_with_heldout_is_not_flagged():
    reward = steady([0.5 + 0.05 * s for s in range(1, 21)])
    series = {"reward": reward, "heldout/correct": [(0, 0.3), (5, 0.4), (10, 0.5), (15, 0.6), (20, 0.7)]}
    assert reward_outruns_heldout(series) == []


def test_a_noisy_flat_reward_is_not_a_rise():
    reward = steady([0.5 + (0.3 if s % 2 else -0.3) for s in range(1, 21)])
    series = {"reward": reward, "heldout/correct": [(0, 0.3), (10, 0.3), (20, 0.3)]}
    assert reward_outruns_heldout(series) == []


def test_a_shaping_reward_climbing_to_its_ceiling_while_correctness_stalls():
    xml = steady([0.1 * s for s in range(1, 6)] + [0.5] * 7)  # 0.1 .. 0.5, then flat at 0.5 from step 5
    series = {"rewards/xmlcount/mean": xml, "heldout/correct": [(0, 0.4), (6, 0.41), (12, 0.40)]}
    (alert,) = shaping_saturates(series)
    assert (alert.first_step, alert.last_step) == (5, 12) and "xmlcount" in alert.message
    # saturated from the first step: not news
    assert shaping_saturates({**series, "rewards/xmlcount/mean": steady([0.5] * 12)}) == []
    # correctness still rising beside it: fine
    assert shaping_saturates({**series, "heldout/correct": [(0, 0.4), (6, 0.5), (12, 0.6)]}) == []


def test_length_rising_with_reward_is_flagged():
    series = {
        "completions/mean_length": steady([20 + 2 * s for s in range(10)]),
        "reward": steady([0.1 * s + (0.02 if s % 3 == 0 else 0.0) for s in range(10)]),
    }
    (alert,) = length_tracks_reward(series)
    assert (alert.first_step, alert.last_step) == (1, 10)
    # recomputed: steps 1-5 are 20..28 tokens (mean 24, variance 10), 6-10 are 30..38 (34, 10); the difference's
    # standard error sqrt(10/5 + 10/5) = 2, so +10 tokens is 5.0 of them
    assert alert.message.startswith("completions grew from 24.0 to 34.0 tokens (+42 %, 5.0 standard errors above")
    series["reward"] = steady([0.5 + (0.1 if s % 2 else -0.1) for s in range(10)])
    assert length_tracks_reward(series) == []


def test_length_moving_within_its_noise_beside_a_rising_reward_is_not_flagged():
    """Issue 57: a length-only reward's run kept its completions at 35-38 tokens while the reward rose, and was told
    they "grew from 36 to 36": a correlation alone is no growth."""
    lengths = [35.0, 36.0, 35.5, 37.0, 36.0, 36.5, 35.5, 38.0, 36.0, 37.5]
    reward = [0.1 * s + 0.3 * (length - 36) for s, length in enumerate(lengths)]  # correlated, as a length reward is
    series = {"completions/mean_length": steady(lengths), "reward": steady(reward)}
    xs, ys = lengths, reward
    mx, my = sum(xs) / 10, sum(ys) / 10
    r = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.sqrt(
        sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys)
    )
    assert r >= 0.8  # the old rule's only test passes: this is the case it cried wolf on
    assert length_tracks_reward(series) == []


def test_groups_collapsing_onto_one_answer_are_flagged():
    groups = [GroupStats(step, 0, 8, 8 if step <= 5 else 2, 40.0) for step in range(1, 13)]
    (alert,) = diversity_collapses(groups)
    assert (alert.first_step, alert.last_step) == (6, 12) and "100% to 14%" in alert.message


def test_a_reward_jumping_beyond_its_history_is_flagged_at_that_step():
    values = [0.5 + (0.01 if s % 2 else -0.01) for s in range(15)]
    values[12] = 1.5
    (alert,) = reward_jumps({"rewards/strict_format/mean": steady(values)})
    assert (alert.first_step, alert.last_step) == (13, 13) and alert.steps == "step 13"
    assert reward_jumps({"rewards/strict_format/mean": steady([0.5] * 15)}) == []


def test_watch_lists_every_sign_earliest_first_and_names_the_nearest_checkpoint():
    series = {
        "reward": steady([0.5 + 0.05 * s for s in range(1, 21)]),
        "heldout/correct": [(0, 0.3), (10, 0.3), (20, 0.3)],
        "completions/mean_length": steady([20 + 2 * s for s in range(20)]),
    }
    alerts = watch(series)
    assert [a.name for a in alerts] == ["reward outruns held-out", "length tracks reward"]
    assert nearest_checkpoint([4, 8, 12, 16, 20], 10) == 8 and nearest_checkpoint([], 10) is None


# --- token values ---------------------------------------------------------------------------------------------------
def test_token_values_pack_as_float16_and_round_trip_to_three_digits():
    values = [-0.0004, -2.3026, -11.5, 0.0]
    blob = pack_values(values)
    assert len(blob) == 8
    assert unpack_values(blob) == pytest.approx(values, rel=1e-3, abs=1e-6)
    assert unpack_values(None) is None


def test_a_token_row_refuses_values_that_do_not_match_its_tokens():
    with pytest.raises(ValueError, match="2 tokens but 1 log-probabilities"):
        token_row(1, 1, 0, ["a", "b"], [-0.1])


def test_the_best_and_worst_answer_of_each_group_keep_token_values_first():
    rows = [{"group_index": i // 4, "advantage": a} for i, a in enumerate([0.1, 1.2, -1.0, -0.3, 0.5, -0.5, 1.5, -1.5])]
    assert chosen_indices(rows, 4) == [1, 2, 6, 7]
    # interleaved: a quota of two is the first group's best and worst (issue 34: bests first kept only winners)
    assert chosen_indices(rows, 2) == [1, 2]
    assert chosen_indices(rows, 20) == list(range(8))


def test_groups_that_scored_alike_come_after_every_disagreeing_groups_pair():
    """The demo's shape: 8 groups a step, 8 views kept, most groups all right (advantage 0 throughout). The kept views
    are the best and the worst of each disagreeing group: as many negative advantages as positive ones."""
    advantages = {0: [0.0] * 4, 1: [0.9, -0.9, 0.3, -0.3], 2: [0.0] * 4, 3: [1.5, -0.5, -0.5, -0.5]}
    advantages |= {g: [0.0] * 4 for g in range(4, 8)}
    rows = [{"group_index": g, "advantage": a} for g in range(8) for a in advantages[g]]
    chosen = chosen_indices(rows, 8)
    # rows 4, 5 and 12, 13: the best and the worst of groups 1 and 3; then the first answer of the all-alike groups
    # 0, 2, 4 and 5 (rows 0, 8, 16, 20), in group order, up to the quota
    assert chosen == [0, 4, 5, 8, 12, 13, 16, 20]
    picked = [rows[i]["advantage"] for i in chosen]
    assert sum(a < 0 for a in picked) == sum(a > 0 for a in picked) == 2


def test_token_html_colours_each_token_by_its_probability():
    values = TokenValues(3, 5, ["<answer>", "\n", "25"], [-0.01, -0.02, -2.3], [0.1, 0.05, 1.9], [-0.02, -0.02, -0.4])
    page = token_html(values, 0.707)
    assert page.count('class="tok"') == 3 and "advantage +0.707" in page
    assert "&lt;answer&gt;" in page and "↵<br>" in page
    assert 'data-logprob="-2.3000"' in page and "reference log p -0.400" in page
    assert "rgb(255,51,51)" in page  # p = 0.10: red, a fifth of the way to white


# --- figures and text -----------------------------------------------------------------------------------------------
def two_prompt_map():
    rows = []
    for step in (1, 2, 3, 4):
        rows += [sample(step, "hard", 2.0 if i < step else 0.0) for i in range(4)]
        rows += [sample(step, "easy", 2.0, group=1) for _ in range(4)]
    return build_map(rows, [HeldOutPoint(0, 0, "held", 1.0), HeldOutPoint(4, 0, "held", 1.0)])


def test_the_heat_map_draws_each_prompt_sorted_by_class_with_its_pass_rates():
    figure = learning_heatmap(two_prompt_map())
    trace = figure.data[0]
    assert list(trace.x) == [0, 1, 2, 3, 4]
    assert trace.y[0].startswith("↗ hard") and trace.y[1].startswith("✓ easy") and "[held-out] held" in trace.y[2]
    assert [list(r) for r in trace.z] == [
        [None, 0.25, 0.5, 0.75, 1.0],
        [None, 1.0, 1.0, 1.0, 1.0],
        [1.0, None, None, None, 1.0],
    ]
    assert "1 learning" in figure.layout.title.text and "1 always solved" in figure.layout.title.text
    assert list(signal_figure(two_prompt_map()).data[0].y) == [0.5, 0.5, 0.5, 0.0]


def test_the_prompts_command_text_lists_classes_frontier_and_alerts():
    lm = two_prompt_map()
    series = {"reward": steady([0.5 + 0.05 * s for s in range(1, 21)]), "heldout/correct": [(0, 0.3), (20, 0.3)]}
    text = map_text(LearningReport(7, "demo", lm, watch(series), [10, 20]))
    assert text.splitlines()[0] == "run 7 (demo): the learning map as of step 4"
    assert (
        "train prompts: 1 learning, 0 forgetting, 0 learnt, 0 seen once, 0 never solved, 0 mostly solved, 1 always solved"
        in text
    )
    assert "  learning      |▂▄▆█| 100%  hard" in text
    assert (
        "held-out prompts: 0 learning, 0 forgetting, 0 learnt, 0 seen once, 0 never solved, 0 mostly solved, 1 always solved"
        in text
    )
    assert "frontier (learning now, the latest group disagreed): 0 prompts" in text
    assert "⚠ reward outruns held-out (steps 0-20)" in text and "nearest checkpoint: step 20" in text
    assert math.isfinite(lm.signal[4])


def test_the_prompts_command_text_sums_up_the_curriculum():
    order = [
        (1, ["a", "b"], [{"question": "c", "reason": "solved"}]),
        (2, ["c", "a"], [{"question": "b", "reason": "never solved"}]),
    ]
    text = map_text(LearningReport(3, "cur", two_prompt_map(), [], [], order))
    assert "curriculum: 2 draws skipped over 2 steps (1 solved, 1 never solved)" in text
    assert "curriculum" not in map_text(LearningReport(3, "cur", two_prompt_map()))


# --- the writer -----------------------------------------------------------------------------------------------------
def test_the_writer_stores_token_and_heldout_rows_through_its_held_rows(tmp_path):
    """Rows of the learning tables go through the worker's writer like samples do: held, spilled to its file as JSON
    (the blobs base64), replayed in order and committed; an unknown table is refused with the ones it takes."""
    from storage import learning, queries
    from storage.db import get_sessionmaker
    from trainer.job.db_writer import DbWriter
    from trainer.job.held_rows import HeldRows

    with get_sessionmaker().begin() as s:
        run_id = queries.create_run(s, "w", {}).id
    row = token_row(run_id, 2, 5, ["<answer>", "7"], [-0.5, -0.01], [1.2, 0.1], None)
    held = HeldRows(tmp_path / "held.jsonl", memory_rows=0)
    held.add(("rows", ["sample_tokens", [row]]))
    assert held.rows == 1 and held.spill() and held.items() == [("rows", ["sample_tokens", [row]])]
    writer = DbWriter(run_id, flush_interval=0.01)
    writer.rows("sample_tokens", [row])
    writer.rows("heldout_results", [{"run_id": run_id, "step": 0, "problem": 3, "question": "q", "correct": 1.0}])
    with pytest.raises(ValueError, match="no table 'samples' for the writer; expected one of sample_tokens"):
        writer.rows("samples", [row])
    writer.close()
    with get_sessionmaker().begin() as s:
        values = learning.token_values(s, run_id, 2, 5)
        points = learning.heldout_points(s, run_id)
    assert values.tokens == ["<answer>", "7"] and values.ref_logprobs is None
    assert values.logprobs == pytest.approx([-0.5, -0.01], rel=1e-3)
    assert points == [HeldOutPoint(0, 3, "q", 1.0)]


def test_a_single_pass_runs_frontier_is_its_latest_steps_prompts_whose_group_disagreed():
    """Issue 57.6: every prompt seen once (the demo's 800), the frontier was always empty; it is now the prompts seen
    once in the latest FRONTIER_STEPS steps whose group disagreed."""
    from trainer.insight.learning_map import FRONTIER_STEPS

    rows = []
    for step in range(1, 16):
        rows += [sample(step, f"split {step}", 2.0 if i < 4 else 0.0) for i in range(8)]  # disagrees
        rows += [sample(step, f"alike {step}", 2.0, group=1) for _ in range(8)]  # all right: no signal
    lm = build_map(rows)
    assert lm.counts()[SEEN_ONCE] == 30
    assert [ln.prompt for ln in lm.frontier] == [f"split {s}" for s in range(16 - FRONTIER_STEPS, 16)]
    assert [ln.prompt for ln in build_map(rows, upto=3).frontier] == ["split 1", "split 2", "split 3"]
