"""The measured KL and the token view's values on Unsloth's trainer, on the CPU (issue 38, items 2-3).

Unsloth itself does not import without a GPU, so its replacements are re-created here by their output contract, each
shape with the line of the pinned source it comes from (unsloth 2026.10.9 models/rl_replacements.py, unsloth_zoo
2026.10.9 rl_replacements.py), and patched onto a real GRPOTrainer of the built-in model (TRL 1.16, built in this
process, not trained):

- ``_get_per_token_logps_and_entropies`` left-packs each row's padding to its end (zoo :778-784, called at
  rl_replacements.py:3628-3634) and returns ``logits_to_keep + max_left_pad`` columns (:4168-4173), entropies None
  (:4237, :4242); with ``compute_efficient=True`` it returns ``(None, None)`` (:3437-3442);
- ``compute_loss`` (:4764) never calls TRL's ``_compute_loss``.

The values must equal those of TRL's own plain path (its ``_get_per_token_logps_and_entropies`` on TRL's left-padded
layout) for the same rows, within 1e-4.
"""

from __future__ import annotations

import base64

import pytest
import torch

from storage.learning import unpack_values
from tests.helpers import tiny_config
from trainer.job.measures import install_measures, measure_kl, per_token_kl
from trainer.job.token_capture import TokenCapture

ROWS = 8  # two groups of 4, as tiny_config samples them


def left_pack_padding(tensor, pad_id):
    """unsloth_zoo 2026.10.9 rl_replacements.py:778-784, as it is: every row's padding moved to its end."""
    mask = tensor != pad_id
    sorted_indices = torch.argsort(mask, dim=1, descending=True, stable=True)
    return torch.gather(tensor, 1, sorted_indices)


def unsloth_logps(trainer):
    """Unsloth's ``_get_per_token_logps_and_entropies`` by its output contract (the lines in the module docstring)."""
    pad = trainer.processing_class.pad_token_id

    def replaced(model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
                 compute_efficient=False, *args, **kwargs):  # fmt: skip
        if compute_efficient:
            return None, None  # :3437-3442
        # :3628-3634: pads counted in the prompt part, then left-packed; the mask rebuilt from the pad id
        max_left_pad = int((input_ids[:, :-logits_to_keep] == pad).sum(dim=1).max())
        input_ids = left_pack_padding(input_ids, pad)
        attention_mask = (input_ids != pad).long()
        with torch.no_grad():
            logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        ids = input_ids[:, -(logits_to_keep + max_left_pad) :]  # :4168-4170
        logits = logits[:, -(logits_to_keep + max_left_pad + 1) :, :][:, :-1, :]  # :4171-4174
        logps = torch.log_softmax(logits.float() / trainer.temperature, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
        return logps.detach(), None, None  # :4237, :4242

    return replaced


def never_called(*args, **kwargs):
    raise AssertionError("Unsloth's compute_loss never calls _compute_loss (rl_replacements.py:4764)")


@pytest.fixture(scope="module")
def trainer(tmp_path_factory, tiny_model_path):
    """A real GRPOTrainer of the built-in model at beta 0, its LoRA B weights drawn at random so that the adapter
    moves the log-probs (a fresh adapter changes nothing: every KL would be 0)."""
    from trainer.job.worker import build_trainer

    built = build_trainer(tiny_config(beta=0.0), tmp_path_factory.mktemp("unsloth-contract"), [], lambda line: None)
    generator = torch.Generator().manual_seed(0)
    for name, parameter in built.model.named_parameters():
        if "lora_B" in name:
            parameter.data = torch.randn(parameter.shape, generator=generator) * 0.5
    return built


@pytest.fixture(scope="module")
def output(trainer):
    """A generation batch as ``_generate_and_score_completions`` returns it: prompts of different lengths left-padded,
    completions of different lengths right-padded (one with an end-of-sequence token), advantages per group."""
    tokenizer = trainer.processing_class
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    prompts = [tokenizer(f"{'What is ' * (1 + i % 3)}{i} + 2?")["input_ids"] for i in range(ROWS)]
    completions = [tokenizer(f"<answer>\n{i + 2}" + " tidy" * (i % 4))["input_ids"] for i in range(ROWS)]
    completions[1] = completions[1] + [eos]
    width_p, width_c = max(map(len, prompts)), max(map(len, completions))
    prompt_ids = torch.tensor([[pad] * (width_p - len(p)) + p for p in prompts])
    prompt_mask = torch.tensor([[0] * (width_p - len(p)) + [1] * len(p) for p in prompts])
    completion_ids = torch.tensor([c + [pad] * (width_c - len(c)) for c in completions])
    completion_mask = torch.tensor([[1] * len(c) + [0] * (width_c - len(c)) for c in completions])
    assert len(set(map(len, prompts))) > 1 and prompt_mask.min() == 0  # left padding there: what broke the KL
    advantages = torch.tensor([0.9, -0.3, 0.1, -0.7, 1.2, -1.2, 0.4, -0.4])
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages,
    }


@pytest.fixture(scope="module")
def plain(trainer, output):
    """TRL 1.16's own plain path on TRL's layout: log-probs and entropies with the adapter on, log-probs with it off."""
    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    keep = output["completion_ids"].size(1)
    with torch.no_grad():
        policy, entropies, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, keep, compute_entropy=True
        )
        with trainer.model.disable_adapter():
            base, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, keep)
    return {"policy": policy.float(), "entropies": entropies.float(), "base": base.float()}


@pytest.fixture
def as_unsloth(trainer, monkeypatch):
    """The trainer with Unsloth's replacements in place of TRL's methods."""
    monkeypatch.setattr(trainer, "_get_per_token_logps_and_entropies", unsloth_logps(trainer))
    monkeypatch.setattr(trainer, "_compute_loss", never_called)
    trainer.model.train()
    return trainer


def test_unsloths_log_probs_have_another_layout(as_unsloth, output):
    """Why the measures can't use the trainer's method: on these rows it returns more columns than the completion
    has (the old measured KL failed on shape here and turned itself off)."""
    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    keep = output["completion_ids"].size(1)
    max_left_pad = int((1 - output["prompt_mask"]).sum(dim=1).max())
    logps, entropies, _ = as_unsloth._get_per_token_logps_and_entropies(as_unsloth.model, ids, None, keep)
    assert logps.shape == (ROWS, keep + max_left_pad) and max_left_pad > 0 and entropies is None
    assert as_unsloth._get_per_token_logps_and_entropies(None, ids, None, keep, compute_efficient=True) == (None, None)


def test_measured_kl_on_unsloth_equals_the_plain_paths(as_unsloth, output, plain):
    mask = output["completion_mask"].float()
    expected = float((per_token_kl(plain["policy"], plain["base"]) * mask).sum() / mask.sum())
    measured = measure_kl(as_unsloth, output)
    assert expected > 1e-3  # the adapter moves the model: a KL of 0 would prove nothing
    assert measured == pytest.approx(expected, abs=1e-4)


def test_token_values_on_unsloth_equal_the_plain_paths(as_unsloth, output, plain):
    """Token capture follows the sampling, not the loss Unsloth computes its own way: the chosen completions get
    the policy's log-probs and entropies and the base's log-probs, as TRL's plain path computes them."""
    as_unsloth._generate_and_score_completions = lambda *args, **kwargs: output
    capture = TokenCapture(as_unsloth, limit=4)
    assert as_unsloth._generate_and_score_completions() is output
    tokenizer = as_unsloth.processing_class
    samples = []
    for i in range(ROWS):
        length = int(output["completion_mask"][i].sum())
        text = tokenizer.decode(output["completion_ids"][i][:length], skip_special_tokens=True)
        samples.append({"group_index": i // 4, "advantage": float(output["advantages"][i]), "completion": text})
    rows = capture.rows(samples, run_id=1, step=1)

    def values(row, key):
        return unpack_values(base64.b64decode(row[key]))

    # each group's best and worst: rows 4 and 0 (best), 5 and 3 (worst)
    assert sorted(row["sample_index"] for row in rows) == [0, 3, 4, 5]
    for row in rows:
        i, length = row["sample_index"], int(output["completion_mask"][row["sample_index"]].sum())
        for key, name in (("logprobs", "policy"), ("entropies", "entropies"), ("ref_logprobs", "base")):
            # stored as float16 (storage.learning.pack_values): compared to what TRL computed, rounded alike
            expected = plain[name][i, :length].half().float()
            assert torch.allclose(torch.tensor(values(row, key)), expected, atol=1e-4), (i, key)
        assert len(row["tokens"]) == length


def test_own_values_equal_trls_plain_path_before_storage(as_unsloth, output, plain):
    """The same comparison without the float16 of storage: every completion token, within 1e-4."""
    from trainer.job.own_logps import row_values

    values = row_values(as_unsloth, output, list(range(ROWS)), entropy=True)
    mask = output["completion_mask"].bool()
    for name, got in (("policy", values.policy), ("entropies", values.entropies), ("base", values.base)):
        assert (got[mask] - plain[name][mask]).abs().max() < 1e-4, name
        assert (got[~mask] == 0).all()


def test_a_measure_that_fails_says_so_in_the_runs_log(trainer, output):
    """A failing measured KL turns itself off, with the reason, in the line the run's log and the KL chart read."""
    from types import SimpleNamespace

    from storage.queries import MEASURE_OFF

    def unreadable(model):
        raise OSError("the adapter is gone")

    fake = SimpleNamespace(
        model=trainer.model,
        state=SimpleNamespace(global_step=2),
        accelerator=SimpleNamespace(unwrap_model=unreadable),
        _generate_and_score_completions=lambda *args, **kwargs: output,
        add_callback=lambda callback: None,
        _metrics={"train": {}},
    )
    lines = []
    measures = install_measures(fake, kl_every=1, note=lines.append)
    assert fake._generate_and_score_completions() is output  # training goes on
    assert lines == [f"{MEASURE_OFF}kl_measured at step 3: OSError: the adapter is gone"] and measures.kl_every == 0
