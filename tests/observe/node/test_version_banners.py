"""Program version lines (observe/node/version_banners.py) and GPU024 on them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.version_banners import parse_version_banners, sniff_version_banners
from tests.conftest import diagnose_text

CORPUS = Path(__file__).resolve().parents[2] / "data" / "incidents"

# github.com/NVIDIA/cutlass/issues/1788 (the reporter's `nvcc -V`, as pasted)
NVCC_12_1 = """nvcc -V

nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2023 NVIDIA Corporation
Built on Mon_Apr__3_17:16:06_PDT_2023
Cuda compilation tools, release 12.1, V12.1.105
Build cuda_12.1.r12.1/compiler.32688072_0
"""


def test_k3s_version_paste_is_read():
    # corpus ok-ctrl-901 (github.com/k3s-io/k3s): "./k3s-armhf -v" then its banner
    text = (CORPUS / "ok-ctrl-901" / "paste.txt").read_text()
    (v,) = parse_version_banners(text, "paste")
    assert (v.component, v.version, v.line) == ("k3s-armhf", "v0.4.0-rc3", 2)


def test_nvcc_banner_gives_the_toolkit_release():
    (v,) = parse_version_banners(NVCC_12_1, "paste")
    assert (v.component, v.version, v.line) == ("cuda toolkit", "12.1", 6)
    assert sniff_version_banners(NVCC_12_1.encode())


@pytest.mark.parametrize(
    "text",
    [
        "# Ethernet frame types\nIPv4\t0800\tip ip4\nARP\t0806\tether-arp\n",  # /etc/ethertypes
        "nvcc -V\n",  # the command alone
        "k3s version v1.28.2+k3s1\nE1204 10:00:01 error: something failed\n",  # a log line after it
        "I1204 10:00:01.123 server.go:1] Version: v1.28.2\n",  # a version inside a log line
    ],
)
def test_anything_but_version_lines_is_refused(text):
    assert not sniff_version_banners(text.encode())
    with pytest.raises(InputError):
        parse_version_banners(text, "paste")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80), max_size=8))
def test_arbitrary_text_never_raises_but_input_error(lines):
    text = "\n".join(lines)
    try:
        out = parse_version_banners(text, "paste")
    except InputError:
        return
    assert out and all(v.version and v.component for v in out)


def _diagnose_two(tmp_path, a: str, b: str):
    from clusterdoctor import diagnosis

    (tmp_path / "paste.txt").write_text(a)
    (tmp_path / "paste-2.txt").write_text(b)
    obs = diagnosis.new_observations(lambda: 1_800_000_000.0)
    return diagnosis.run(obs, diagnosis.load_sources(obs, [str(tmp_path)])).findings


# github.com/NVIDIA/nvidia-docker/issues/1671 (corpus gpu-018): a real nvidia-smi of driver 510 (CUDA
# 11.6). Beside the cutlass thread's nvcc 12.1 (two real pastes of two threads put side by side): a CUDA
# 12 toolkit on a CUDA 11 driver
SMI_11_6 = (CORPUS / "gpu-018" / "paste.txt").read_text()
# github.com/NVIDIA/cutlass/issues/1788: the same reporter's nvidia-smi header (driver 555, CUDA 12.5)
SMI_12_5 = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 555.42.02              Driver Version: 555.42.02      CUDA Version: 12.5     |
|-----------------------------------------+------------------------+----------------------+
"""


def test_gpu024_toolkit_of_a_newer_major_than_the_driver(tmp_path):
    found = [f for f in _diagnose_two(tmp_path, NVCC_12_1, SMI_11_6) if f.rule == "GPU024"]
    assert len(found) == 1 and "12.1" in found[0].summary and "11.6" in found[0].summary


def test_gpu024_quiet_when_the_driver_runs_the_toolkit(tmp_path):
    # the cutlass thread's own pair: nvcc 12.1 on a driver of CUDA 12.5 (its cause was elsewhere)
    assert not [f for f in _diagnose_two(tmp_path, NVCC_12_1, SMI_12_5) if f.rule == "GPU024"]


def test_version_paste_alone_is_read_with_no_finding(tmp_path):
    assert [f for f in diagnose_text(tmp_path, NVCC_12_1) if f.rule == "GPU024"] == []
