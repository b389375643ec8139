"""Compare offers first the held-out problems whose answer training changed (base and tuned differ there), and labels
its two sides Base and Tuned before anything is sampled (issue 37, item 10)."""

from __future__ import annotations

from app.web.pages import compare
from storage.db import get_sessionmaker
from storage.learning import HeldOutPoint, add_heldout_rows
from tests.helpers import create_run, tiny_config
from trainer.evaluation.evaluate import heldout_problems


def test_changed_questions_compare_the_first_and_the_latest_evaluation():
    points = [
        HeldOutPoint(0, 0, "a", 0.0),
        HeldOutPoint(0, 1, "b", 1.0),
        HeldOutPoint(0, 2, "c", 0.0),
        HeldOutPoint(10, 0, "a", 1.0),  # learnt, then kept
        HeldOutPoint(10, 2, "c", 1.0),  # learnt, then forgotten
        HeldOutPoint(20, 0, "a", 1.0),
        HeldOutPoint(20, 1, "b", 0.0),  # forgotten: also a difference worth seeing
        HeldOutPoint(20, 2, "c", 0.0),
    ]
    assert compare.changed_questions(points) == {"a", "b"}
    assert compare.changed_questions(points[:3]) == set()  # the base alone: nothing to compare yet


def test_the_first_prompt_offered_is_one_training_changed():
    config = tiny_config()
    run_id = create_run(config)
    problems = heldout_problems(config, compare.HELDOUT_POOL)
    rows = [
        {"run_id": run_id, "step": step, "problem": i, "question": p.question, "correct": float(step and i in (37, 61))}
        for step in (0, 4)
        for i, p in enumerate(problems)
    ]
    with get_sessionmaker().begin() as session:
        add_heldout_rows(session, rows)
    _, examples = compare.run_details(run_id)
    offered = [index for _, index in examples["choices"]]
    assert offered[:3] == [37, 61, 0] and len(offered) == compare.EXAMPLES
    picked = (problems[37].question, problems[37].answer)
    assert compare.pick_example(run_id, offered[0]) == (*picked, list(picked))  # and the pair it remembers (issue 36)


def test_the_two_sides_are_labelled_before_sampling():
    import gradio as gr

    with gr.Blocks() as page:
        compare.build()
    texts = {c.elem_id: c.value for c in page.blocks.values() if isinstance(c, gr.Markdown) and c.elem_id}
    assert texts["compare-base-summary"].startswith("**Base**")
    assert texts["compare-tuned-summary"].startswith("**Tuned**")
