"""Side by side: the base model and base + a run's LoRA adapter, sampled on the same prompts with the same seeds.

One copy of the base weights: the adapter is attached to the base with PEFT and switched off for the base side
(``disable_adapter``), never a second model. The loaded model stays cached between requests (switching checkpoints
of the same run loads only the adapter) and is released when another base model is picked. torch is imported here,
on first use, never by the dashboard at start-up.

The N samples of a side are generated as one batch. On a GPU with vLLM installed (and a run that used vLLM) the
panel samples with a vLLM engine instead (:mod:`trainer.evaluation.vllm_sampling`), with the same seeds on both sides there too.

The model lives in the dashboard process; before the scheduler starts a worker on the GPU it calls
:meth:`ModelCache.release_for_training`, because vLLM in the worker refuses to start when free GPU memory is under
its share, and the panel then says why its model is gone.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainer.config import RunConfig
from trainer.evaluation.sampling import SamplingSettings
from trainer.evaluation.vllm_sampling import VllmSampler, adapter_signature, uses_vllm_engine
from trainer.scoring.rewards import correctness_reward, get_rewards, strict_format_reward
from trainer.tools.turns import completion_turns

log = logging.getLogger(__name__)

# What a comparison tells of its phases: on_phase(side, what), side "base" or "tuned", what it begins ("sampling 4
# completions") or DONE once the side is sampled and scored
OnPhase = Callable[[str, str], None]
DONE = "done"


class Cancelled(Exception):
    """A comparison cancelled by its caller (``compare``'s ``cancelled``): ``side`` and ``what`` name the phase it
    would have begun."""

    def __init__(self, side: str, what: str) -> None:
        super().__init__(f"cancelled before {side}: {what}")
        self.side, self.what = side, what


# Said beside a comparison of a run with tools (both sides answer with them: sample_with_tools)
WITH_TOOLS = (
    "Both sides were offered this run's tools, and each call was run and its answer given back as in training "
    "(each call within the run's time limit): a side's answers are rollouts as training drew them. No KL is measured "
    "between the sides here: a rollout's tool answers are not the model's tokens."
)
# and on a run that samples with vLLM, which has no tool loop here
WITH_TOOLS_NOT_VLLM = "The two sides were sampled with transformers, not vLLM: the panel's vLLM engine runs no tools."


def notes_for(config: RunConfig, caps=None) -> list[str]:
    """What a comparison of a run of ``config`` says beside its two sides: that a tool run's sides called its tools
    (and, where the panel would sample that run with vLLM, were sampled without it). ``caps``: the machine's
    (trainer.loading.backend.probe), probed when not given."""
    if not config.uses_tools():
        return []
    return [WITH_TOOLS] + ([WITH_TOOLS_NOT_VLLM] if uses_vllm_engine(config, caps) else [])


@dataclass
class Side:
    """One column of the comparison: the completions and their scores."""

    completions: list[str]
    rewards: list[dict[str, float | None]]
    totals: list[float]
    mean_reward: float
    formatted: int
    correct: int
    # a tool run's answers turn by turn (trainer.tools.turns.completion_turns); None for a run without tools, whose
    # completions are their text
    turns: list[list[dict]] | None = None


@dataclass
class Comparison:
    """Base and tuned side by side for one prompt."""

    base: Side
    tuned: Side
    reference: str | None = None
    notes: list[str] = field(default_factory=list)
    identical: int = 0  # completion pairs (same seed) where base and tuned wrote the same text
    kl: float | None = None  # mean per-token KL(tuned ‖ base) on the tuned completions (PEFT path only)

    def why(self) -> str:
        """A sentence on how far apart the two sides are, so identical text is a measured fact, not a puzzle."""
        n = len(self.tuned.completions)
        same = f"Base and tuned wrote the same text in {self.identical} of {n} completions (same seeds)"
        if self.kl is None:
            return same + "." if self.identical else ""
        kl = f"mean per-token KL(tuned ‖ base) on the tuned completions: {self.kl:.3g} nats"
        if self.identical == n and self.kl < 1e-4:
            return f"{same}: the adapter has barely moved the model on this prompt ({kl})."
        if self.identical:
            return f"{same}; their token probabilities still differ ({kl})."
        return kl[0].upper() + kl[1:] + "."


class ModelCache:
    """Holds at most one base model with the adapters loaded onto it. Thread-safe: Gradio may call concurrently."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.base_path: str | None = None
        self.model = None  # a PeftModel once an adapter is attached
        self.tokenizer = None
        self.adapters: dict[str, str] = {}  # adapter name -> its directory
        self.engine: VllmSampler | None = None  # on the vLLM path, instead of model/tokenizer
        self.notice: str | None = None  # why the model was released, for the panel
        # The GPU's lease (trainer.supervise.gpu_lease) while a model is on the GPU. The dashboard is refused at once when
        # another process holds it (a request must not hang); an evaluation job waits as a worker does.
        self.lease = None
        self.lease_what = "the dashboard's Compare panel"
        self.lease_wait_s = 0.0

    def get(self, base_path: str, adapter_dir: Path, on_phase: OnPhase | None = None):
        """The PEFT model with ``adapter_dir`` active, loading the base and/or the adapter as needed (``on_phase``
        hears each load as it begins: the base's model, the tuned side's adapter)."""
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        from trainer.loading.backend import load_tokenizer
        from trainer.loading.hub import hub_access

        if self.base_path != base_path or self.model is None:
            self.release()
            if on_phase:
                on_phase("base", f"loading the model ({base_path})")
            if torch.cuda.is_available():
                self._take_gpu()
            dtype = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32
            with hub_access(base_path):
                base = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype)
            if torch.cuda.is_available():
                base = base.to("cuda")
            self.tokenizer = load_tokenizer(base_path)
            self.base_path = base_path
            self.model = base
        # Named by the directory *and* its files, so an adapter rewritten in place (a resumed run saves adapter/
        # again) is loaded anew rather than served from memory (issue 26, item 3).
        name = "a" + str(abs(hash((str(adapter_dir), adapter_signature(adapter_dir)))))
        if name not in self.adapters:
            if on_phase:
                on_phase("tuned", f"loading the adapter ({adapter_dir.name})")
            if not self.adapters:
                self.model = PeftModel.from_pretrained(self.model, str(adapter_dir), adapter_name=name)
            else:
                self.model.load_adapter(str(adapter_dir), adapter_name=name)
            stale = [old for old, path in self.adapters.items() if path == str(adapter_dir)]
            self.adapters[name] = str(adapter_dir)
            self.model.set_adapter(name)
            for old in stale:  # the same directory's earlier files: not needed again
                self.model.delete_adapter(old)
                del self.adapters[old]
        self.model.set_adapter(name)
        self.model.eval()
        return self.model, self.tokenizer

    def engine_for(self, config: RunConfig, base_path: str, on_phase: OnPhase | None = None) -> VllmSampler:
        """The vLLM engine for ``base_path`` (the vLLM path of :func:`compare`), replacing a PEFT model if one is held."""
        if self.engine is None or self.base_path != base_path:
            self.release()
            if on_phase:
                on_phase("base", f"starting vLLM for {base_path}")
            self._take_gpu()
            self.engine = VllmSampler(base_path, config)
            self.base_path = base_path
        self.notice = None
        return self.engine

    def release_for_training(self, run_label: str) -> bool:
        """Free the GPU for a worker that is about to start: drop the model and say so in :attr:`notice`. Returns
        whether a model was held. Waits for a request in progress (it holds the lock) to finish first."""
        with self.lock:
            if self.model is None and self.engine is None:
                return False
            self.release()
            self.notice = (
                f"The panel's model was released from the GPU so that {run_label} could start training; "
                "it loads again on your next request."
            )
            log.info("compare panel: released its model for %s", run_label)
            return True

    def _take_gpu(self) -> None:
        """Hold GPU 0's lease (raises trainer.supervise.gpu_lease.GpuBusy, naming the holder, when another process has it)."""
        from trainer.supervise.gpu_lease import acquire, physical_gpu

        if self.lease is None:
            self.lease = acquire(self.lease_what, physical_gpu(0), wait_s=self.lease_wait_s)

    def release(self) -> None:
        """Drop the cached model (or vLLM engine), free its memory and give the GPU's lease back."""
        if self.engine is not None:
            self.engine.shutdown()
        self.model = self.tokenizer = self.base_path = self.engine = None
        self.adapters = {}
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover
            pass
        if self.lease is not None:
            self.lease.release()
            self.lease = None


CACHE = ModelCache()


def base_weight_bytes(model) -> int:
    """Bytes held by non-LoRA parameters, counting shared storage once (one copy of the base means this equals the
    base model's own size)."""
    seen, total = set(), 0
    for name, p in model.named_parameters():
        if "lora_" in name:
            continue
        ptr = p.untyped_storage().data_ptr()
        if ptr not in seen:
            seen.add(ptr)
            total += p.untyped_storage().nbytes()
    return total


def generate_group(
    model, tokenizer, messages: list[dict], n: int, settings: SamplingSettings, stop: Callable[[], bool] | None = None
):
    """``n`` completions for one chat prompt, generated as one batch of ``n`` copies of the prompt after seeding
    with ``settings.seed``: (token ids of prompt + completion, the prompt's length). ``stop``: asked after each token,
    ends the generation early when it says True (a cancelled comparison). The pre-launch probe samples its groups with
    this too."""
    import torch

    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    batch = tokenizer([text] * n, return_tensors="pt", add_special_tokens=False).to(model.device)
    kwargs = settings.generation_arguments()
    if stop is not None:
        from transformers import StoppingCriteria, StoppingCriteriaList

        class Stop(StoppingCriteria):
            def __call__(self, input_ids, scores, **_) -> torch.BoolTensor:
                return torch.full((input_ids.shape[0],), stop(), dtype=torch.bool, device=input_ids.device)

        kwargs["stopping_criteria"] = StoppingCriteriaList([Stop()])
    with torch.no_grad():
        torch.manual_seed(settings.seed)
        ids = model.generate(
            **batch,
            max_new_tokens=settings.max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **kwargs,
        )
    return ids, batch["input_ids"].shape[1]


def sample(
    model,
    tokenizer,
    messages: list[dict],
    n: int,
    settings: SamplingSettings,
    *,
    adapter: bool,
    stop: Callable[[], bool] | None = None,
) -> list[str]:
    """``n`` completions for one chat prompt with the adapter on or off (:func:`generate_group`, ``stop`` with it).
    Both sides draw the same random numbers in the same order, so base and tuned see the same randomness (completion
    i of each side uses the same draws)."""
    import contextlib

    with contextlib.nullcontext() if adapter else model.disable_adapter():
        ids, prompt_length = generate_group(model, tokenizer, messages, n, settings, stop)
    return tokenizer.batch_decode(ids[:, prompt_length:], skip_special_tokens=True)


def sample_with_tools(
    model,
    tokenizer,
    messages: list[dict],
    reference: str | None,
    n: int,
    settings: SamplingSettings,
    tools_for,
    *,
    adapter: bool,
) -> list[list[dict]]:
    """``n`` answers to one chat prompt with the run's tools, the adapter on or off, as training's rollouts are drawn
    (trainer.evaluation.tool_turns: each call run within its time limit, its answer given back, the model going on):
    each answer as chat messages. Seeded with ``settings.seed`` on both sides, as :func:`sample` is; ``tools_for``
    gives an answer's tools (trainer.evaluation.tool_turns.run_tools), a run with an environment resetting a fresh
    one with the question and the reference."""
    import contextlib

    import torch

    from trainer.evaluation.tool_turns import generate_with_tools

    row = {"question": str(messages[-1].get("content", "")), "answer": reference}
    with contextlib.nullcontext() if adapter else model.disable_adapter():
        torch.manual_seed(settings.seed)
        answers, _, _ = generate_with_tools(
            model,
            tokenizer,
            [messages] * n,
            [row] * n,
            tools_for,
            settings.max_new_tokens,
            sampling=settings.generation_arguments(),
        )
    return answers


def score(
    config: RunConfig,
    messages: list[dict],
    completions: list[str],
    reference: str | None,
    tests: list[str] | None = None,
) -> Side:
    """Score completions with the run's reward functions (built from its config, as in training) and weights."""
    n = len(completions)
    columns = {"answer": [reference] * n}
    if tests:
        columns["tests"] = [tests] * n
    per_reward = {
        name: reward(prompts=[messages] * n, completions=completions, **columns)
        for name, reward in zip(config.reward_funcs, get_rewards(config))
    }
    weights = dict(zip(config.reward_funcs, config.weights()))
    rewards = [{name: per_reward[name][i] for name in config.reward_funcs} for i in range(n)]
    totals = [sum(weights[k] * v for k, v in r.items() if v is not None) for r in rewards]
    strict = strict_format_reward(prompts=None, completions=completions)
    correct = correctness_reward(prompts=None, completions=completions, answer=[reference] * n)
    return Side(
        completions=completions,
        rewards=rewards,
        totals=totals,
        mean_reward=sum(totals) / n if n else 0.0,
        formatted=sum(1 for s in strict if s),
        correct=sum(1 for c in correct if c),
    )


def compare(
    config: RunConfig,
    adapter_dir: Path,
    messages: list[dict],
    reference: str | None,
    *,
    n: int = 4,
    greedy: bool = False,
    temperature: float | None = None,
    top_p: float | None = None,
    max_new_tokens: int | None = None,
    seed: int = 0,
    on_phase: OnPhase | None = None,
    cancelled: Callable[[], bool] | None = None,
    cache: ModelCache = CACHE,
) -> Comparison:
    """Sample ``n`` completions from base and tuned with the run's sampling settings and score both sides: the base
    side whole (sampled, then scored), then the tuned one. ``on_phase(side, what)`` hears each phase as it begins,
    and ``(side, DONE)`` as a side ends; ``cancelled`` is asked between phases and after each generated token, and
    raises :class:`Cancelled` once it says True (a load in progress finishes first)."""
    from trainer.loading.backend import model_path

    settings = SamplingSettings.of_run(
        config, greedy=greedy, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed
    )
    said = on_phase or (lambda side, what: None)

    told: set[str] = set()

    def phase(side: str, what: str) -> None:
        if cancelled is not None and cancelled():
            raise Cancelled(side, what)
        told.add(side)
        said(side, what)

    kl = None
    sampled = f"sampling {n} completion{'s' if n != 1 else ''}"
    with cache.lock:
        # a tool run's sides on transformers: the panel's vLLM engine has no tool loop
        if uses_vllm_engine(config) and not config.uses_tools():
            engine = cache.engine_for(config, model_path(config), phase)
            phase("base", sampled)
            base = engine.sample(messages, n, None, settings)
            base_side = _scored(config, messages, base, reference, phase)
            phase("tuned", sampled)
            tuned = engine.sample(messages, n, adapter_dir, settings)
        else:
            model, tokenizer = cache.get(model_path(config), adapter_dir, phase)
            cache.notice = None
            if "tuned" in told:  # its adapter loaded with the base (one model): it waits while the base samples
                phase("tuned", "adapter loaded; waiting for the base side")
            if config.uses_tools():  # both sides with the run's tools (no KL: tool answers are not the model's tokens)
                from trainer.evaluation.tool_turns import run_tools

                tools_for = run_tools(config)
                phase("base", sampled + " with the run's tools")
                base = sample_with_tools(model, tokenizer, messages, reference, n, settings, tools_for, adapter=False)
                base_side = _scored(config, messages, base, reference, phase)
                phase("tuned", sampled + " with the run's tools")
                tuned = sample_with_tools(model, tokenizer, messages, reference, n, settings, tools_for, adapter=True)
            else:
                stop = cancelled or (lambda: False)
                phase("base", sampled)
                base = sample(model, tokenizer, messages, n, settings, adapter=False, stop=stop)
                base_side = _scored(config, messages, base, reference, phase)
                phase("tuned", sampled)
                tuned = sample(model, tokenizer, messages, n, settings, adapter=True, stop=stop)
                phase("tuned", "measuring KL(tuned ‖ base) on its completions")
                kl = token_kl(model, tokenizer, messages, tuned)
    result = Comparison(base_side, _scored(config, messages, tuned, reference, phase, "tuned"), reference)
    if config.uses_tools():
        for side in (result.base, result.tuned):
            side.turns = [completion_turns(answer) for answer in side.completions]
            side.completions = [final_text(answer) for answer in side.completions]
    result.notes = notes_for(config)
    result.identical = sum(1 for b, t in zip(base, tuned) if b == t)
    result.kl = kl
    return result


def _scored(config: RunConfig, messages: list[dict], completions: list, reference, phase, side: str = "base") -> Side:
    """One side's completions scored (:func:`score`), its phases told: scoring, then done. A generation that a
    cancel cut short is not scored."""
    phase(side, "scoring")
    scored = score(config, messages, completions, reference)
    phase(side, DONE)
    return scored


def final_text(answer: list[dict]) -> str:
    """A tool run's answer's last assistant text (what its answer tag is read from)."""
    said = [str(m.get("content") or "") for m in answer if m.get("role") == "assistant"]
    return said[-1] if said else ""


def token_kl(model, tokenizer, messages: list[dict], completions: list[str]) -> float | None:
    """Mean per-token KL(tuned ‖ base), in nats, over the tokens of ``completions`` (the tuned side's) as the two
    models read them: how far apart their next-token distributions are on that text, even where both would write
    the same thing. None when there are no completion tokens."""
    import contextlib

    import torch

    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    total, count = 0.0, 0
    for text in completions:
        ids = tokenizer(prompt + text, return_tensors="pt", add_special_tokens=False)["input_ids"].to(model.device)
        if ids.shape[1] <= start:
            continue
        log_probs = {}
        for adapter in (True, False):
            with contextlib.nullcontext() if adapter else model.disable_adapter(), torch.no_grad():
                logits = model(input_ids=ids).logits[0, start - 1 : -1].float()
            log_probs[adapter] = torch.log_softmax(logits, dim=-1)
        tuned, base = log_probs[True], log_probs[False]
        total += float((tuned.exp() * (tuned - base)).sum())
        count += tuned.shape[0]
    return total / count if count else None
