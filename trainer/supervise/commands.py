"""The command lines that start a run's processes, as plain lists of strings (tests/runs/test_slurm.py parses them with
accelerate's and TRL's own argument parsers).

- :func:`worker_command`: one machine; the worker itself, or one worker per process (``accelerate launch`` on GPUs,
  ``torchrun`` on CPUs).
- :func:`node_command`: one node of a multi-node Slurm job: ``accelerate launch --num_machines N --machine_rank
  $SLURM_NODEID --main_process_ip <first node>`` (accelerate 1.15 commands/launch.py:198-201, 292-300), run once per
  node by ``srun``. ``--num_processes`` is the total over all machines (its help: "The total number of processes to be
  launched in parallel").
- :func:`vllm_serve_command`: TRL's generation server, ``trl vllm-serve`` (trl 1.15.0 and 1.16.0
  cli/commands/vllm_serve.py:24; flags from the ScriptArguments of scripts/vllm_serve.py: ``--model`` :85,
  ``--tensor_parallel_size`` :92, ``--host`` :103, ``--port`` :107, ``--gpu_memory_utilization`` :111,
  ``--max_model_len`` :127), as TRL's docs run it on GPUs of its own (https://huggingface.co/docs/trl/vllm_integration:
  "CUDA_VISIBLE_DEVICES=0,1,2,3 trl vllm-serve --model ...", the trainer on the other GPUs).
- :func:`supervised`: a command wrapped in trainer.supervise.vllm_server, which runs the server beside it (server mode).

The environment variables named ``$...`` in :func:`node_command` are left for the node's shell to expand.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

WORKER = ("trainer.job.worker",)
# Placeholders that each node's shell expands: Slurm's node index, and the first node's name (the job script sets it).
NODE_RANK = "$SLURM_NODEID"
MAIN_NODE = "$GRPO_STUDIO_MAIN_NODE"
MAIN_PORT = 29500  # torch.distributed's usual rendezvous port; the job has its nodes to itself
# Where the run's vLLM server listens (server mode), in the training command's environment: set by the vLLM server's
# supervisor (trainer.supervise.vllm_server) or the Slurm job script, read by trainer.job.trl_args.vllm_server_kwargs.
VLLM_SERVER_ENV = "GRPO_STUDIO_VLLM_SERVER"  # host:port of the run's vLLM server
VLLM_GROUP_PORT_ENV = "GRPO_STUDIO_VLLM_GROUP_PORT"


PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding trainer/, app/ and storage/


def with_package_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the package root first on PYTHONPATH: a process started from it finds the packages even when
    grpo-studio runs from a source checkout rather than an install."""
    return env | {"PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)}


def _accelerate(processes: int, machines: int) -> list[str]:
    """``accelerate launch`` up to the machine flags, with what the worker needs and the config file doesn't say."""
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--num_processes",
        str(processes),
        "--num_machines",
        str(machines),
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
    ]


def _worker_tail(run_id: int, deepspeed_stage: int) -> list[str]:
    """The distribution flags and the worker module that end every accelerate command line."""
    flags = ["--use_deepspeed", "--zero_stage", str(deepspeed_stage)] if deepspeed_stage else ["--multi_gpu"]
    return [*flags, "--module", *WORKER, str(run_id)]


def worker_command(run_id: int, num_processes: int = 1, deepspeed_stage: int = 0, cpu: bool = False) -> list[str]:
    """The command line that trains ``run_id`` on one machine: the worker itself, or with ``num_processes`` > 1 one
    worker per process: ``accelerate launch`` on GPUs (optionally DeepSpeed ZeRO), plain ``torchrun`` on CPUs
    (accelerate's launcher runs a single process there; the Accelerator inside the worker picks up torchrun's
    environment and uses gloo). Only the main process writes to the database (see trainer.job.worker)."""
    if num_processes <= 1:
        return [sys.executable, "-m", *WORKER, str(run_id)]
    if cpu:
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(num_processes),
            "-m",
            *WORKER,
            str(run_id),
        ]
    command = _accelerate(num_processes, 1) + ["--main_process_port", "0"]
    return command + _worker_tail(run_id, deepspeed_stage)


def node_command(run_id: int, nodes: int, processes_per_node: int, deepspeed_stage: int = 0) -> list[str]:
    """What ``srun`` runs once on each of ``nodes`` nodes: accelerate with this node's rank and the first node as the
    rendezvous. Global rank 0 is process 0 of node 0, the only one that writes to the database (RANK, set by
    accelerate: trainer.job.callback.is_main_process)."""
    machine = ["--machine_rank", NODE_RANK, "--main_process_ip", MAIN_NODE, "--main_process_port", str(MAIN_PORT)]
    command = _accelerate(nodes * processes_per_node, nodes) + machine + ["--same_network"]
    return command + _worker_tail(run_id, deepspeed_stage)


def vllm_serve_command(
    model: str, gpus: int, port: int, gpu_memory_utilization: float, max_model_len: int, host: str = "127.0.0.1"
) -> list[str]:
    """``trl vllm-serve`` for ``model`` on ``gpus`` GPUs (tensor parallel), listening on ``host:port``. It binds the
    loopback address by default: the trainer is on the same node, and nothing else should reach the server."""
    return [
        sys.executable,
        "-m",
        "trl.cli.main",
        "vllm-serve",
        "--model",
        model,
        "--tensor_parallel_size",
        str(gpus),
        "--host",
        host,
        "--port",
        str(port),
        "--gpu_memory_utilization",
        str(gpu_memory_utilization),
        "--max_model_len",
        str(max_model_len),
    ]


def supervised(run_id: int, command: list[str]) -> list[str]:
    """``command`` run under trainer.supervise.vllm_server, which starts the run's vLLM server first and stops it last."""
    return [sys.executable, "-m", "trainer.supervise.vllm_server", str(run_id), "--", *command]
