"""How the compare panel draws a side's completions: one small value passed to both samplers (PEFT in
trainer.evaluation.compare, vLLM in trainer.evaluation.vllm_sampling), so base and tuned, and both paths, always
sample with the same settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingSettings:
    """Greedy or sampled at ``temperature``/``top_p``, at most ``max_new_tokens`` tokens, seeded with ``seed``."""

    greedy: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 200
    seed: int = 0

    def generation_arguments(self) -> dict:
        """``generate``'s sampling arguments for these settings."""
        if self.greedy:
            return {"do_sample": False}
        return {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p}

    @classmethod
    def of_run(
        cls,
        config,
        *,
        greedy: bool = False,
        temperature: float | None = None,
        top_p: float | None = None,
        max_new_tokens: int | None = None,
        seed: int = 0,
    ) -> SamplingSettings:
        """The run's own generation settings (a RunConfig's), each overridable."""
        return cls(
            greedy=greedy,
            temperature=temperature or config.temperature,
            top_p=top_p or config.top_p,
            max_new_tokens=max_new_tokens or config.max_completion_length,
            seed=seed,
        )
