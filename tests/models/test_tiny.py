"""The built-in model: its tokenizer survives a save/load round trip, and the model answers in the format."""

from __future__ import annotations

import json

import pytest

from trainer.loading.tiny import CHAT_TEMPLATE, build_tokenizer

SAMPLES = [
    "<reasoning>\n12 + 19 = 31\n</reasoning>\n<answer>\n31\n</answer>",
    "  two  spaces,\ttabs\n\n\nand blank lines  ",
    "unicode: ² ½ é 漢字 🙂",
    "<|im_start|>user\nWhat is 3 - 1?<|im_end|>\n",
]


def test_tokenizer_round_trips_through_save_pretrained(tmp_path):
    from transformers import AutoTokenizer

    built = build_tokenizer()
    built.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    for text in SAMPLES:
        ids = built(text, add_special_tokens=False)["input_ids"]
        assert loaded(text, add_special_tokens=False)["input_ids"] == ids
        assert loaded.decode(ids) == text  # newlines, spaces and unicode come back unchanged
    assert (loaded.eos_token, loaded.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert loaded.chat_template == CHAT_TEMPLATE
    assert len(loaded) == len(built)


def test_format_tags_are_whole_tokens_that_survive_skipping_special_tokens():
    tok = build_tokenizer()
    for tag in ("<reasoning>", "</reasoning>", "<answer>", "</answer>"):
        ids = tok(tag, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1
        assert tok.decode(ids, skip_special_tokens=True) == tag
    assert tok.decode(tok("<|im_end|>", add_special_tokens=False)["input_ids"], skip_special_tokens=True) == ""


def test_digits_are_single_tokens():
    tok = build_tokenizer()
    assert tok.convert_ids_to_tokens(tok("1234", add_special_tokens=False)["input_ids"]) == ["1", "2", "3", "4"]


def test_the_build_records_the_time_it_took_and_its_spec(tmp_path, monkeypatch):
    """`grpo-studio build-tiny` prints the recorded build time: it is the clock's reading from the start of the build
    to the end, rounded to a tenth (a clock read twice, 12.34 s apart)."""
    from dataclasses import asdict
    from types import SimpleNamespace

    from trainer.loading import tiny

    readings = iter([100.0, 112.34])
    monkeypatch.setattr(tiny, "time", SimpleNamespace(perf_counter=lambda: next(readings)))
    # 4 steps of a hidden-size-16 model: only what the build records is under test, not what the model learns
    spec = tiny.TinySpec(hidden_size=16, intermediate_size=32, num_heads=2, sft_steps=4)
    info = json.loads((tiny.build_tiny_model(tmp_path, spec) / "grpo_studio_tiny.json").read_text())
    assert (info["spec"], info["build_seconds"]) == (asdict(spec), 12.3)
    import torch

    assert info["built_with"]["torch"] == torch.__version__  # what made it, for the shipped copy's record


def test_tiny_threads_sets_the_workers_thread_count_for_a_block_and_puts_it_back():
    """What `grpo-studio eval` and the evaluation job run the built-in model on (issue 24: they used two threads)."""
    import torch

    from trainer.loading.tiny import TINY_THREADS, tiny_threads

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with tiny_threads():
            assert torch.get_num_threads() == TINY_THREADS == 1
        assert torch.get_num_threads() == 2
        with tiny_threads(on=False):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_built_model_answers_in_format_and_partly_right(tiny_model_path):
    from transformers import AutoModelForCausalLM

    from trainer.config import SYSTEM_PROMPT
    from trainer.evaluation.evaluate import score_heldout
    from trainer.loading.backend import load_tokenizer
    from trainer.loading.data import arithmetic_problems

    info = json.loads((tiny_model_path / "grpo_studio_tiny.json").read_text())
    # the build time is recorded for `grpo-studio build-tiny` (its value: the test above; its budget is measured by
    # bench/tiny_build.py), with the spec the cache name stands for
    assert info["build_seconds"] > 0
    from dataclasses import asdict

    from trainer.loading.tiny import DEFAULT_SPEC, SHIPPED

    assert info["spec"] == asdict(DEFAULT_SPEC) and tiny_model_path in (
        SHIPPED,
        SHIPPED.parent / DEFAULT_SPEC.cache_name,
    )
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    score = score_heldout(model, load_tokenizer(str(tiny_model_path)), arithmetic_problems("test"), SYSTEM_PROMPT)
    assert score.formatted > 0.9
    assert 0.2 < score.correct < 0.9  # a share right, with room left for GRPO
