"""`make gpu-check` on a machine without a GPU: every check skipped with its reason, exit 0, the results
folder written (on a GPU machine the same script runs them; see bench/RESULTS.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return shutil.which("nvidia-smi") is not None
    return torch.cuda.is_available() or shutil.which("nvidia-smi") is not None


@pytest.mark.skipif(_has_gpu(), reason="a GPU is here: the checks would run for real (make gpu-check)")
def test_without_a_gpu_it_runs_nothing_says_why_and_exits_0(tmp_path):
    p = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ran nothing" in p.stdout
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["summary"]["ran"] == doc["summary"]["failed"] == 0
    assert all(c["status"] == "skipped" and c["reason"] for c in doc["checks"].values())
    assert len(doc["checks"]) == 4
    assert "| check | status |" in (tmp_path / "summary.md").read_text()
