"""What the GPU image (the Dockerfile) turns off and leaves out (issue 26, items 1 and 2): the FlashInfer sampler,
which needs nvcc the image does not ship, and xformers built for CUDA 12."""

from __future__ import annotations

from tests.conftest import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_image_turns_the_flashinfer_sampler_off():
    assert "    VLLM_USE_FLASHINFER_SAMPLER=0\n" in DOCKERFILE


def test_image_leaves_out_xformers_built_for_cuda_12():
    install = next(line for line in DOCKERFILE.splitlines() if 'pip install ".[gpu]"' in line)
    assert install.endswith("&& pip uninstall -y xformers")
    assert "libcudart.so.12" in DOCKERFILE  # and says why
