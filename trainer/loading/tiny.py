"""``builtin:tiny``: a small chat model built locally, with no download, so the whole product runs offline.

What it is: a Qwen2-style causal LM (a few layers, hidden size in the tens) and a byte-level BPE tokenizer trained
on the arithmetic task's own text, with ChatML special tokens and a chat template. It is warmed up with a short
supervised pass on ``builtin:arithmetic`` (loss on the answer only), so it already answers in the
``<reasoning>…</reasoning><answer>…</answer>`` format and gets a share of the problems right: GRPO then has
something to improve, which a random model would not give it (every group would score 0, std 0, no signal).

Built once per spec and cached under ``$GRPO_STUDIO_HOME/models/``; a file lock keeps two processes from building
the same model at once.
"""

from __future__ import annotations

import fcntl
import json
import logging
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from trainer.config import SYSTEM_PROMPT
from trainer.loading.data import arithmetic_problems, arithmetic_solution, make_prompt

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# The format's tags are whole tokens but *not* special: TRL decodes completions with skip_special_tokens=True,
# and the rewards must still see the tags.
FORMAT_TAGS = ["<reasoning>", "</reasoning>", "<answer>", "</answer>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class TinySpec:
    """Size and warm-up budget of a built-in model. Each value is shrunk to fit a 2-core CPU (see comments)."""

    hidden_size: int = 96  # enough capacity for two-digit addition with carries; 2x smaller learns it too slowly
    num_layers: int = 3
    num_heads: int = 4
    intermediate_size: int = 256
    vocab_size: int = 400  # 256 bytes + merges for the recurring prompt text; digits stay single tokens
    sft_steps: int = 1500  # warm-up length: stops short of perfect so GRPO has room to improve
    sft_batch_size: int = 32
    sft_lr: float = 3e-3
    seed: int = 0

    @property
    def cache_name(self) -> str:
        """Directory name under ``models/``, unique per spec."""
        return "tiny-" + "-".join(str(v) for v in asdict(self).values()).replace(".", "p")


DEFAULT_SPEC = TinySpec()


def tiny_model_dir(spec: TinySpec = DEFAULT_SPEC, root: Path | None = None) -> Path:
    """The directory of the built-in model, building it first if it isn't cached yet."""
    from storage.db import data_dir

    root = root or data_dir() / "models"
    target = root / spec.cache_name
    if (target / "grpo_studio_tiny.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{spec.cache_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait, then reuse its result
        if not (target / "grpo_studio_tiny.json").is_file():
            build_tiny_model(target, spec)
    return target


def build_tokenizer():
    """A byte-level BPE tokenizer trained on the arithmetic task's text, wrapped as a fast HF tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # Digits stay single tokens so the model sees numbers one digit at a time (how it learns carries).
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=DEFAULT_SPEC.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [SYSTEM_PROMPT, "system", "user", "assistant"] + [
        p.question + "\n" + arithmetic_solution(p) for p in arithmetic_problems("train")
    ]
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in FORMAT_TAGS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        model_max_length=512,
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(target: Path, spec: TinySpec = DEFAULT_SPEC) -> Path:
    """Build, warm up and save a built-in model to ``target`` (overwriting). Returns ``target``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    started = time.perf_counter()
    torch.manual_seed(spec.seed)
    tokenizer = build_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads // 2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    _warm_up(model, tokenizer, spec)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    seconds = time.perf_counter() - started
    info = {"spec": asdict(spec), "build_seconds": round(seconds, 1)}
    (target / "grpo_studio_tiny.json").write_text(json.dumps(info, indent=2))
    log.info("built %s in %.1f s", target, seconds)
    return target


def _warm_up(model, tokenizer, spec: TinySpec) -> None:
    """Supervised warm-up on the arithmetic train split; the loss covers only the assistant's answer."""
    import torch

    examples = []
    for problem in arithmetic_problems("train"):
        prompt = tokenizer.apply_chat_template(
            make_prompt(problem.question, SYSTEM_PROMPT), tokenize=False, add_generation_prompt=True
        )
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(arithmetic_solution(problem) + "<|im_end|>", add_special_tokens=False)["input_ids"]
        examples.append((prompt_ids, answer_ids))
    rng = random.Random(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.sft_lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=spec.sft_lr, total_steps=spec.sft_steps)
    model.train()
    pad = tokenizer.pad_token_id
    for step in range(spec.sft_steps):
        batch = rng.sample(examples, spec.sft_batch_size)
        length = max(len(p) + len(a) for p, a in batch)
        ids = torch.full((len(batch), length), pad)
        labels = torch.full((len(batch), length), -100)
        mask = torch.zeros((len(batch), length), dtype=torch.long)
        for row, (p, a) in enumerate(batch):
            seq = p + a
            ids[row, : len(seq)] = torch.tensor(seq)
            labels[row, len(p) : len(seq)] = torch.tensor(a)
            mask[row, : len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 100 == 0:
            log.info("warm-up step %d/%d loss %.3f", step, spec.sft_steps, loss.item())
    model.eval()
