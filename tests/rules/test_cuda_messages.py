"""CUDA111 (unspecified launch failure) and CUDA112 (no kernel image for the GPU's architecture) on real
lines in each spelling the programs print (the thread beside each), and their cause classes."""

from __future__ import annotations

import pytest

from clusterdoctor.observe.messages import scan_text
from clusterdoctor.rules.catalog import by_code
from clusterdoctor.rules.messages import _subject

LINES = [
    ("CUDA111", "RuntimeError: CUDA error: unspecified launch failure", None, "BasicSR#211"),
    (
        "CUDA111",
        "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=271 error=4 : unspecified launch failure       x",
        None,
        "pytorch#21276",
    ),
    ("CUDA111", "OSError: (External) CUDA error(719), unspecified launch failure.", None, "Paddle#57411"),
    (
        "CUDA111",
        "  what():  CUDA error: unspecified launch failure (insert_events at /pytorch/c10/cuda/CUDACachingAllocator.cpp:764)",
        None,
        "pytorch#49832",
    ),
    (
        "CUDA112",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        None,
        "detectron2#235",
    ),
    (
        "CUDA112",
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
        "sm_120",
        "LeggedLab#26",
    ),
    (
        "CUDA112",
        "NVIDIA RTX A5000 with CUDA capability sm_86 is not compatible with the current PyTorch installation.",
        "sm_86",
        "CVPR21Chal-SLR#20",
    ),
    (
        "CUDA112",
        "      CUDA Error: no kernel image is available for execution on the device",
        None,
        "cpm_kernels#6",
    ),
]


@pytest.mark.parametrize("code,line,subject,source", LINES, ids=[f"{c}-{s}" for c, _, _, s in LINES])
def test_real_line_is_read_as_its_entry(code: str, line: str, subject: str | None, source: str) -> None:
    hits = [h for h in scan_text(line + "\n", "paste")]
    assert [h.code for h in hits] == [code], f"{source}: {[h.code for h in hits]}"
    assert _subject(by_code()[code], hits[0]) == subject


def test_classes() -> None:
    assert by_code()["CUDA111"].causes == ("torch.illegal-memory-access",)
    assert by_code()["CUDA112"].causes == ("torch.arch-unsupported",)
    # the driver/runtime entry names the NCCL-side class of the same cause too
    assert "nccl.cuda-driver-runtime" in by_code()["CUDA104"].causes
