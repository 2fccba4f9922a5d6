"""Every GPU parser fuzzed: random bytes, truncations and mutations of the real fixtures; only InputError escapes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.dcgm_exporter import parse_dcgm_exporter
from clusterdoctor.observe.gpu.dcgmi import parse_dcgmi
from clusterdoctor.observe.gpu.kernel_log import parse_kernel_log
from clusterdoctor.observe.gpu.load import parse_gpu_bytes
from clusterdoctor.observe.gpu.lspci import parse_lspci
from clusterdoctor.observe.gpu.nvidia_smi_q import parse_nvidia_smi_q
from clusterdoctor.observe.gpu.nvidia_smi_xml import parse_nvidia_smi_xml
from clusterdoctor.observe.gpu.nvlink import parse_nvlink
from clusterdoctor.observe.gpu.query_gpu_csv import parse_query_gpu_csv
from clusterdoctor.testing import fixture_path

PARSERS = {
    "nvidia-smi-q": parse_nvidia_smi_q,
    "nvidia-smi-xml": parse_nvidia_smi_xml,
    "query-gpu": parse_query_gpu_csv,
    "kernel-log": parse_kernel_log,
    "nvlink": parse_nvlink,
    "lspci": parse_lspci,
    "dcgmi": parse_dcgmi,
    "dcgm-exporter": parse_dcgm_exporter,
    "detect": parse_gpu_bytes,
}
FIXTURES = {
    "nvidia-smi-q": "gpu/nvidia-smi-q_a10_535.129.03_remapped-rows-uncorrectable4-pending.txt",
    "query-gpu": "gpu/nvidia-smi-query-gpu-csv_l40s_595.80_idle-section-util100.csv",
    "kernel-log": "gpu/dmesg_rtx3090_rk3568_535.129.03_bar-invalid_fallen-off-bus.log",
    "nvlink": "gpu/nvidia-smi-nvlink-e_h100_error-counters-zero_elided.txt",
    "lspci": "gpu/lspci-vvvv_rtx3090_rk3588_8gts-x4-downgraded.txt",
    "dcgmi": "gpu/dcgmi-diag-r2_rtx3090-x8_dcgm3.3.0_pcie-fail-cuda-driver-combination.txt",
    "dcgm-exporter": "gpu/dcgm-exporter_rtx4000ada_lke_580.95.05_pod-labels.prom",
    "detect": "gpu/dmesg-xid_hgx-dell-xe9680_xid119-gsp-rpc-timeout.log",
}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ok(parse, data: bytes) -> None:
    try:
        parse(data, "fuzz")
    except InputError:
        pass


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(data=st.binary(max_size=2048))
def test_random_bytes(name, data):
    _ok(PARSERS[name], data)


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(
    parts=st.lists(
        st.sampled_from(
            list("GPU 0:|-+>\t\nx.,=[]/A1")
            + [
                "LnkSta:",
                "Link 0: ",
                "NVRM: Xid (PCI:0000:19:00): ",
                "GPU 00000000:07:00.0\n",
                " : ",
                "\n    ",
            ]
        ),
        max_size=120,
    )
)
def test_structured_garbage(name, parts):
    _ok(PARSERS[name], "".join(parts).encode())


def _fixture(name: str) -> bytes:
    p = fixture_path(FIXTURES[name])
    if p is None:
        pytest.skip("shared fixtures absent")
    return p.read_bytes()


@pytest.mark.parametrize("name", sorted(FIXTURES))
@FUZZ
@given(cut=st.integers(min_value=0, max_value=100_000))
def test_truncations_of_real_files(name, cut):
    data = _fixture(name)
    _ok(PARSERS[name], data[: cut % (len(data) + 1)])


@pytest.mark.parametrize("name", sorted(FIXTURES))
@FUZZ
@given(
    edits=st.lists(
        st.tuples(st.integers(min_value=0, max_value=1 << 20), st.binary(min_size=0, max_size=8)),
        min_size=1,
        max_size=6,
    )
)
def test_mutations_of_real_files(name, edits):
    data = bytearray(_fixture(name))
    for pos, blob in edits:
        i = pos % (len(data) + 1)
        data[i : i + len(blob)] = blob
    _ok(PARSERS[name], bytes(data))


@FUZZ
@given(cut=st.integers(min_value=0, max_value=2000), junk=st.binary(max_size=30))
def test_xml_truncated_or_mutated(cut, junk):
    from tests.observe.gpu.test_nvidia_smi import XML

    data = XML.encode()
    _ok(parse_nvidia_smi_xml, data[:cut] + junk)
