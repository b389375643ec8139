"""Held-out means held out (issue 24): whatever the split, the fraction or the data set, the problems evaluation
scores are none of the problems the run trains on (compared by whitespace- and case-normalised question text), and a
config whose data has no such problems is refused rather than evaluated on its training set."""

from __future__ import annotations

import json

import pytest

from trainer import review
from trainer.config import RunConfig
from trainer.evaluation.evaluate import EvaluationError, heldout_for, heldout_problems
from trainer.loading import heldout as heldout_module
from trainer.loading.data import DataError, Problem, build_dataset
from trainer.loading.heldout import question_key

SPLITS = ("train", "test", "heldout", "validation")  # every split builtin:arithmetic accepts


def trained_and_held(config: RunConfig) -> tuple[set[str], set[str]]:
    """The normalised questions the run trains on (its real training data set) and those evaluation scores."""
    trained = {question_key(q) for q in build_dataset(config)["question"]}
    held = {question_key(p.question) for p in heldout_problems(config, 10**6)}
    return trained, held


@pytest.mark.parametrize("fraction", [0.0, 0.25])
@pytest.mark.parametrize("split", SPLITS)
def test_arithmetic_heldout_is_disjoint_from_training_for_every_split(split, fraction):
    config = RunConfig(dataset_name="builtin:arithmetic", dataset_split=split, heldout_fraction=fraction)
    trained, held = trained_and_held(config)
    assert trained and held and not trained & held
    record = heldout_for(config, 10**6).record()
    assert record["source"] == ("heldout_fraction" if fraction else "split")
    assert record["split"] != split or fraction  # from another split, or carved out of this one


def test_a_run_on_test_is_evaluated_on_train_not_on_itself():
    """The case issue 24 counted: a run on "test" was scored on the 200 problems it trained on."""
    held = heldout_for(RunConfig(dataset_name="builtin:arithmetic", dataset_split="test"), 200)
    assert held.split == "train" and len(held.problems) == 200
    for alias in ("validation", "heldout"):  # the test split under other names: no held-out split for each other
        assert heldout_for(RunConfig(dataset_name="builtin:arithmetic", dataset_split=alias), 1).split == "train"


def test_a_local_file_is_disjoint_even_with_near_duplicate_questions(tmp_path):
    """A file holding each question twice, once re-spaced and re-cased: the fraction's hash may put the twins on
    different sides, and the held-out side must still contain no question the run trains on."""
    rows = [(f"What is {i} + 1?", str(i + 1)) for i in range(300)]
    rows += [(f"  what IS {i}  +  1? ", str(i + 1)) for i in range(300)]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows))
    config = RunConfig(dataset_name=str(path), heldout_fraction=0.25)
    trained, held = trained_and_held(config)
    assert held and not trained & held
    assert heldout_for(config, 10**6).dropped > 0  # twins split by the hash were found and left out


def test_a_local_file_without_a_fraction_is_refused(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "q", "answer": "1"}\n')
    with pytest.raises(EvaluationError, match="single local file"):
        heldout_problems(RunConfig(dataset_name=str(path)), 10)


def fake_hub(monkeypatch, splits: dict[str, list[str]]) -> None:
    """Serve a hub data set's splits from memory; a split not in ``splits`` does not exist."""

    def load(config, split=None, limit=None):
        split = split or config.dataset_split
        if split not in splits:
            raise DataError(f"Unknown split {split!r}")
        return [Problem(q, "1") for q in splits[split]]

    monkeypatch.setattr(heldout_module, "load_problems", load)


def test_hub_splits_that_share_rows_lose_the_shared_ones(monkeypatch):
    """Split names are not trusted: a test split that repeats training questions is scored without them, and a run
    on "test" is scored on the training split minus the questions they share."""
    fake_hub(monkeypatch, {"train": ["a", "b", "c"], "test": ["B ", "d"]})
    on_train = heldout_for(RunConfig(dataset_name="someone/data"), 10)
    assert [p.question for p in on_train.problems] == ["d"] and (on_train.split, on_train.dropped) == ("test", 1)
    on_test = heldout_for(RunConfig(dataset_name="someone/data", dataset_split="test"), 10)
    assert [p.question for p in on_test.problems] == ["a", "c"] and on_test.split == "train"


def test_hub_data_whose_other_splits_repeat_the_training_one_is_refused(monkeypatch):
    fake_hub(monkeypatch, {"train": ["a", "b"], "validation": ["a", "b"]})
    with pytest.raises(EvaluationError, match="holds only questions of 'train'") as caught:
        heldout_problems(RunConfig(dataset_name="someone/data"), 10)
    assert "'test': Unknown split" in str(caught.value) and "heldout_fraction" in str(caught.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"dataset_name": "builtin:code"}, "builtin:code has no held-out problems"),
        ({"dataset_name": "builtin:code", "heldout_fraction": 0.01}, "keeps no row of builtin:code out of training"),
    ],
)
def test_validation_refuses_eval_steps_on_data_without_heldout_problems(overrides, message):
    problems = review.problems(RunConfig(eval_steps=10, **overrides), check_rewards=False)
    assert [p for p in problems if "eval_steps 10: no held-out problems" in p and message in p], problems
    assert not [
        p for p in review.problems(RunConfig(eval_steps=0, **overrides), check_rewards=False) if "held-out" in p
    ]


def test_validation_refuses_eval_steps_on_a_single_local_file(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "q", "answer": "1"}\n')
    problems = review.problems(RunConfig(dataset_name=str(path), eval_steps=10), check_rewards=False)
    assert [p for p in problems if "eval_steps 10" in p and "single local file" in p], problems
    fixed = review.problems(RunConfig(dataset_name=str(path), eval_steps=10, heldout_fraction=0.5), check_rewards=False)
    assert not [p for p in fixed if "held-out" in p]


def test_compare_offers_heldout_prompts_only():
    """Compare's data-set prompts are held-out ones: for a run on "test", problems of the training split it did not
    train on, and picking one fills in that problem."""
    from app.web.pages.compare import pick_example, run_details
    from tests.helpers import create_run, tiny_config

    config = tiny_config(dataset_split="test")
    run_id = create_run(config)
    _, examples = run_details(run_id)
    trained = {question_key(q) for q in build_dataset(config)["question"]}
    picked = [pick_example(run_id, index) for _, index in examples["choices"]]
    assert len(picked) == 20 and not {question_key(q) for q, _, _ in picked} & trained
    assert [(q, a) for q, a, _ in picked] == [(p.question, p.answer) for p in heldout_problems(config, 20)]
    assert all(pair == [q, a] for q, a, pair in picked)  # the pair Compare remembers (its reference's own prompt)


def test_the_periodic_curve_logs_where_its_problems_come_from():
    from tests.helpers import tiny_config
    from trainer.evaluation.periodic_eval import EVAL_PROBLEMS, make_heldout_callback

    lines: list[str] = []
    config = tiny_config(dataset_split="test", eval_steps=5)
    assert make_heldout_callback(config, lambda step, metrics: None, lines.append) is not None
    assert lines == [
        f"held-out evaluation every 5 steps on {EVAL_PROBLEMS} problems of split 'train', "
        "which the run does not train on"
    ]


def test_the_built_in_model_warns_when_heldout_problems_are_ones_its_warm_up_saw():
    from tests.helpers import tiny_config

    assert not [
        w for w in review.warnings(tiny_config()) if "warmed up on" in w
    ]  # the demo: train split, "test" held out
    for overrides in ({"dataset_split": "test"}, {"heldout_fraction": 0.2}):
        assert [w for w in review.warnings(tiny_config(**overrides)) if "held out of this run, not of the model" in w]


def test_eval_output_and_the_evaluation_page_say_where_the_problems_came_from():
    from app.cli.output import evaluation_lines
    from app.web.pages.evaluation import status_line
    from storage.models import Evaluation, RunStatus

    side = {"correct": 0.5, "pass_at_1": None, "format": 1.0, "mean_length": 10.0, "rewards": {}}
    origin = {"source": "split", "split": "train", "problems": 200, "dropped": 3}
    results = {"base": side, "tuned": side, "problems": 200, "split": "train", "heldout": origin}
    said = (
        "200 problems of split 'train', which the run does not train on "
        "(3 more left out: the run trains on the same question)"
    )
    assert evaluation_lines(results, 1, "final", 0)[1] == f"  ({said})"
    row = Evaluation(id=1, adapter="final", k=200, samples=0, status=RunStatus.COMPLETED, results=results)
    from app.web.widgets.verdict import verdict

    assert status_line(row).startswith(verdict("ok", "Finished:")) and status_line(row).endswith(f", on {said}")


def test_the_disjointness_key_reads_a_thousands_separator_as_no_difference():
    """Issue 34: "1,000" and "1000" kept the same question on both sides of the split; a comma that is no thousands
    separator still makes another question."""
    assert question_key("How many is 1,000 apples?") == question_key("how many is 1000  apples?")
    assert question_key("What is 2,5 + 1?") != question_key("What is 25 + 1?")


def test_a_run_on_a_test_or_validation_split_is_warned_whatever_the_model():
    """Issue 34: the warning that a run trains on the split held-out scores are read on was given for the built-in
    model only."""
    import dataclasses

    from tests.helpers import tiny_config
    from trainer.review.heldout import heldout_warnings

    hub = dataclasses.replace(tiny_config(), model_name_or_path="Qwen/Qwen2.5-0.5B-Instruct", dataset_name="gsm8k")
    for split in ("test", "validation"):
        (warning,) = heldout_warnings(dataclasses.replace(hub, dataset_split=split))
        assert warning.startswith(f"dataset_split {split!r}: this run trains on the data set's {split} split")
    assert heldout_warnings(hub) == []  # on "train"
