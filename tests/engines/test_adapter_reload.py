"""A rewritten adapter is loaded again (issue 26, item 3): vLLM gets a new LoRA id whenever the adapter's files
change (a resumed run rewrites adapter/), and the PEFT side drops the old one. Offline, on the CPU: vLLM is a
stand-in with the real signatures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.engines.test_gpu_path import PROMPT, QWEN, _fake_vllm
from tests.helpers import tiny_config


def _adapter(directory: Path, weights: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "adapter_config.json").write_text('{"r": 8}')
    (directory / "adapter_model.safetensors").write_bytes(weights)
    return directory


def test_a_rewritten_adapter_gets_a_new_lora_id(monkeypatch, tmp_path, no_sampler_choice):
    """vLLM serves what it cached under an id (vllm 0.32 lora/request.py:15-28); a resumed run rewrites adapter/."""
    from trainer.evaluation.sampling import SamplingSettings
    from trainer.evaluation.vllm_sampling import VllmSampler

    record = {}
    for name, module in _fake_vllm(record).items():
        monkeypatch.setitem(sys.modules, name, module)
    sampler = VllmSampler("Qwen/Qwen2.5-0.5B-Instruct", tiny_config(**QWEN))
    settings = SamplingSettings(greedy=False, temperature=0.7, top_p=0.9, max_new_tokens=5, seed=0)
    adapter = _adapter(tmp_path / "run" / "adapter", b"first")

    def lora_id() -> int:
        sampler.sample(PROMPT, 1, adapter, settings)
        return record["chats"][-1][2].lora_int_id

    assert lora_id() == 1 and lora_id() == 1  # unchanged files: vLLM's cached copy is the right one
    _adapter(adapter, b"second, longer")
    assert lora_id() == 2 and record["chats"][-1][2].lora_path == str(adapter)
    stat = (adapter / "adapter_model.safetensors").stat()
    _adapter(adapter, b"second, LONGER")  # same size: the modification time tells them apart
    os.utime(adapter / "adapter_model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert lora_id() == 3


def test_peft_compare_loads_a_rewritten_adapter_again(tmp_path, tiny_model_path):
    """The PEFT side (Compare's CPU path and evaluation) names adapters by their files too, and drops the old one."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainer.evaluation.compare import ModelCache

    def save(value: float) -> None:
        model = get_peft_model(
            AutoModelForCausalLM.from_pretrained(tiny_model_path), LoraConfig(r=2, target_modules=["q_proj"])
        )
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.data.fill_(value)
        model.save_pretrained(tmp_path / "adapter")

    def lora_b(model) -> float:
        return next(
            float(p.detach().flatten()[0])
            for n, p in model.named_parameters()
            if "lora_B" in n and model.active_adapter in n
        )

    cache = ModelCache()
    save(0.25)
    model, _ = cache.get(str(tiny_model_path), tmp_path / "adapter")
    assert lora_b(model) == pytest.approx(0.25)
    assert cache.get(str(tiny_model_path), tmp_path / "adapter")[0] is model and len(cache.adapters) == 1
    save(-0.5)
    model, _ = cache.get(str(tiny_model_path), tmp_path / "adapter")
    assert lora_b(model) == pytest.approx(-0.5) and len(cache.adapters) == 1
    cache.release()
