# grpo-studio with the GPU fast path (Unsloth + vLLM).
#   docker build -t grpo-studio .
#   docker run --gpus all --ipc=host -p 7860:7860 -v grpo-data:/data -e GRPO_STUDIO_AUTH=me:secret -e HF_TOKEN grpo-studio
# The host's NVIDIA driver must be 580 or newer: torch 2.13's wheels are built for CUDA 13 (cuda-toolkit==13.0.3 in
# their metadata), and the base image's CUDA major version must match (tests/engines/test_gpu_path.py checks both). No cuDNN
# layer: the torch wheels bring their own (nvidia-cudnn-cu13).
FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    GRPO_STUDIO_HOME=/data \
    HF_HOME=/data/hf-cache \
    UNSLOTH_COMPILE_LOCATION=/data/cache/unsloth-compiled \
    TRITON_CACHE_DIR=/data/cache/triton \
    TORCHINDUCTOR_CACHE_DIR=/data/cache/torchinductor \
    VLLM_CACHE_ROOT=/data/cache/vllm \
    XDG_CACHE_HOME=/data/cache/xdg \
    VLLM_USE_FLASHINFER_SAMPLER=0
# VLLM_USE_FLASHINFER_SAMPLER=0: this runtime base has no nvcc, and vLLM 0.32's default FlashInfer top-k/top-p sampler
# JIT-compiles its kernels with nvcc during the engine's start-up profiling, so every engine Unsloth does not start
# itself (Compare's, TRL's colocate engine, trl vllm-serve) would die at start-up (issue 26; the file:line evidence is
# in docs/gpu-path-evidence.md and trainer/loading/vllm_env.py, which sets the same outside the image).

# python3-dev and build-essential: Triton and vLLM compile kernels at first use. Distribution packages follow the
# base image's release rather than pinned versions, which break with every Ubuntu point update.
# bubblewrap: the code_tests reward runs model-written code in a bwrap sandbox (user, PID, mount and network
# namespaces; see SECURITY.md). Docker's default seccomp and AppArmor profiles forbid those namespaces and mounts, so
# a container that trains with code_tests needs `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`
# (or a seccomp profile that also allows unshare/clone with CLONE_NEWUSER), and on an Ubuntu 23.10+ host
# `sysctl kernel.apparmor_restrict_unprivileged_userns=0`. Without them the dashboard refuses code_tests and says why.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential curl ca-certificates \
        bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

WORKDIR /opt/grpo-studio
# Dependencies first, so a code change doesn't reinstall them.
COPY pyproject.toml README.md ./
COPY app/__init__.py app/__init__.py
COPY trainer/__init__.py trainer/__init__.py
COPY storage/__init__.py storage/__init__.py
# The project itself; its dependency ranges (and the gpu extra's pins) live in pyproject.toml.
# xformers is removed after the install: unsloth pulls xformers 0.0.35, whose extensions are built against CUDA 12
# (they need libcudart.so.12), so on this CUDA 13 stack every worker logged that it cannot load it. Unsloth imports
# it optionally and uses PyTorch's attention without it (unsloth 2026.10.9 models/_utils.py:4463-4544).
# hadolint ignore=DL3013
RUN pip install ".[gpu]" && pip uninstall -y xformers
COPY app app
COPY trainer trainer
COPY storage storage
COPY examples examples
# hadolint ignore=DL3013
RUN pip install --no-deps .

# Runs as a non-root user; everything it writes (database, runs, adapters, Hugging Face and compile caches) lives on
# /data. Ubuntu 24.04 images ship a user "ubuntu" with UID 1000: remove it so that studio can have 1000, the UID a
# bind-mounted host directory most often belongs to.
RUN userdel --remove ubuntu \
    && useradd --create-home --uid 1000 studio && mkdir -p /data && chown studio:studio /data
USER 1000:1000
VOLUME ["/data"]
EXPOSE 7860

# Set GRPO_STUDIO_AUTH=user:password to protect the UI (the server warns loudly when it listens without it).
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:7860/"]

CMD ["grpo-studio", "serve", "--host", "0.0.0.0", "--port", "7860"]
