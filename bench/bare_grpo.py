"""A bare TRL GRPOTrainer script: the baseline of bench/overhead.py.

Same model, data, rewards and settings as a grpo-studio run of the same config, with none of grpo-studio's
per-step work (no database callback, no sample table), and without printing each step's log dict (the worker doesn't
either), seeded where the worker seeds. Prints as JSON the step count, the sum of TRL's per-step ``step_time`` (the
training step proper) and each step's mean completion length (bench/overhead.py checks both sides sampled the same);
bench/train_clock.py times the training loop, as it does in the worker's process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import train_clock  # noqa: E402


def main(config_path: str, output_dir: str) -> None:
    """Train the config at ``config_path`` with a plain GRPOTrainer and print its runtime."""
    train_clock.install()
    from trl import GRPOTrainer

    from trainer.config import RunConfig
    from trainer.job.trl_args import to_trl, truncate_prompts
    from trainer.loading.backend import load_model, select_backend
    from trainer.loading.data import build_dataset
    from trainer.scoring.rewards import REWARDS

    config, _ = RunConfig.load(config_path)
    # seeded where the worker seeds (before the data set and the model: the LoRA weights are drawn when the trainer
    # wraps the model), so both sides sample the same completions and do the same work step for step
    from transformers import set_seed

    set_seed(config.seed)
    backend = select_backend(config)
    dataset = build_dataset(config)  # the worker's order: data set, then model
    model, tokenizer = load_model(config, backend)
    # the same GRPOConfig the worker builds (use_cpu included), except that it never saves
    args = to_trl(
        config,
        output_dir,
        use_vllm=backend.use_vllm,
        bf16=backend.bf16,
        cpu=backend.device == "cpu",
        save_strategy="no",
    )
    if args.prompt_truncation_needed:
        dataset, _ = truncate_prompts(dataset, tokenizer, config.max_prompt_length)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[REWARDS[name] for name in config.reward_funcs],
        args=args.grpo,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=args.lora,
    )
    # the worker drops the printer (the database holds the logs): so does the baseline, which then does strictly less
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.train()
    step_time = sum(entry.get("step_time", 0.0) for entry in trainer.state.log_history)
    key = "completions/mean_length"
    lengths = [entry[key] for entry in trainer.state.log_history if key in entry]
    print(
        json.dumps(
            {
                "steps": trainer.state.global_step,
                "step_time": step_time,
                "mean_lengths": lengths,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
