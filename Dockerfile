# grpo-studio with the GPU fast path (Unsloth + vLLM).
#   docker build -t grpo-studio .
#   docker run --gpus all -p 7860:7860 -v grpo-data:/data -e GRPO_STUDIO_AUTH=me:secret grpo-studio
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    GRPO_STUDIO_HOME=/data \
    HF_HOME=/data/hf-cache

# python3-dev and build-essential: Triton and vLLM compile kernels at first use. Distribution packages follow the
# base image's release rather than pinned versions, which break with every Ubuntu point update.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

WORKDIR /opt/grpo-studio
# Dependencies first, so a code change doesn't reinstall them.
COPY pyproject.toml README.md ./
COPY app/__init__.py app/__init__.py
COPY trainer/__init__.py trainer/__init__.py
COPY storage/__init__.py storage/__init__.py
# The project itself; its dependency ranges (and the gpu extra's pins) live in pyproject.toml.
# hadolint ignore=DL3013
RUN pip install ".[gpu]"
COPY app app
COPY trainer trainer
COPY storage storage
COPY examples examples
# hadolint ignore=DL3013
RUN pip install --no-deps .

# Runs as a non-root user; everything it writes (database, runs, adapters, Hugging Face cache) lives on /data.
RUN useradd --create-home --uid 1000 studio && mkdir -p /data && chown studio:studio /data
USER 1000:1000
VOLUME ["/data"]
EXPOSE 7860

# Set GRPO_STUDIO_AUTH=user:password to protect the UI (the server warns loudly when it listens without it).
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
    CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:7860/"]

CMD ["grpo-studio", "serve", "--host", "0.0.0.0", "--port", "7860"]
