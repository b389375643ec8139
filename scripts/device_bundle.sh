#!/usr/bin/env bash
# Make the archive scripts/device_check.py needs on a GPU machine without network (issue 26, item 5).
#
#   scripts/device_bundle.sh [OUT]        # default: dist/device-bundle.tar.gz; needs PyPI and git here
#
# The target: Python 3.12 on x86-64 Linux with CUDA 13, torch, transformers and accelerate already installed (an HPC
# compute node, an air-gapped lab machine), but no trl, datasets, sqlalchemy, vllm or unsloth, maybe an older peft,
# and room for a small archive (LIMIT_MIB below). The archive holds:
#   wheels/        the missing pure-Python wheels for Python 3.12 (pip download --no-deps, pinned), Unsloth's without
#                  its `studio` web app (28 of its 29 MB, not needed to train), bitsandbytes' with its CUDA 13 library
#                  only (the wheel carries one per CUDA and ROCm version: 43 MB)
#   model/         the built-in model's directory (trainer/loading/builtin_tiny), for --model or a look
#   src/           grpo-studio at HEAD (git archive): app, trainer, storage, scripts, pyproject.toml
# Not carried: vLLM (its wheel is 326 MB) and its FlashInfer (34 MB), so device_check checks no vLLM path; that path
# keeps its static evidence in docs/gpu-path-evidence.md. xformers neither: unsloth pulls 0.0.35, built for CUDA 12
# (its _C.so needs libcudart.so.12), and Unsloth runs without it (see the Dockerfile).
# docs/device-check.md says how to carry it there and has the one command to paste on the machine.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/dist/device-bundle.tar.gz}"
LIMIT_MIB=64
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# Pinned: unsloth 2026.10.9 allows trl <= 1.15.0 and datasets < 5; datasets 4.8.5 wants dill < 0.4.2,
# multiprocess < 0.70.20 and fsspec <= 2026.2.0; math-verify 0.9.0 wants latex2sympy2_extended 1.11.0 (antlr4 4.13.2).
# Unsloth's and unsloth_zoo's imports beyond the target's packages: tyro (+ its three), msgspec, cut_cross_entropy,
# hf_transfer, structlog, json5, nest_asyncio. peft (0.8 MB) too: grpo-studio needs >= 0.21 and a node's own peft may
# be older; the carried one comes first on the stages' path.
WHEELS=(
    trl==1.15.0
    datasets==4.8.5 dill==0.4.1 multiprocess==0.70.19 fsspec==2026.2.0
    sqlalchemy==2.1.9 alembic==1.20.1 mako==1.4.3
    math-verify==0.9.0 latex2sympy2_extended==1.11.0 antlr4-python3-runtime==4.13.2
    unsloth==2026.10.9 unsloth_zoo==2026.10.9
    tyro==1.0.17 docstring-parser==0.18.0 shtab==1.13.0 typeguard==4.6.1
    msgspec==0.23.0 cut-cross-entropy==25.1.1 hf-transfer==0.1.9 structlog==26.1.0 json5==0.17.3 nest-asyncio==1.6.0
    bitsandbytes==0.50.2
    peft==0.21.2
)
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64)

mkdir -p "$WORK/bundle/wheels" "$WORK/bundle/src" "$WORK/raw"
platform_args=()
for p in "${PLATFORMS[@]}"; do platform_args+=(--platform "$p"); done
for wheel in "${WHEELS[@]}"; do
    # SQLAlchemy's pure wheel (2 MB): its compiled one (5 MB) is an optional speed-up only
    where=("${platform_args[@]}" --platform any)
    [[ $wheel == sqlalchemy==* ]] && where=(--platform any)
    # a failed download is caught by the check for every wheel below
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${where[@]}" -d "$WORK/raw" "$wheel" 2>&1 | grep -v "is ignored" || true
done

# Repack two wheels: drop what the check never loads, and the RECORD lines of what was dropped.
python3 - "$WORK/raw" "$WORK/bundle/wheels" <<'EOF'
import sys
import zipfile
from pathlib import Path

raw, out = Path(sys.argv[1]), Path(sys.argv[2])
DROP = {
    "unsloth-": lambda name: name.startswith("studio/"),
    "bitsandbytes-": lambda name: name.startswith("bitsandbytes/libbitsandbytes_")
    and name not in ("bitsandbytes/libbitsandbytes_cuda130.so", "bitsandbytes/libbitsandbytes_cpu.so"),
}
for wheel in sorted(raw.glob("*.whl")):
    drop = next((rule for prefix, rule in DROP.items() if wheel.name.startswith(prefix)), None)
    if drop is None:
        (out / wheel.name).write_bytes(wheel.read_bytes())
        continue
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out / wheel.name, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if drop(info.filename):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if not drop(line.split(",", 1)[0])).encode()
            dst.writestr(info, data)
    print(f"repacked {wheel.name}: {wheel.stat().st_size / 2**20:.1f} -> {(out / wheel.name).stat().st_size / 2**20:.1f} MiB")
EOF

cp -r "$ROOT/trainer/loading/builtin_tiny" "$WORK/bundle/model"
git -C "$ROOT" archive HEAD app trainer storage scripts pyproject.toml | tar -x -C "$WORK/bundle/src"

missing=0
have=$'\n'"$(ls "$WORK/bundle/wheels" | tr '[:upper:]' '[:lower:]')"
for wheel in "${WHEELS[@]}"; do
    name="$(echo "${wheel%%==*}" | tr '[:upper:]-' '[:lower:]_')"
    if [[ $have != *$'\n'"${name}-"* ]]; then
        echo "missing: no wheel for $wheel" >&2; missing=1
    fi
done
[[ $missing == 0 ]] || exit 1

mkdir -p "$(dirname "$OUT")"
tar -czf "$OUT" -C "$WORK/bundle" wheels model src
size=$(stat -c %s "$OUT")
echo "$OUT: $(( size / 1024 )) KiB, $(ls "$WORK/bundle/wheels" | wc -l) wheels"
if (( size > LIMIT_MIB * 1024 * 1024 )); then
    echo "the archive is over ${LIMIT_MIB} MiB" >&2
    exit 1
fi
