#!/usr/bin/env bash
# Unsloth's environment for tests/engines/test_unsloth_cpu.py: a venv beside the machine's Python that holds Unsloth 2026.10.9
# with the TRL and transformers it accepts (trl <= 1.15, transformers <= 5.17, datasets < 5), and takes everything
# else (torch 2.13.0+cpu, PEFT, accelerate, the product's own requirements) from the system's site-packages.
#
# Prints the venv's python path (and nothing else on stdout), building the venv first when it is missing or was built
# from other pins; a complete one costs a file comparison. Cached under the user's cache folder, keyed by Unsloth's
# version, so CI's fresh clones on the same machine find it. Usage: UNSLOTH_PY=$(bash scripts/ci-unsloth-env.sh)
# With --check it builds nothing: it prints the path of a complete venv, or says why there is none and exits 3
# (tests/engines/test_unsloth_cpu.py asks this way, so the venv's place and pins are written down here only).
#
# Why not `pip install unsloth`: its requirements pull xformers, triton, bitsandbytes and torchvision, CUDA builds that
# would replace the CPU torch (xformers pins an exact torch); the CPU mode imports none of them (unsloth 2026.10.9
# _cpu_init.py imports unsloth_zoo.cpu, which is stock transformers + PEFT + TRL). So Unsloth and unsloth_zoo go in
# with --no-deps, and their other requirements are listed here, with torch held at the system's build.
set -euo pipefail

UNSLOTH_VERSION=2026.10.9
PINS=(
  "trl==1.15.0"
  "transformers==5.17.0"
  "datasets==4.8.5"        # unsloth_zoo 2026.10.9 wants datasets < 5 (the system has 5.x)
  "huggingface_hub==1.33.0" # transformers 5.17 wants < 2.0 (the system has 2.x)
  "tyro==1.0.17" "sentencepiece==0.2.3" "hf_transfer==0.1.9" "einops==0.8.2" "msgspec==0.23.0"
  "structlog==26.1.0" "json5==0.17.3" "nest-asyncio==1.6.0" "certifi==2026.10.19.post1" "protobuf==7.36.2"
)
NO_DEPS=("unsloth==$UNSLOTH_VERSION" "unsloth_zoo==$UNSLOTH_VERSION")

CACHE="${GRPO_STUDIO_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/grpo-studio/ci}"
VENV="$CACHE/unsloth-$UNSLOTH_VERSION"
PY="$VENV/bin/python"
# The stamp names what the venv was built from, the system's torch and PEFT included (it leans on them).
SYSTEM=$(python3 -c "from importlib.metadata import version as v; print('torch', v('torch'), 'peft', v('peft'))")
WANTED=$(printf '%s\n' "$SYSTEM" "${PINS[@]}" "${NO_DEPS[@]}")

if [ -x "$PY" ] && [ "$(cat "$VENV/.complete" 2>/dev/null)" = "$WANTED" ]; then
  echo "$PY"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "Unsloth's environment is not built in $VENV (or was built from other pins): bash scripts/ci-unsloth-env.sh" >&2
  exit 3
fi

{
  echo "building Unsloth's environment in $VENV"
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  python3 -m venv --system-site-packages "$VENV"
  hold=$(mktemp)
  trap 'rm -f "$hold"' EXIT
  # Hold torch at the system's build: a requirement that reaches torch can then only be met by the installed one.
  python3 -c "from importlib.metadata import version; print('torch==' + version('torch'))" >"$hold"
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
  "$PY" -m pip install --quiet -c "$hold" "${PINS[@]}"
  "$PY" -m pip install --quiet --no-deps "${NO_DEPS[@]}"
  # Proof, before the stamp: the CPU torch is still the system's and Unsloth starts in its CPU mode.
  "$PY" - <<'EOF'
import sys
import torch
assert "+cpu" in torch.__version__ and not torch.__file__.startswith(sys.prefix), torch.__file__
import unsloth, trl, transformers
assert unsloth.DEVICE_TYPE == "cpu", unsloth.DEVICE_TYPE
print(f"Unsloth {unsloth.__version__} (CPU mode), TRL {trl.__version__}, transformers {transformers.__version__}, "
      f"torch {torch.__version__}")
EOF
  printf '%s' "$WANTED" >"$VENV/.complete"
} >&2

echo "$PY"
