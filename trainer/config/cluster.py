"""The rules of the cluster settings (executor, Slurm resources, vLLM server mode), composed by trainer.review,
and the readings of those settings the Slurm launcher shares with them (trainer.supervise.slurm, trainer.supervise.vllm_server):
a time limit in seconds, one slurm_extra option, the vLLM server's GPUs and node layout.

The Slurm executor needs one database every node can reach: compute nodes can't share a SQLite file safely (its
locking relies on one machine's file locks, which network filesystems don't reliably give), so the dashboard refuses
the executor on SQLite and says to point ``DATABASE_URL`` at PostgreSQL; the workers read it from the job's
environment.
"""

from __future__ import annotations

import re
from pathlib import Path

from storage.db import data_dir, database_url
from trainer.config.run_config import RunConfig
from trainer.config.values import shorten

# Slurm's --time formats (sbatch(1)): minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]]
SLURM_TIME = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE)$")
# The shortest time limit a run is submitted with: loading the model and the first steps take a minute or two.
MIN_SLURM_SECONDS = 180


def slurm_seconds(text: str) -> int | None:
    """A Slurm time limit in seconds (sbatch(1) formats: "90" minutes, "mm:ss", "hh:mm:ss", "d-hh[:mm[:ss]]"); None
    for UNLIMITED, INFINITE or an empty limit."""
    text = text.strip()
    if not text or text in ("UNLIMITED", "INFINITE"):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:
        hours, minutes, seconds = (parts + [0, 0])[:3]
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return (parts[0] * 60 + parts[1]) * 60 + parts[2]


def stop_margin(limit_seconds: int | None) -> int:
    """How long before its time limit a job is asked to stop (``--signal=B:TERM@N``): a tenth of the limit, between
    30 s and 5 minutes, so a short limit still leaves most of its time to train (a fixed 5 minutes stopped a 5-minute
    job 13 s in) and a long one time to finish a step and save."""
    if limit_seconds is None:
        return 300
    return int(min(300, max(30, limit_seconds // 10)))


# Slurm partition and account names are plain identifiers; a partition setting may list several, comma-separated.
SLURM_MEM = re.compile(r"^\d+[KMGT]?$", re.IGNORECASE)
SLURM_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")
SLURM_NAMES = re.compile(r"^[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*$")
# The sbatch options slurm_extra may add: resources, placement, QoS and notices. Not the ones that choose files
# (--output, --error, --input, --chdir), the environment or identity (--export, --get-user-env, --uid, --gid), or run
# commands and scripts (--wrap, --bb, --bbf, --container): a dashboard user must not make the operator's job write
# or run something of their choosing. grpo-studio sets the job's name, log, directory and signal itself.
SLURM_EXTRA_OPTIONS = frozenset(
    """qos constraint cluster-constraint mem mem-per-cpu mem-per-gpu cpus-per-task cpus-per-gpu gres gpus gpus-per-task
    gpu-bind gpu-freq exclusive oversubscribe reservation nodelist exclude mail-type mail-user requeue no-requeue
    comment hint switches distribution time-min nice priority begin deadline dependency licenses tmp core-spec
    thread-spec cores-per-socket sockets-per-node threads-per-core ntasks-per-core ntasks-per-socket mincpus
    network power prefer spread-job use-min-nodes wckey mcs-label extra acctg-freq kill-on-invalid-dep""".split()
)
SLURM_SHORT_OPTIONS = {"-q": "qos", "-C": "constraint", "-c": "cpus-per-task", "-w": "nodelist", "-x": "exclude"}


# Filesystem types (/proc/mounts) that several machines mount at once.
SHARED_FILESYSTEMS = frozenset(
    "nfs nfs4 lustre gpfs beegfs cephfs ceph glusterfs fuse.glusterfs wekafs panfs cifs smb3 fuse.sshfs fuse.juicefs "
    "fuse.s3fs 9p virtiofs".split()
)


def filesystem_type(path: Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem ``path`` is on (the longest mount point above it in /proc/mounts); None if unknown."""
    try:
        mounts = Path("/proc/mounts").read_text() if mounts is None else mounts
    except OSError:
        return None
    target, best, kind = str(path.resolve()), -1, None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) > 2:
            point = fields[1]
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and len(point) > best:
                best, kind = len(point), fields[2]
    return kind


def cluster_warnings(config: RunConfig) -> list[str]:
    """A data dir on a local filesystem, for a Slurm run: fine when the jobs run on this machine, else they won't see
    it (the job checks at its start and fails the run saying so)."""
    kind = filesystem_type(data_dir()) if config.executor == "slurm" else None
    if kind is None or kind in SHARED_FILESYSTEMS:
        return []
    return [
        f"executor slurm: the data dir {data_dir()} is on a local {kind} filesystem, which compute nodes other than "
        "this machine can't see; put GRPO_STUDIO_HOME on a shared filesystem (NFS, Lustre...)"
    ]


def vllm_gpu_positions(config: RunConfig) -> list[int]:
    """The positions (among the node's visible GPUs) set aside for the vLLM server; raises ValueError if malformed."""
    return [int(part) for part in config.vllm_gpus.split(",") if part.strip()]


def cluster_problems(config: RunConfig) -> list[str]:
    """Every problem with the cluster settings, in plain words."""
    found: list[str] = []
    if config.executor == "slurm":
        if database_url().startswith("sqlite"):
            found.append(
                "executor slurm needs a database every node can reach, and this dashboard uses a SQLite file that "
                "compute nodes can't share safely: set DATABASE_URL to PostgreSQL (e.g. "
                "postgresql+psycopg://user:password@dbhost/grpo) for the dashboard, then start it again"
            )
        if config.slurm_time and not SLURM_TIME.match(config.slurm_time.strip()):
            found.append(f"slurm_time {config.slurm_time!r} is not a Slurm time limit: use e.g. 90, 04:00:00 or 2-00")
        elif (limit := slurm_seconds(config.slurm_time)) is not None and limit < MIN_SLURM_SECONDS:
            found.append(
                f"slurm_time {config.slurm_time!r} is {limit} s: too short to load the model and train; give at "
                f"least {MIN_SLURM_SECONDS // 60} minutes (a run stops and saves before its limit; resume continues it)"
            )
        if config.slurm_partition and not SLURM_NAMES.match(config.slurm_partition):
            found.append(
                f"slurm_partition {shorten(config.slurm_partition)}: expected a partition name (letters, digits, "
                "_ . + -), or several separated by commas"
            )
        if config.slurm_account and not SLURM_NAME.match(config.slurm_account):
            found.append(
                f"slurm_account {shorten(config.slurm_account)}: expected an account name (letters, digits, _ . + -)"
            )
        if config.slurm_mem and not SLURM_MEM.match(config.slurm_mem.strip()):
            found.append(f"slurm_mem {shorten(config.slurm_mem)}: expected a size such as 64G, 512M or 0 (all of it)")
        found.extend(p for p in map(extra_option_problem, config.slurm_extra) if p)
    elif config.slurm_nodes > 1:
        found.append(f"slurm_nodes is {config.slurm_nodes} but executor is local: more nodes need executor slurm")
    if config.vllm_mode == "server":
        found.extend(_server_mode_problems(config))
    return found


def extra_option(option: str) -> tuple[str, str | None] | None:
    """One slurm_extra entry as (option, value): ``--qos=high`` → ("--qos", "high"), ``--exclusive`` →
    ("--exclusive", None), ``-C a100`` or ``-Ca100`` → ("-C", "a100"); None when it is not exactly one option (sbatch
    reads every option of an ``#SBATCH`` line, so ``--exclusive --output=x`` would be two)."""
    text = option.strip()
    if match := re.fullmatch(r"(--[A-Za-z][A-Za-z0-9-]*)(?:=(.*))?", text, re.DOTALL):
        return match.group(1), match.group(2)
    if match := re.fullmatch(r"(-[A-Za-z])\s*(\S.*)?", text, re.DOTALL):
        return match.group(1), match.group(2)
    return None


def extra_option_problem(option: str) -> str | None:
    """Why one slurm_extra entry can't be an #SBATCH line, or None: it must be one option from
    :data:`SLURM_EXTRA_OPTIONS` (``--qos=high``, ``--exclusive``, ``-C a100``)."""
    parsed = extra_option(option)
    if parsed is None:
        return f"slurm_extra {shorten(option)}: each entry is one sbatch option such as --qos=high or --exclusive"
    key, _ = parsed
    name = SLURM_SHORT_OPTIONS.get(key, key[2:] if key.startswith("--") else None)
    if name not in SLURM_EXTRA_OPTIONS:
        return (
            f"slurm_extra {shorten(option)}: {shorten(key)} is not an option grpo-studio passes to sbatch; it accepts "
            "resource, placement and scheduling options (--qos, --constraint, --mem, --cpus-per-task, --gres, "
            "--exclusive, --reservation, --nodelist, --exclude, --mail-type, ...), not ones that choose files, the "
            "environment or commands (grpo-studio sets the job's name, log and directory itself)"
        )
    return None


def vllm_node_layout(config: RunConfig) -> bool:
    """Whether the run uses the multi-node layout of TRL's and open-r1's docs: ``trl vllm-serve`` on a node of its
    own (the job's last), training on the other ``slurm_nodes - 1`` (trainer.supervise.slurm.launch_lines)."""
    return config.vllm_mode == "server" and config.executor == "slurm" and config.slurm_nodes > 1


def _server_mode_problems(config: RunConfig) -> list[str]:
    found = []
    if config.backend != "trl" or not config.use_vllm:
        found.append("vllm_mode server is TRL's vLLM client: set backend trl and use_vllm true (or vllm_mode colocate)")
    if vllm_node_layout(config):  # vLLM takes the whole last node; vllm_gpus is for sharing one node
        if config.vllm_gpus.strip():
            found.append(
                f"vllm_gpus {config.vllm_gpus!r}: with slurm_nodes {config.slurm_nodes}, vLLM runs on a node of its "
                "own (the job's last) with all its GPUs; leave vllm_gpus empty (it splits the GPUs of one node)"
            )
        if not config.slurm_gpus_per_node:
            found.append("vllm_mode server on a node of its own needs GPUs: set slurm_gpus_per_node")
        elif config.num_processes > config.slurm_gpus_per_node:
            found.append(
                f"num_processes {config.num_processes} is per training node: at most slurm_gpus_per_node "
                f"({config.slurm_gpus_per_node})"
            )
        return found
    try:
        positions = vllm_gpu_positions(config)
    except ValueError:
        return found + [f"vllm_gpus {config.vllm_gpus!r}: expected GPU positions separated by commas, e.g. 0 or 0,1"]
    if not positions:
        found.append("vllm_mode server needs vllm_gpus: the GPUs set aside for generation, e.g. 0")
    if len(set(positions)) != len(positions):
        found.append(f"vllm_gpus {config.vllm_gpus!r} names a GPU twice")
    gpus = config.slurm_gpus_per_node if config.executor == "slurm" else 0
    if gpus and (max(positions, default=0) >= gpus or len(positions) + config.num_processes > gpus):
        found.append(
            f"vllm_gpus {config.vllm_gpus!r} and num_processes {config.num_processes} need more than the "
            f"{gpus} GPUs of slurm_gpus_per_node: vLLM takes its GPUs, each training process one of the rest"
        )
    return found
