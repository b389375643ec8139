"""A .gguf file as a model source, refused in one sentence where transformers can't read it; the worked examples of a
prompt (few_shot_examples); builtin:word-problems, GSM8K's format generated offline. In process, nothing trains."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from trainer import review
from trainer.config import RunConfig
from trainer.config.examples import parse_examples
from trainer.loading import gguf
from trainer.loading.data import gsm8k_reference, load_problems, make_prompt
from trainer.loading.word_problems import EXAMPLES, HELDOUT, word_problem_rows, word_problem_split


def write_gguf(path, architecture: str, dtype="float32"):
    """A GGUF file of ``architecture`` with one small tensor, written by the gguf package's own writer."""
    import numpy as np
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), architecture)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=dtype))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def model_problems(model: str) -> list[str]:
    return [p for p in review.problems(RunConfig(model_name_or_path=model, dataset_name="builtin:arithmetic"))]


def test_an_architecture_transformers_cant_build_from_gguf_is_refused_naming_those_it_can(tmp_path):
    path = write_gguf(tmp_path / "encoder.gguf", "bert")
    (problem,) = [p for p in model_problems(str(path)) if "encoder.gguf" in p]
    assert "architecture 'bert'" in problem and "it can load" in problem
    assert "llama" in problem and "qwen2" in problem  # names what it can
    assert "t5" not in problem.split("it can load")[1]  # an encoder is no causal LM to train


def test_a_tensor_type_the_gguf_package_cant_dequantize_is_refused_naming_the_types_it_can(tmp_path, monkeypatch):
    path = write_gguf(tmp_path / "model.gguf", "llama")
    monkeypatch.setattr(gguf, "dequantizable_types", lambda: {"F16", "Q8_0"})
    problem = gguf.gguf_problem(str(path))
    assert problem.startswith(f"model {str(path)!r}: its tensors of type F32 can't be dequantized")
    assert "reads F16, Q8_0" in problem


def test_a_readable_llama_gguf_passes_the_check(tmp_path):
    assert gguf.gguf_problem(str(write_gguf(tmp_path / "model.gguf", "llama"))) is None


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "no such file"),
        (b"not a gguf file at all", "is not a readable GGUF file"),
    ],
)
def test_a_missing_or_unreadable_gguf_file_is_one_sentence(tmp_path, content, expected):
    path = tmp_path / "model.gguf"
    if content is not None:
        path.write_bytes(content)
    (problem,) = [p for p in model_problems(str(path)) if "model.gguf" in p]
    assert expected in problem and "\n" not in problem


def test_a_model_file_other_than_gguf_is_refused_as_a_file(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"weights")
    (problem,) = [p for p in model_problems(str(path)) if "model.safetensors" in p]
    assert problem.endswith("is a file: expected a model directory or a .gguf file")


def test_a_bare_gguf_name_is_a_path_never_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (problem,) = [p for p in model_problems("smollm.gguf") if "smollm.gguf" in p]
    assert problem == "model 'smollm.gguf': no such file"


def test_the_dashboard_reads_a_gguf_file_only_by_its_full_path_under_its_roots(tmp_path, studio_home):
    from trainer.config.access import Access

    inside = write_gguf(studio_home / "uploads-model.gguf", "llama")
    outside = write_gguf(tmp_path / "elsewhere.gguf", "llama")
    access = Access()
    assert access.value_problem("model_name_or_path", str(inside)) is None
    assert "local paths are limited to" in access.value_problem("model_name_or_path", str(outside))
    assert "full path" in access.value_problem("model_name_or_path", "model.gguf")


def test_the_cache_key_follows_the_files_size_and_time_not_its_name_alone(tmp_path):
    import os

    path = write_gguf(tmp_path / "model.gguf", "llama")
    first = gguf.cache_key(path)
    assert gguf.cache_key(path) == first
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # rewritten: same size, a later time
    assert gguf.cache_key(path) != first
    write_gguf(path, "llama", dtype="float16")  # replaced in place: another quantisation under the same name
    assert gguf.cache_key(path) not in (first,)


def fake_conversion(calls):
    """A stand-in for the conversion (transformers' dequantizing is the slow tests'): it records its call and writes
    what a finished folder holds."""

    def write(path, folder):
        calls.append(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text("{}")
        (folder / gguf.MARKER).write_text("{}")

    return write


def test_a_gguf_file_is_converted_once_and_its_folder_reused(tmp_path, studio_home, monkeypatch):
    calls = []
    monkeypatch.setattr(gguf, "_write_plain_model", fake_conversion(calls))
    path = write_gguf(tmp_path / "model.gguf", "llama")
    assert gguf.existing_dequantized(str(path)) is None  # a check never converts
    folder = gguf.dequantized_dir(str(path))
    assert folder.parent == studio_home / "cache" / "gguf" and (folder / "config.json").is_file()
    assert gguf.dequantized_dir(str(path)) == folder and len(calls) == 1
    assert gguf.existing_dequantized(str(path)) == folder
    assert not list(folder.parent.glob(".*"))  # no scratch folder left behind


def test_what_an_interrupted_conversion_left_is_cleared_by_the_next(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(gguf, "_write_plain_model", fake_conversion(calls))
    path = write_gguf(tmp_path / "model.gguf", "llama")
    target = gguf._target(str(path))
    target.mkdir(parents=True)  # a folder without its marker: a copy stopped half-way
    (target / "model.safetensors").write_text("half")
    dead = target.with_name(f".{target.name}-999999999")  # a scratch folder of a process that is gone
    dead.mkdir()
    assert gguf.dequantized_dir(str(path)) == target and len(calls) == 1
    assert not (target / "model.safetensors").exists() and not dead.exists()


def test_a_gguf_file_moved_after_its_run_is_one_sentence(tmp_path):
    with pytest.raises(gguf.GGUFError, match=r"^model '.*gone\.gguf': no such file \(moved or deleted"):
        gguf.dequantized_dir(str(tmp_path / "gone.gguf"))


def test_a_hub_model_loads_from_its_gguf_copy_only_where_it_is_not_cached(tmp_path, monkeypatch):
    """The choice reads this machine's files, never the hub's answer: the worker, Compare, evaluation and export
    load the same base."""
    from trainer.loading import backend

    model = "HuggingFaceTB/SmolLM2-135M-Instruct"
    copy = write_gguf(tmp_path / "copy.gguf", "llama")
    monkeypatch.setattr(backend, "offline_copy", lambda name: copy if name == model else None)
    monkeypatch.setattr(backend, "dequantized_dir", lambda name: tmp_path / f"plain-of-{Path(name).name}")
    monkeypatch.setattr(backend, "is_cached", lambda repo, kind: False)
    config = RunConfig(model_name_or_path=model)
    assert backend.model_path(config) == str(tmp_path / "plain-of-copy.gguf")
    monkeypatch.setattr(backend, "is_cached", lambda repo, kind: True)
    assert backend.model_path(config) == model  # the hub's own weights, from the cache
    assert (
        backend.model_path(RunConfig(model_name_or_path="Qwen/Qwen2.5-0.5B-Instruct")) == "Qwen/Qwen2.5-0.5B-Instruct"
    )


def test_checking_a_tool_run_on_a_gguf_model_neither_converts_nor_crashes(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(gguf, "_write_plain_model", fake_conversion(calls))
    for model in (str(tmp_path / "missing.gguf"), str(write_gguf(tmp_path / "model.gguf", "llama"))):
        config = RunConfig(model_name_or_path=model, dataset_name="builtin:arithmetic3", tools=["builtin:calculator"])
        problems = review.problems(config)
        assert all("no such file" in p for p in problems if model in p), problems
    assert calls == []


def test_a_hub_model_with_an_installed_gguf_copy_needs_no_hub_at_launch(monkeypatch, tmp_path):
    """Offline (HF_HUB_OFFLINE=1 in the suite), the preset's hub id is no fetch problem when its copy is installed,
    and is one when it is not."""
    from trainer.loading.hub import fetch_problem

    model = "HuggingFaceTB/SmolLM2-135M-Instruct"
    copy = write_gguf(tmp_path / "copy.gguf", "llama")
    monkeypatch.setattr(gguf, "offline_copy", lambda name: copy if name == model else None)
    assert fetch_problem(model, "builtin:word-problems") is None
    monkeypatch.setattr(gguf, "offline_copy", lambda name: None)
    assert "can't reach the Hugging Face Hub" in fetch_problem(model, "builtin:word-problems")


# --- worked examples --------------------------------------------------------------------------------------------------
def test_worked_examples_become_earlier_turns_of_the_chat_in_order():
    messages = make_prompt("What is 2 + 2?", "Be brief.", EXAMPLES)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"].startswith("Tom has 3 apples")
    assert messages[2]["content"] == (
        "<reasoning>\nTom has 3 apples and buys 4 more, so he has 3 + 4 = 7 apples.\n</reasoning>\n<answer>\n7\n"
        "</answer>"
    )
    assert messages[-1] == {"role": "user", "content": "What is 2 + 2?"}
    assert make_prompt("q", "s") == [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Q: one\nQ: two\nA: 2", "the question 'one' has no answer"),
        ("A: 2", "an answer (A:) comes before any question"),
        ("Q: one", "the question 'one' has no answer"),
        ("some words\nQ: one\nA: 1", "expected a line starting Q:"),
        ("Q:\nA: 2", "an empty question"),
        ("Q: one\nA:   \n", "an empty answer"),
    ],
)
def test_examples_that_are_not_question_answer_pairs_are_refused_saying_how(text, expected):
    with pytest.raises(ValueError, match=re.escape(expected)):
        parse_examples(text)
    problems = RunConfig(few_shot_examples=text).field_problems()
    assert any(expected in p for p in problems), problems


# --- builtin:word-problems ----------------------------------------------------------------------------------------
def test_word_problems_are_gsm8k_rows_whose_reference_is_what_the_question_asks():
    """Every row's worked line computes its ``####`` number, and the number is what the question's words ask for,
    recomputed here from the question's own numbers."""
    for row in word_problem_rows():
        question, answer = row["question"], row["answer"]
        reference = gsm8k_reference(answer)
        a, b = (int(n) for n in re.findall(r"\d+", question)[:2])
        if "more" in question or "in total" in question:
            expected = a + b
        elif "bags" in question:
            expected = a * b
        elif "equally" in question:
            expected = a // b
        else:
            expected = a - b
        assert reference == str(expected), row
        assert answer.endswith(f"#### {expected}") and f"={expected}>>{expected}" in answer


def test_the_presets_worked_examples_are_the_ones_written_for_word_problems():
    from trainer.presets import load_preset, resolve_preset

    assert load_preset(resolve_preset("smollm2-135m")).few_shot_examples == EXAMPLES


def test_word_problem_splits_are_disjoint_fixed_and_read_like_gsm8k():
    test, train = word_problem_split("test"), word_problem_split("train")
    assert len(test) == HELDOUT and len(train) == len(word_problem_rows()) - HELDOUT
    assert not {r["question"] for r in test} & {r["question"] for r in train}
    assert word_problem_split("test") == test  # the same draw every time
    config = dataclasses.replace(RunConfig(), dataset_name="builtin:word-problems")
    problems = load_problems(config, "test")
    assert [p.answer for p in problems[:3]] == [gsm8k_reference(r["answer"]) for r in test[:3]]
    examples = {q for q, _ in parse_examples(EXAMPLES)}
    assert not examples & {r["question"] for r in test + train}  # the prompt's examples are in neither split


def test_a_word_problem_split_that_does_not_exist_is_refused():
    from trainer.loading.data import DataError

    with pytest.raises(DataError, match="builtin:word-problems has splits train and test, not 'dev'"):
        load_problems(dataclasses.replace(RunConfig(), dataset_name="builtin:word-problems"), "dev")


def test_a_gguf_path_typed_into_the_form_validates_and_launches(studio_home, fresh_db):
    from app.web.pages import new_run
    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.config.access import Access
    from trainer.presets import load_preset, resolve_preset

    path = write_gguf(studio_home / "my-model.Q4_K_M.gguf", "llama")
    config = dataclasses.replace(load_preset(resolve_preset("smollm2-135m")), model_name_or_path=str(path))
    values = new_run.form_values(config)
    message, problems, run_id = new_run.launch_report(Access(), None, values)
    assert problems == [] and "Launched:" in message and f"Run {run_id} (**smollm2-135m**) queued" in message, message
    with get_sessionmaker().begin() as s:
        stored = queries.get_run(s, run_id).config
    assert stored["model_name_or_path"] == str(path) and stored["few_shot_examples"] == config.few_shot_examples
