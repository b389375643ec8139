"""The supervisor: the dashboard's and the CLI's side of a run's processes. Starting a worker (``start``) or a Slurm
job (``slurm``), stopping it (``stop``), the queue and its reconciling with what is alive (``schedule``, whose
``Scheduler`` thread the dashboard runs), GPU leases (``gpu_lease``), the command lines (``commands``), a run's
directory (``run_files``), pid checks (``processes``, ``workers``), forks (``fork``), and the vLLM server's supervisor
process (``vllm_server``).

No torch at import time, and nothing of trainer.job (the training process): a worker is started by module name, so
the dashboard process stays light. The training process imports from here, never the reverse."""
