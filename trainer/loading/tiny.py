"""``builtin:tiny``: a small chat model built locally, with no download, so the whole product runs offline.

What it is: a Qwen2-style causal LM (a few layers, hidden size in the tens) and a byte-level BPE tokenizer trained
on the arithmetic task's own text, with ChatML special tokens and a chat template. It is warmed up with a short
supervised pass on the training split of ``builtin:arithmetic`` (loss on the answer only), so it already answers in
the ``<reasoning>…</reasoning><answer>…</answer>`` format and gets a share of the problems right: GRPO then has
something to improve, which a random model would not give it (every group would score 0, std 0, no signal).

Why the warm-up is deliberately sloppy (issue 12): GRPO learns from answers of one group that disagree. A model
warmed up on perfect worked answers was either confidently wrong in ways particular to each problem (one-line
answers: held-out 54 %, and GRPO gains on training problems did not carry over) or, worked column by column, right
often enough but improving only slowly. So the warm-up shows the model worked answers in which, half of the time, the
carry (or borrow) is forgotten (``TinySpec.carry_slip``, see :func:`trainer.loading.data.arithmetic_solution`). The model
comes out uncertain about one rule that many problems share: on a problem with a carry it writes "1 + 1 + 1 = 3" or
"1 + 1 = 2" about equally often, a group of eight nearly always disagrees, and the correctness reward alone tells
GRPO which habit is right. Because the rule is shared, what GRPO learns on training problems shows on held-out ones:
the demo preset takes held-out greedy correctness from 75.5 % to 98-99 % and sampled pass@1 from about 80 % to 90-93 %
in 100 steps (79.5 % -> 89.9 % re-measured at seed 42 for issue 24). (After an 800-step warm-up with a slip of 0.6,
greedy answers forgot nearly every carry and GRPO relearned carrying for addition but not borrowing for subtraction; at 0.5 it learns both.) Nothing of the held-out split is seen: the tokenizer and the warm-up read the
training split only (tests/problems/test_heldout.py checks both).

Threads: the build, a worker training this model and an evaluation of it (``grpo-studio eval``, the dashboard's
evaluation job: :func:`tiny_threads`) use one CPU thread (:func:`use_tiny_threads`). Its matrix
products (96 wide) are too small to split well: on 2 idle cores a second thread saves about a fifth of the time, but
when other processes keep the cores busy the threads spin-wait for each other at every product, and 6 demo GRPO steps
took 70 s on two threads against 4 s on one (load average ~5; bench/threads.py measures both).

Shipped prebuilt (``trainer/loading/builtin_tiny/``, package data, ~2 MB): building it takes 1-2 minutes on 2 quiet
cores and over 20 on a loaded machine, which a newcomer would otherwise sit through before the demo's first step.
The shipped files are what :func:`build_tiny_model` makes of :data:`DEFAULT_SPEC` (fixed seed, one thread), made by
``grpo-studio build-tiny --into trainer/loading/builtin_tiny`` (its ``grpo_studio_tiny.json`` records the build); a
slow test rebuilds it and checks the rebuild reaches the shipped model's held-out correctness. Other specs (the tests'
smaller models) are built once and cached under ``$GRPO_STUDIO_HOME/models/``; a file lock keeps two processes from
building the same model at once, and a build logs its progress with an ETA.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from time import monotonic as _clock  # the warm-up's ETA; the build's own time is time.perf_counter's

from trainer.config import SYSTEM_PROMPT
from trainer.loading.data import Problem, arithmetic_problems, arithmetic_solution, make_prompt

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
    # warm-up length: long enough to learn the format and the one-digit facts (problems without a carry ~99 % right
    # held out), short enough to build in under 2 minutes on 2 idle cores (800 steps left subtraction facts shaky,
    # which GRPO did not fix within the demo)
    sft_steps: int = 1000
    sft_batch_size: int = 32
    sft_lr: float = 3e-3
    # share of warm-up draws of a problem with a carry/borrow whose worked answer forgets it: 0.5 leaves the model
    # undecided between the two habits, the disagreement GRPO learns from (see the module docstring)
    carry_slip: float = 0.5
    seed: int = 0

    @property
    def cache_name(self) -> str:
        """Directory name under ``models/``, unique per spec."""
        return "tiny-" + "-".join(str(v) for v in asdict(self).values()).replace(".", "p")


DEFAULT_SPEC = TinySpec()
TINY_THREADS = 1  # see the module docstring


def use_tiny_threads() -> int:
    """Set torch's intra-op threads for the built-in model; returns the previous count (to restore it)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(TINY_THREADS)
    return previous


SHIPPED = Path(__file__).resolve().parent / "builtin_tiny"
INFO_FILE = "grpo_studio_tiny.json"


def shipped_model(spec: TinySpec = DEFAULT_SPEC) -> Path | None:
    """The prebuilt model that ships with grpo-studio, if it is of ``spec`` (and its files are all there)."""
    try:
        info = json.loads((SHIPPED / INFO_FILE).read_text())
    except (OSError, ValueError):
        return None
    complete = all((SHIPPED / name).is_file() for name in ("config.json", "model.safetensors", "tokenizer.json"))
    return SHIPPED if complete and info.get("spec") == asdict(spec) else None


@contextlib.contextmanager
def tiny_threads(on: bool = True) -> Iterator[None]:
    """:func:`use_tiny_threads` for the duration of a block (``on`` False: leave the threads alone), then the previous
    count again: for a process that runs the built-in model on a CPU but also does other work (an evaluation)."""
    if not on:
        yield
        return
    import torch

    previous = use_tiny_threads()
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def tiny_model_dir(spec: TinySpec = DEFAULT_SPEC, root: Path | None = None) -> Path:
    """The directory of the built-in model: the shipped one for the default spec, else a cached build (made first
    if it isn't cached yet)."""
    from storage.db import data_dir

    if root is None and (shipped := shipped_model(spec)) is not None:
        return shipped
    root = root or data_dir() / "models"
    target = root / spec.cache_name
    if (target / INFO_FILE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{spec.cache_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait, then reuse its result
        if not (target / INFO_FILE).is_file():
            build_tiny_model(target, spec)
    return target


def warm_up_problems() -> list[Problem]:
    """The problems the built-in model is warmed up on (and its tokenizer trained on): the training split only."""
    return arithmetic_problems("train")


def tokenizer_corpus() -> list[str]:
    """The text the tokenizer's merges are learned from: the prompt's fixed parts and the warm-up problems."""
    return [SYSTEM_PROMPT, "system", "user", "assistant"] + [
        p.question + "\n" + arithmetic_solution(p) for p in warm_up_problems()
    ]


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
    tok.train_from_iterator(tokenizer_corpus(), trainer=trainer)
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


# How many of the warm-up's first losses a build records: a check can replay that many steps (a second) and compare,
# instead of the whole build (minutes), to see that the recipe still does what it did when the shipped files were made.
RECORDED_LOSSES = 20


def recipe_digest(spec: TinySpec = DEFAULT_SPEC) -> str:
    """A digest of everything a build reads: the spec, the code of the build's steps, the tokens and template, and
    the text of every warm-up example. Recorded by each build, so a change to the recipe that the shipped files
    predate is seen without rebuilding them (tests/models/test_shipped_model.py); edits elsewhere in the modules it imports
    (a new reward, a comment) leave it alone."""
    import hashlib
    import inspect

    digest = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode())
    for step in (build_tokenizer, new_model, warmed_up, build_tiny_model, save_build, warm_up_examples, _warm_up):
        digest.update(inspect.getsource(step).encode())
    digest.update(json.dumps([SPECIAL_TOKENS, FORMAT_TAGS, CHAT_TEMPLATE, SYSTEM_PROMPT]).encode())
    for text in tokenizer_corpus():
        digest.update(text.encode())
    for problem in warm_up_problems():
        messages = make_prompt(problem.question, SYSTEM_PROMPT)
        digest.update(json.dumps([messages, arithmetic_solution(problem, forget_carry=True)]).encode())
    return digest.hexdigest()


def new_model(tokenizer, spec: TinySpec):
    """The untrained model of ``spec`` for ``tokenizer`` (seeded by the caller). A tool model's spec
    (trainer.loading.tiny_tools.ToolSpec) has the same sizes, so both built-in models are made here."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

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
    return Qwen2ForCausalLM(config)


def warmed_up(
    spec: TinySpec,
    stop_after: int | None = None,
    *,
    make_tokenizer: Callable | None = None,
    warm_up: Callable | None = None,
):
    """A new model of ``spec`` (seeded) and the tokenizer ``make_tokenizer`` makes, warmed up by ``warm_up`` on one
    thread, for ``stop_after`` steps or all, with the warm-up's losses: (tokenizer, model, losses). Both built-in
    models' builds and the replays of their first steps share it: this module's tokenizer and warm-up by default,
    trainer.loading.tiny_tools passes its own."""
    import torch

    torch.manual_seed(spec.seed)
    tokenizer = (make_tokenizer or build_tokenizer)()
    model = new_model(tokenizer, spec)
    losses: list[float] = []
    threads = use_tiny_threads()
    try:
        (warm_up or _warm_up)(model, tokenizer, spec, losses=losses, stop_after=stop_after)
    finally:
        torch.set_num_threads(threads)
    return tokenizer, model, losses


def first_warm_up_losses(spec: TinySpec = DEFAULT_SPEC, steps: int = RECORDED_LOSSES) -> list[float]:
    """The first ``steps`` warm-up losses of a build of ``spec``, from a build stopped there (about a second)."""
    return warmed_up(spec, stop_after=steps)[2]


def build_tiny_model(target: Path, spec: TinySpec = DEFAULT_SPEC) -> Path:
    """Build, warm up and save a built-in model to ``target`` (overwriting). Returns ``target``."""
    started = time.perf_counter()
    tokenizer, model, losses = warmed_up(spec)
    made_by = "grpo-studio build-tiny --into DIR (trainer.loading.tiny.build_tiny_model)"
    return save_build(
        target, spec, tokenizer, model, losses, started=started, made_by=made_by, digest=recipe_digest(spec)
    )


def save_build(
    target: Path, spec, tokenizer, model, losses: list[float], *, started: float, made_by: str, digest: str
) -> Path:
    """Save a warmed-up built-in model and its tokenizer (as :func:`warmed_up` returns them) to ``target``
    (overwriting) with the record of its build in :data:`INFO_FILE`: its spec, the seconds since ``started``, the
    versions that made it, ``made_by``, the recipe's ``digest`` and its first losses. Returns ``target``. Both
    built-in models' builds end here (trainer.loading.tiny_tools's with its own spec, command and digest)."""
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    seconds = time.perf_counter() - started
    info = {
        "spec": asdict(spec),
        "build_seconds": round(seconds, 1),
        "built_with": {name: _version(name) for name in ("torch", "transformers", "tokenizers")},
        "made_by": made_by,
        "recipe_digest": digest,
        "first_losses": [round(loss, 6) for loss in losses[:RECORDED_LOSSES]],
    }
    (target / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
    log.info("built %s in %.1f s", target, seconds)
    return target


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def warm_up_examples(tokenizer) -> list[tuple[list[int], list[int], list[int] | None]]:
    """Token ids of every warm-up example: (prompt, worked answer, the answer with the carry forgotten or None when
    the problem has no carry). The answers end with the end-of-turn token."""

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    examples = []
    for problem in warm_up_problems():
        prompt = tokenizer.apply_chat_template(
            make_prompt(problem.question, SYSTEM_PROMPT), tokenize=False, add_generation_prompt=True
        )
        right, slip = arithmetic_solution(problem), arithmetic_solution(problem, forget_carry=True)
        examples.append((ids(prompt), ids(right + "<|im_end|>"), ids(slip + "<|im_end|>") if slip != right else None))
    return examples


def _warm_up(
    model, tokenizer, spec: TinySpec, losses: list[float] | None = None, stop_after: int | None = None
) -> None:
    """Supervised warm-up on the arithmetic train split; the loss covers only the assistant's answer. Each time a
    problem with a carry is drawn, its answer forgets the carry with probability ``spec.carry_slip``. Each step's
    loss is appended to ``losses``; ``stop_after`` ends the warm-up after that many steps (the schedule unchanged)."""
    import torch

    started = _clock()
    examples = warm_up_examples(tokenizer)
    rng = random.Random(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.sft_lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=spec.sft_lr, total_steps=spec.sft_steps)
    model.train()
    pad = tokenizer.pad_token_id
    for step in range(spec.sft_steps):
        if stop_after is not None and step >= stop_after:
            break
        batch = [
            (p, slip if slip is not None and rng.random() < spec.carry_slip else right)
            for p, right, slip in rng.sample(examples, spec.sft_batch_size)
        ]
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
        if losses is not None:
            losses.append(loss.item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 100 == 0 or step == spec.sft_steps - 1:
            left = (_clock() - started) / (step + 1) * (spec.sft_steps - step - 1)
            log.info(
                "building the built-in model (once; it is cached): warm-up pass %d/%d, loss %.3f, about %.0f s left",
                step + 1,
                spec.sft_steps,
                loss.item(),
                left,
            )
    model.eval()
