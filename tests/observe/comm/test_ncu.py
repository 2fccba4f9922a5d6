"""ncu --csv parser. No real ncu output of NCCL kernels exists in the fixtures and no GPU is available
here, so the inputs below are written in ncu's documented CSV layouts (column set, quoting, ==PROF==
framing, thousands separators) — they are constructed examples, not captured output."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.ncu import parse_ncu_csv, sniff_ncu

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _row(kid: str, kernel: str, section: str, metric: str, unit: str, value: str) -> str:
    return f'"{kid}","42","python","h","{kernel}","1","7","(640, 1, 1)","(16, 1, 1)","0","9.0","{section}","{metric}","{unit}","{value}"'


LONG = "\n".join(
    [
        "==PROF== Connected to process 42",
        '==PROF== Profiling "ncclDevKernel_AllReduce_Sum_f32_RING_LL" - 0: 0%....50%....100% - 9 passes',
        HEADER,
        _row(
            "0",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)",
            "GPU Speed Of Light Throughput",
            "Duration",
            "msecond",
            "4.10",
        ),
        _row(
            "0",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)",
            "GPU Speed Of Light Throughput",
            "L2 Cache Throughput",
            "%",
            "93.5",
        ),
        _row(
            "0",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)",
            "Memory Workload Analysis",
            "Memory Throughput",
            "Gbyte/second",
            "1,234.5",
        ),
        _row(
            "1", "void gemm_kernel<float>()", "GPU Speed Of Light Throughput", "Duration", "usecond", "812.25"
        ),
        _row(
            "1",
            "void gemm_kernel<float>()",
            "GPU Speed Of Light Throughput",
            "L2 Cache Throughput",
            "%",
            "n/a",
        ),
        "==PROF== Disconnected from process 42",
    ]
)


def test_long_layout_units_and_separators() -> None:
    rep = parse_ncu_csv(LONG)
    assert [k.id for k in rep.kernels] == ["0", "1"]
    nccl = rep.nccl_kernels()
    assert len(nccl) == 1
    k = nccl[0]
    assert k.duration_ms == pytest.approx(4.10)
    assert k.l2_pct == pytest.approx(93.5)
    assert k.dram_gbs == pytest.approx(1234.5)
    assert rep.kernels[1].duration_ms == pytest.approx(0.81225)
    assert rep.kernels[1].l2_pct is None


def test_wide_raw_layout_with_units_row() -> None:
    text = "\n".join(
        [
            '"ID","Process ID","Process Name","Host Name","Kernel Name","Stream","gpu__time_duration.sum",'
            '"dram__bytes.sum.per_second","smsp__average_warp_latency_issue_stalled_memory_throttle",'
            '"smsp__average_warp_latency_issue_stalled_long_scoreboard"',
            '"","","","","","","nsecond","Tbyte/second","",""',
            '"3","42","python","h","ncclKernel_SendRecv_RING_SIMPLE","7","5,000,000","0.25","30","70"',
        ]
    )
    rep = parse_ncu_csv(text)
    (k,) = rep.kernels
    assert k.duration_ms == pytest.approx(5.0)
    assert k.dram_gbs == pytest.approx(250.0)
    assert k.stall_share("memory_throttle") == pytest.approx(0.3)


def test_no_header_is_input_error() -> None:
    with pytest.raises(InputError):
        parse_ncu_csv("==PROF== nothing profiled\n")


def test_sniff() -> None:
    assert sniff_ncu(LONG.encode())
    assert not sniff_ncu(b"NCCL INFO x")


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_fuzz_mutations(data) -> None:
    i = data.draw(st.integers(0, len(LONG)))
    j = data.draw(st.integers(i, min(len(LONG), i + 100)))
    junk = data.draw(st.text(max_size=30))
    try:
        rep = parse_ncu_csv(LONG[:i] + junk + LONG[j:])
        for k in rep.kernels:
            _ = (k.duration_ms, k.l2_pct, k.dram_gbs, k.stall_share())
    except InputError:
        pass
