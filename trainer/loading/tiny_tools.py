"""``builtin:tiny-tools``: the built-in model's tool-calling variant, for the calculator demo (issue 42).

Why a second model rather than ``builtin:tiny`` with a tool template: ``builtin:tiny``'s template writes each
message's role and content only, so TRL refuses tools with it (``supports_tool_calling``); TRL's own Qwen2.5 template
renders tools, but its tool block takes some 800 of the tiny tokenizer's tokens per tool, past the model's 512
positions. This model has a compact ChatML template of its own, :data:`CHAT_TEMPLATE`:

- the tools as one line of the system turn, ``Tools: calculator(expression)``: a name and its parameters, not the
  JSON schema (a 400-token vocabulary trained on arithmetic has no use for the schema's prose);
- a tool call written as Qwen's, ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``, so that the
  tokenizer carries TRL's Qwen3 response template (``trl.chat_template_utils.qwen3_template``) and TRL parses the
  calls with it (TRL reads the tokenizer's ``response_template`` first: trl 1.16.0 trainer/grpo_trainer.py:760-766);
- a tool's answer as its own ``tool`` turn, and every turn rendered the same wherever it stands, so the template is
  prefix-preserving and TRL needs no training version of it.

The task, ``builtin:arithmetic3`` (three-digit + and -), is one this model cannot do well alone: its warm-up answers
each problem in one line ("123 + 456 = 579"), which three layers 96 wide do not learn to compute in a short warm-up
(about 1 % of held-out greedy answers right). In a share :attr:`ToolSpec.tool_share` of the warm-up's examples it
calls the calculator and copies its answer instead (``<answer>\n579\n</answer>``), so it knows how to call but
chooses to only rarely: a group of eight sampled answers now and then holds a call, that answer is right where its
neighbours are wrong, and the correctness reward makes calling pay. A further share :attr:`ToolSpec.use_share`
shows the same call with its first token, the choice to call, left out of the loss: it trains writing the call
(copying the question's expression) and using the tool's answer without making the model call more often. The tool
answer's tokens are left out of the warm-up's loss, as TRL leaves them out of GRPO's (its ``tool_mask``).

Built like ``builtin:tiny`` (trainer.loading.tiny: the same model class, one thread, a fixed seed, a digest of the
recipe), shipped prebuilt in ``trainer/loading/builtin_tiny_tools/`` and otherwise cached under
``$GRPO_STUDIO_HOME/models/``.
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
from trainer.loading.data import Problem, arithmetic3_problems, make_prompt
from trainer.loading.tiny import (
    FORMAT_TAGS,
    INFO_FILE,
    RECORDED_LOSSES,
    SPECIAL_TOKENS,
    new_model,
    save_build,
    warmed_up,
)

log = logging.getLogger(__name__)

TOOL_TAGS = ["<tool_call>", "</tool_call>"]
# The calculator's name and parameter as the warm-up calls it (trainer.tools.builtin.calculator, builtin:calculator).
TOOL_NAME = "calculator"
# transformers renders templates with trim_blocks (a newline after a block tag is dropped), so newlines that follow
# a tag are written as expressions.
CHAT_TEMPLATE = (
    "{% set offset = 1 if messages and messages[0].role == 'system' else 0 %}"
    "{% if tools or offset %}<|im_start|>system{{ '\\n' }}{% if offset %}{{ messages[0].content }}{% endif %}"
    "{% if tools %}{{ '\\nTools:' }}{% for tool in tools %}"
    "{% set f = tool.function if tool.function is defined else tool %}"
    "{{ ' ' + f.name }}({{ (f.parameters.properties if f.parameters is defined else {}) | join(', ') }})"
    "{% endfor %}{% endif %}<|im_end|>{{ '\\n' }}{% endif %}"
    "{% for message in messages[offset:] %}<|im_start|>{{ message.role + '\\n' }}{{ message.content or '' }}"
    "{% for call in message.tool_calls or [] %}{% set call = call.function if call.function is defined else call %}"
    '<tool_call>{{ \'\\n\' }}{"name": "{{ call.name }}", "arguments": '
    "{% if call.arguments is string %}{{ call.arguments }}{% else %}{{ call.arguments | tojson }}{% endif %}"
    "{{ '}\\n' }}</tool_call>{% endfor %}<|im_end|>{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{{ '\\n' }}{% endif %}"
)


def response_template() -> dict:
    """How TRL reads this model's tool calls back: TRL's Qwen3 response template, whose tool calls are written as
    this template writes them (trl/chat_template_utils.py, ``qwen3_template``)."""
    from trl.chat_template_utils import qwen3_template

    return qwen3_template


@dataclass(frozen=True)
class ToolSpec:
    """Size and warm-up budget of the tool-calling built-in model (the sizes are builtin:tiny's, trainer.loading.tiny)."""

    hidden_size: int = 96
    num_layers: int = 3
    num_heads: int = 4
    intermediate_size: int = 256
    vocab_size: int = 400  # 256 bytes + merges for the prompt's fixed text and the tool call's; digits stay single
    sft_steps: int = 600  # the format and the copying of a tool's answer are learned well before this
    sft_batch_size: int = 32
    sft_lr: float = 3e-3
    # the share of warm-up examples that call the calculator: rare enough that greedy answers never call it (the
    # demo's starting point), common enough that a group of eight sampled answers often holds one call
    tool_share: float = 0.1
    # the share of draws with a call whose first token (the choice to call) is not trained: with calls in 1 draw in
    # 10 only, the model called but then answered from its own head (0 of 5 copied the tool's answer); training only
    # the answer after the tool, it copied the answer but miscopied the question into the call (4 of 5)
    use_share: float = 0.5
    seed: int = 0

    @property
    def cache_name(self) -> str:
        """Directory name under ``models/``, unique per spec."""
        return "tiny-tools-" + "-".join(str(v) for v in asdict(self).values()).replace(".", "p")


DEFAULT_TOOL_SPEC = ToolSpec()
SHIPPED_TOOLS = Path(__file__).resolve().parent / "builtin_tiny_tools"


def tool_schemas() -> list[dict]:
    """The schema of the calculator, as TRL hands it to the template (transformers builds it from the docstring)."""
    from transformers.utils import get_json_schema

    from trainer.tools.builtin import TOOLS

    return [get_json_schema(TOOLS[TOOL_NAME])]


def shipped_tool_model(spec: ToolSpec = DEFAULT_TOOL_SPEC) -> Path | None:
    """The prebuilt tool model that ships with grpo-studio, if it is of ``spec`` (and its files are all there)."""
    try:
        info = json.loads((SHIPPED_TOOLS / INFO_FILE).read_text())
    except (OSError, ValueError):
        return None
    complete = all((SHIPPED_TOOLS / n).is_file() for n in ("config.json", "model.safetensors", "tokenizer.json"))
    return SHIPPED_TOOLS if complete and info.get("spec") == asdict(spec) else None


def tiny_tools_dir(spec: ToolSpec = DEFAULT_TOOL_SPEC, root: Path | None = None) -> Path:
    """The directory of the tool model: the shipped one for the default spec, else a cached build (made first)."""
    from storage.db import data_dir

    if root is None and (shipped := shipped_tool_model(spec)) is not None:
        return shipped
    root = root or data_dir() / "models"
    target = root / spec.cache_name
    if (target / INFO_FILE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{spec.cache_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait, then reuse its result
        if not (target / INFO_FILE).is_file():
            build_tool_model(target, spec)
    return target


def alone_answer(problem: Problem) -> str:
    """The answer worked alone, in one line: "123 + 456 = 579"."""
    expression = problem.question.removeprefix("What is ").removesuffix("?")
    return f"<reasoning>\n{expression} = {problem.answer}\n</reasoning>\n<answer>\n{problem.answer}\n</answer>"


def tool_call(problem: Problem) -> dict:
    """The calculator call that answers ``problem``, as an assistant message."""
    expression = problem.question.removeprefix("What is ").removesuffix("?")
    call = {"type": "function", "function": {"name": TOOL_NAME, "arguments": {"expression": expression}}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def used_answer(problem: Problem) -> str:
    """The answer after the calculator's: its value, copied. Not the one-line working again: written so ("123 + 456 =
    579"), the model re-derived the sum from the expression it had just copied and got it wrong as often as alone
    (8 of 8 sampled answers after a call were wrong in one step of GRPO)."""
    return f"<answer>\n{problem.answer}\n</answer>"


def conversation(problem: Problem, with_tool: bool) -> list[dict]:
    """A whole warm-up conversation: the prompt, then the answer alone, or the call, its answer and the answer."""
    messages = make_prompt(problem.question, SYSTEM_PROMPT)
    if not with_tool:
        return messages + [{"role": "assistant", "content": alone_answer(problem)}]
    return messages + [
        tool_call(problem),
        {"role": "tool", "name": TOOL_NAME, "content": problem.answer},
        {"role": "assistant", "content": used_answer(problem)},
    ]


def tokenizer_corpus() -> list[str]:
    """The text the tokenizer's merges are learned from: each warm-up conversation rendered, alone and with a call."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    plain = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()))
    plain.chat_template = CHAT_TEMPLATE
    schemas = tool_schemas()
    return [
        plain.apply_chat_template(conversation(p, with_tool), tools=schemas, tokenize=False)
        for p in arithmetic3_problems("train")
        for with_tool in (False, True)
    ]


def build_tokenizer():
    """A byte-level BPE tokenizer trained on the tool task's text (tiny.build_tokenizer's, with the call's tags)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=DEFAULT_TOOL_SPEC.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tokenizer_corpus(), trainer=trainer)
    # whole tokens, not special: TRL decodes with skip_special_tokens=True, and the parser must still see the tags
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in FORMAT_TAGS + TOOL_TAGS])
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
    fast.response_template = response_template()
    return fast


def warm_up_examples(tokenizer) -> list[tuple[list[int], ...]]:
    """Every warm-up example as token ids and three loss masks, one per training problem: (ids answered alone, its
    mask, ids answered with a call, the mask of a call, the mask of a call made but not decided). A mask is 1 on an
    assistant turn (after its header, through its end-of-turn token) and 0 on the prompt, the headers and the tool's
    answer, as GRPO's completion mask and TRL's tool mask leave them; the last one leaves out the call's first token
    too, the one that decides to call, so that it teaches writing a call and using its answer, not calling."""
    schemas = tool_schemas()
    header = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]

    def tokens(messages: list[dict]) -> tuple[list[int], list[list[int]]]:
        text = tokenizer.apply_chat_template(messages, tools=schemas, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        turns = []
        for start in range(len(ids) - len(header) + 1):
            if ids[start : start + len(header)] == header:
                end = ids.index(tokenizer.eos_token_id, start + len(header))
                turns.append([1 if start + len(header) <= i <= end else 0 for i in range(len(ids))])
        return ids, turns

    examples = []
    for problem in arithmetic3_problems("train"):
        alone, [alone_mask] = tokens(conversation(problem, with_tool=False))
        called, [call_mask, used_mask] = tokens(conversation(problem, with_tool=True))
        both = [a | b for a, b in zip(call_mask, used_mask)]
        # the call made, not decided: the call's first token (<tool_call>, the choice to call) left out of the loss
        made = list(both)
        made[call_mask.index(1)] = 0
        examples.append((alone, alone_mask, called, both, made))
    return examples


def _warm_up(model, tokenizer, spec: ToolSpec, losses: list[float], stop_after: int | None = None) -> None:
    """Supervised warm-up on arithmetic3's train split (:func:`warm_up_examples`). Each draw is answered with a call
    with probability ``spec.tool_share`` (both turns trained), else, with probability ``spec.use_share``, with a call
    whose first token, the choice to call, is left out of the loss (so the model learns to write a call and use its
    answer, which it rarely chooses to do), else alone."""
    import torch

    started = time.monotonic()
    examples = warm_up_examples(tokenizer)
    rng = random.Random(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.sft_lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=spec.sft_lr, total_steps=spec.sft_steps)
    model.train()
    pad = tokenizer.pad_token_id
    for step in range(spec.sft_steps):
        if stop_after is not None and step >= stop_after:
            break
        batch = []
        for alone, alone_mask, called, both, used in rng.sample(examples, spec.sft_batch_size):
            draw = rng.random()
            if draw < spec.tool_share:
                batch.append((called, both))
            elif draw < spec.tool_share + spec.use_share:
                batch.append((called, used))
            else:
                batch.append((alone, alone_mask))
        length = max(len(ids) for ids, _ in batch)
        ids = torch.full((len(batch), length), pad)
        labels = torch.full((len(batch), length), -100)
        attention = torch.zeros((len(batch), length), dtype=torch.long)
        for row, (seq, mask) in enumerate(batch):
            ids[row, : len(seq)] = torch.tensor(seq)
            labels[row, : len(seq)] = torch.tensor([t if m else -100 for t, m in zip(seq, mask)])
            attention[row, : len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        losses.append(loss.item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 100 == 0 or step == spec.sft_steps - 1:
            left = (time.monotonic() - started) / (step + 1) * (spec.sft_steps - step - 1)
            log.info(
                "building builtin:tiny-tools: warm-up pass %d/%d, loss %.3f, about %.0f s left",
                step + 1,
                spec.sft_steps,
                loss.item(),
                left,
            )
    model.eval()


def _warmed_up(spec: ToolSpec, stop_after: int | None = None):
    """A new model of ``spec`` (seeded) and this module's tokenizer, warmed up on one thread by this module's warm-up:
    (tokenizer, model, losses), as trainer.loading.tiny builds builtin:tiny."""
    return warmed_up(spec, stop_after, make_tokenizer=build_tokenizer, warm_up=_warm_up)


def first_warm_up_losses(spec: ToolSpec = DEFAULT_TOOL_SPEC, steps: int = RECORDED_LOSSES) -> list[float]:
    """The first ``steps`` warm-up losses of a build of ``spec``, from a build stopped there."""
    return _warmed_up(spec, stop_after=steps)[2]


def recipe_digest(spec: ToolSpec = DEFAULT_TOOL_SPEC) -> str:
    """A digest of everything a build reads (spec, the build's code, tokens, template, response template and the
    warm-up's text), recorded by each build so that a recipe the shipped files predate is seen without a rebuild."""
    import hashlib
    import inspect

    digest = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode())
    for step in (
        build_tokenizer,
        tokenizer_corpus,
        new_model,
        warmed_up,
        _warmed_up,
        build_tool_model,
        save_build,
        warm_up_examples,
        _warm_up,
        conversation,
        alone_answer,
        used_answer,
        tool_call,
    ):
        digest.update(inspect.getsource(step).encode())
    digest.update(json.dumps([SPECIAL_TOKENS, FORMAT_TAGS, TOOL_TAGS, CHAT_TEMPLATE, SYSTEM_PROMPT]).encode())
    digest.update(json.dumps([response_template(), tool_schemas()], sort_keys=True).encode())
    for problem in arithmetic3_problems("train"):
        digest.update(json.dumps(conversation(problem, with_tool=True)).encode())
    return digest.hexdigest()


def build_tool_model(target: Path, spec: ToolSpec = DEFAULT_TOOL_SPEC) -> Path:
    """Build, warm up and save the tool model to ``target`` (overwriting). Returns ``target``."""
    started = time.perf_counter()
    tokenizer, model, losses = _warmed_up(spec)
    made_by = "python -m trainer.loading.tiny_tools DIR (trainer.loading.tiny_tools.build_tool_model)"
    return save_build(
        target, spec, tokenizer, model, losses, started=started, made_by=made_by, digest=recipe_digest(spec)
    )


if __name__ == "__main__":  # python -m trainer.loading.tiny_tools DIR: (re)build the shipped files
    import sys

    logging.basicConfig(level=logging.INFO)
    build_tool_model(Path(sys.argv[1]) if len(sys.argv) > 1 else SHIPPED_TOOLS)
