"""Side by side, held-out evaluation and export, on the built-in model and a short run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.helpers import run_row
from trainer.config import RunConfig
from trainer.evaluation.compare import ModelCache, base_weight_bytes, compare, sample
from trainer.evaluation.sampling import SamplingSettings
from trainer.loading.data import make_prompt
from trainer.scoring.rewards import correctness_reward, strict_format_reward
from trainer.supervise.run_files import RunFiles

pytestmark = pytest.mark.slow

PROMPT = make_prompt("What is 17 + 25?", RunConfig().system_prompt)


@pytest.fixture
def trained(trained_run):
    """The session's shared finished 6-step run (tests/conftest.py: trained_run), with its run directory."""
    run_id, config, _ = trained_run
    assert run_row(run_id).status == "completed", run_row(run_id).error
    return run_id, config, run_row(run_id).output_dir


def _fresh_base(tiny_model_path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()


def test_adapters_are_listed_final_and_per_checkpoint(trained):
    _, _, output_dir = trained
    assert list(RunFiles(Path(output_dir)).saved_adapters()) == ["final", "step 3", "step 6"]


def test_adapter_off_equals_a_freshly_loaded_base(trained, tiny_model_path):
    from trainer.loading.backend import load_tokenizer

    _, config, output_dir = trained
    cache = ModelCache()
    model, tokenizer = cache.get(str(tiny_model_path), RunFiles(Path(output_dir)).saved_adapters()["final"])
    settings = SamplingSettings(greedy=False, temperature=1.0, top_p=1.0, max_new_tokens=32, seed=11)
    panel_base = sample(model, tokenizer, PROMPT, 4, settings, adapter=False)
    fresh = _fresh_base(tiny_model_path)
    tok = load_tokenizer(str(tiny_model_path))
    text = tok.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    # The panel samples a side's completions as one batch of copies of the prompt, seeded once.
    batch = tok([text] * 4, return_tensors="pt", add_special_tokens=False)
    torch.manual_seed(11)
    ids = fresh.generate(
        **batch,
        max_new_tokens=32,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    expected = tok.batch_decode(ids[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    assert panel_base == expected


def test_tuned_differs_from_base_and_both_are_scored(trained):
    _, config, output_dir = trained
    result = compare(
        config, RunFiles(Path(output_dir)).saved_adapters()["final"], PROMPT, "42", n=6, seed=3, cache=ModelCache()
    )
    assert result.base.completions != result.tuned.completions
    for side in (result.base, result.tuned):
        assert len(side.completions) == 6 and len(side.totals) == 6
        assert set(side.rewards[0]) == set(config.reward_funcs)
        assert side.mean_reward == pytest.approx(sum(side.totals) / 6)
        assert 0 <= side.correct <= 6 and 0 <= side.formatted <= 6
        # the counts are of this side's completions: recounted from its text with the reference rewards
        assert side.correct == sum(1 for r in correctness_reward(None, side.completions, answer=["42"] * 6) if r)
        assert side.formatted == sum(1 for r in strict_format_reward(None, side.completions) if r)


def test_compare_says_why_when_the_text_is_the_same(trained, tiny_model_path, tmp_path):
    """Issue 12: identical text is a measured fact. A trained adapter moves the token probabilities (KL > 0) even
    where it writes what the base writes; an adapter that has not trained (PEFT starts LoRA's B at zero) is the base
    exactly: every completion identical, KL 0, and the panel says the adapter has barely moved the model."""
    from peft import LoraConfig, get_peft_model

    _, config, output_dir = trained
    trained_result = compare(
        config, RunFiles(Path(output_dir)).saved_adapters()["final"], PROMPT, "42", n=4, greedy=True, cache=ModelCache()
    )
    same = sum(b == t for b, t in zip(trained_result.base.completions, trained_result.tuned.completions))
    assert trained_result.identical == same and trained_result.kl > 1e-3
    assert "KL(tuned ‖ base)" in trained_result.why()

    untrained = get_peft_model(_fresh_base(tiny_model_path), LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    untrained.save_pretrained(tmp_path / "untrained")
    result = compare(config, tmp_path / "untrained", PROMPT, "42", n=4, seed=5, cache=ModelCache())
    assert result.base.completions == result.tuned.completions and result.identical == 4
    assert result.kl == pytest.approx(0.0, abs=1e-7)
    assert "the same text in 4 of 4" in result.why() and "barely moved" in result.why()


def test_only_one_copy_of_the_base_weights_is_held(trained, tiny_model_path):
    _, _, output_dir = trained
    cache = ModelCache()
    dirs = RunFiles(Path(output_dir)).saved_adapters()
    model, _ = cache.get(str(tiny_model_path), dirs["final"])
    model, _ = cache.get(str(tiny_model_path), dirs["step 3"])  # a second checkpoint: adapter only, same base
    base_alone = base_weight_bytes(_fresh_base(tiny_model_path))
    assert base_weight_bytes(model) == base_alone
    assert len(cache.adapters) == 2
    lora = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    assert 0 < lora * 4 < base_alone  # the adapters are small next to the one base copy


def test_merged_export_reproduces_the_adapter_models_greedy_output(trained, tmp_path, tiny_model_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer.evaluation.run_lookup import run_adapter
    from trainer.export.adapter import merge

    run_id, config, output_dir = trained
    config, adapter_dir = run_adapter(run_id)
    target = merge(config, adapter_dir, tmp_path / "merged")
    assert (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(target).eval()  # plain transformers, no PEFT
    tok = AutoTokenizer.from_pretrained(target)
    cache = ModelCache()
    model, tokenizer = cache.get(str(tiny_model_path), adapter_dir)
    settings = SamplingSettings(greedy=True, temperature=1.0, top_p=1.0, max_new_tokens=32, seed=0)
    with_adapter = sample(model, tokenizer, PROMPT, 1, settings, adapter=True)
    from_merged = sample_plain(merged, tok)
    assert from_merged == with_adapter[0]


def sample_plain(model, tok) -> str:
    text = tok.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    batch = tok([text], return_tensors="pt", add_special_tokens=False)
    ids = model.generate(
        **batch, max_new_tokens=32, do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id
    )
    return tok.decode(ids[0, batch["input_ids"].shape[1] :], skip_special_tokens=True)


def test_push_without_a_token_says_so(trained, monkeypatch):
    from trainer.evaluation.run_lookup import run_adapter
    from trainer.export.adapter import ExportError, push

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    _, adapter_dir = run_adapter(trained[0])
    with pytest.raises(ExportError, match="needs a token"):
        push(adapter_dir, "someone/repo")
    with pytest.raises(ExportError, match="HF_HUB_OFFLINE"):
        push(adapter_dir, "someone/repo", token="hf_x")


def test_heldout_evaluation_is_stored_and_compares_base_and_tuned(trained, tiny_model_path, monkeypatch):
    from peft import PeftModel

    from storage import queries
    from storage.db import get_sessionmaker
    from trainer.evaluation import evaluate
    from trainer.evaluation.evaluate import evaluate_run, generate, heldout_problems
    from trainer.evaluation.run_lookup import run_adapter
    from trainer.loading.backend import load_tokenizer
    from trainer.loading.tiny import TINY_THREADS, tiny_threads

    run_id, config, _ = trained
    threads = []
    side_metrics = evaluate.side_metrics
    monkeypatch.setattr(
        evaluate, "side_metrics", lambda *a, **kw: threads.append(torch.get_num_threads()) or side_metrics(*a, **kw)
    )
    results = evaluate_run(run_id, k=20, samples=2)
    assert threads == [TINY_THREADS, TINY_THREADS]  # base and tuned, on the worker's thread setting (issue 24)
    for side in ("base", "tuned"):
        assert 0.0 <= results[side]["correct"] <= 1.0 and 0.0 <= results[side]["pass_at_1"] <= 1.0
        assert set(results[side]["rewards"]) == set(config.reward_funcs)
        assert results[side]["mean_length"] > 5
    assert results["base"]["format"] > 0.8  # the warmed-up model writes the format
    assert results["heldout"] == {"source": "split", "split": "test", "problems": 20, "dropped": 0}
    with get_sessionmaker().begin() as s:
        stored = queries.latest_evaluation(s, run_id)
        assert stored.k == 20 and stored.results["tuned"] == results["tuned"]

    # "base" is the base model and "tuned" the run's adapter: each side's greedy correctness and mean length,
    # recomputed from a freshly loaded model of its own on the same problems, are what the evaluation stored
    problems = heldout_problems(config, 20)
    prompts = [make_prompt(p.question, config.system_prompt) for p in problems]
    tokenizer = load_tokenizer(str(tiny_model_path))

    def greedy(model) -> tuple[float, float]:
        with tiny_threads():
            completions = generate(model, tokenizer, prompts, config.max_completion_length)
        right = correctness_reward(prompts, completions, answer=[p.answer for p in problems])
        lengths = [len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in completions]
        return sum(1 for r in right if r) / len(problems), sum(lengths) / len(lengths)

    tuned = PeftModel.from_pretrained(_fresh_base(tiny_model_path), str(run_adapter(run_id)[1]))
    measured = {"base": greedy(_fresh_base(tiny_model_path)), "tuned": greedy(tuned)}
    for side in ("base", "tuned"):
        assert (results[side]["correct"], results[side]["mean_length"]) == pytest.approx(measured[side]), side
    assert measured["base"] != measured["tuned"]  # the two sides are two models, so the comparison compares


def test_evaluation_refuses_a_single_local_file(tmp_path):
    from trainer.evaluation.evaluate import EvaluationError, heldout_problems

    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "q", "answer": "1"}\n')
    with pytest.raises(EvaluationError, match="no held-out split"):
        heldout_problems(RunConfig(dataset_name=str(path)), 10)
