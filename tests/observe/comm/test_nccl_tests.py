"""nccl-tests output parser on the real fixtures; busbw factors checked against the printed columns."""

from __future__ import annotations

import glob

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.analyze.busbw import busbw_factor
from clusterdoctor.errors import InputError
from clusterdoctor.observe.comm.nccl_tests import load_nccl_tests, parse_nccl_tests, sniff_nccl_tests
from clusterdoctor.testing import fixtures_root
from tests.conftest import shared_fixture


def test_a40_nvlink_rows() -> None:
    run = load_nccl_tests(shared_fixture("comm/nccl_tests_a40_2gpu_nvlink.txt"))
    assert [r.size_bytes for r in run.rows] == [1073741824, 2147483648, 4294967296, 8589934592]
    r0 = run.rows[0]
    assert (r0.count, r0.dtype, r0.redop, r0.root) == (268435456, "float", "sum", -1)
    assert (
        r0.out_of_place.time_us,
        r0.out_of_place.algbw_gbs,
        r0.out_of_place.busbw_gbs,
        r0.out_of_place.wrong,
    ) == (
        22661.0,
        47.38,
        47.38,
        0,
    )
    assert (r0.in_place.time_us, r0.in_place.busbw_gbs) == (22658.0, 47.39)
    assert run.avg_busbw_gbs == pytest.approx(47.4509)
    assert run.out_of_bounds == 0
    assert run.collective == "all_reduce"  # inferred: sum with root -1, said in warnings
    assert any("assumed" in w for w in run.warnings)


def test_efa_log_with_mpi_prefix_and_header() -> None:
    run = load_nccl_tests(shared_fixture("comm/nccl_efa_2node_t4_init_and_allreduce_perf.log"))
    assert len(run.rows) == 31  # 0, 0, 4, 8, ... 1 GiB
    assert run.rows[0].size_bytes == 0 and run.rows[-1].size_bytes == 1073741824
    assert (run.n_threads, run.n_gpus) == (1, 1)
    assert [(r.rank, r.host, r.gpu) for r in run.ranks] == [
        (0, "test-nccl-efa-worker-0", "Tesla T4"),
        (1, "test-nccl-efa-worker-1", "Tesla T4"),
    ]
    assert run.hosts == {"test-nccl-efa-worker-0", "test-nccl-efa-worker-1"}
    assert run.avg_busbw_gbs == pytest.approx(1.15327)
    # >= 256 MiB rows: 3.15/3.13, 3.13/3.12, 3.11/3.12 -> median 3.125 (the printed average is 1.15).
    assert run.peak_busbw() == pytest.approx(3.125)
    line = run.rows[-1].line
    assert (
        "1073741824"
        in shared_fixture("comm/nccl_efa_2node_t4_init_and_allreduce_perf.log")
        .read_text()
        .splitlines()[line - 1]
    )


def test_outlier_row_is_kept_as_printed() -> None:
    run = load_nccl_tests(shared_fixture("comm/nccl_tests_dgxa100_4gpu_nvswitch.txt"))
    r = next(r for r in run.rows if r.size_bytes == 4294967296)
    assert (r.out_of_place.time_us, r.out_of_place.busbw_gbs) == (27672.0, 232.81)
    assert (r.in_place.time_us, r.in_place.algbw_gbs, r.in_place.busbw_gbs) == (39252.0, 109.42, 164.13)


@pytest.mark.parametrize(
    "name,nranks",
    [
        ("nccl_tests_dgxa100_4gpu_nvswitch.txt", 4),
        ("nccl_tests_dgxa100_4gpu_p2pdisabled.txt", 4),
        ("nccl_tests_dgxh100_4gpu_nvswitch.txt", 4),
        ("nccl_tests_a40_2gpu_nvlink.txt", 2),
        ("nccl_tests_a40_2gpu_p2pdisabled_node.txt", 2),
    ],
)
def test_busbw_factor_reproduces_printed_busbw(name: str, nranks: int) -> None:
    run = load_nccl_tests(shared_fixture(f"comm/{name}"))
    f = busbw_factor("all_reduce", nranks)
    for r in run.rows:
        for m in (r.out_of_place, r.in_place):
            # Printed with 2 decimals: allow the rounding of both columns.
            assert m.algbw_gbs * f == pytest.approx(m.busbw_gbs, abs=0.01 * f + 0.006)
            # algbw = size / time (GB = 1e9 B, time in µs); time is printed rounded to 0.1 or 1 µs.
            tol = 0.006 + m.algbw_gbs * 0.5 / m.time_us
            assert r.size_bytes / (m.time_us * 1e3) == pytest.approx(m.algbw_gbs, abs=tol)


def test_factors() -> None:
    assert busbw_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert busbw_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert busbw_factor("reduce_scatter", 4) == pytest.approx(3 / 4)
    assert busbw_factor("broadcast", 8) == 1.0


def test_old_layout_without_root_and_wrong_columns() -> None:
    # Column layout of older nccl-tests builds (NVIDIA/nccl-tests#107): no root, "error" column instead of #wrong.
    text = (
        "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "    33554432       8388608     float     sum    12345    2.72    5.09  1e-06    12300    2.73    5.10  1e-06\n"
    )
    run = parse_nccl_tests(text)
    r = run.rows[0]
    assert r.root is None and r.out_of_place.busbw_gbs == 5.09 and r.in_place.time_us == 12300.0


def test_no_rows_is_input_error() -> None:
    with pytest.raises(InputError):
        parse_nccl_tests("# nThread 1 nGpus 1\n# Avg bus bandwidth : 0\n")


def test_sniff_all_fixtures() -> None:
    if fixtures_root() is None:
        pytest.skip("shared fixtures absent")
    for f in glob.glob(str(fixtures_root() / "comm" / "nccl_tests_*")):
        with open(f, "rb") as fh:
            assert sniff_nccl_tests(fh.read(65536)), f


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.data())
def test_fuzz_only_input_error(data) -> None:
    text = shared_fixture("comm/nccl_tests_2node_efa.log").read_text()
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, min(len(text), i + 300)))
    junk = data.draw(st.text(max_size=30))
    try:
        parse_nccl_tests(text[:i] + junk + text[j:])
    except InputError:
        pass


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=1500))
def test_fuzz_random_bytes(data: bytes) -> None:
    try:
        parse_nccl_tests(data.decode("utf-8", "replace"))
    except InputError:
        pass


LAUNCHER_PREFIXES = st.sampled_from(
    [
        "",
        " 0: ",
        "[1,0]<stdout>:",
        "[default0]:",
        "[default0]:[rank0]:",
        "worker-0: ",
        "10.0.0.1: ",
        "3:",
        "    ",
    ]
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LAUNCHER_PREFIXES, st.integers(1, 23))
def test_launcher_prefixes_and_truncation_keep_the_rows(prefix: str, keep_lines: int) -> None:
    """Every line of a real run behind any launcher prefix, cut after any line: the rows that are whole
    are read with their values (fixture nccl_tests_dgxh100_4gpu_nvswitch.txt: 4 rows, 1-8 GiB)."""
    lines = shared_fixture("comm/nccl_tests_dgxh100_4gpu_nvswitch.txt").read_text().splitlines()
    part = lines[:keep_lines]
    text = "\n".join(prefix + ln for ln in part) + "\n"
    expect = [ln.split() for ln in part if ln.strip() and not ln.lstrip().startswith("#")]
    if not expect:
        with pytest.raises(InputError):
            parse_nccl_tests(text)
        return
    run = parse_nccl_tests(text)
    assert [r.size_bytes for r in run.rows] == [int(x[0]) for x in expect]
    assert [r.out_of_place.busbw_gbs for r in run.rows] == [float(x[7]) for x in expect]
    assert [r.in_place.busbw_gbs for r in run.rows] == [float(x[11]) for x in expect]


_INCIDENTS = __import__("pathlib").Path(__file__).resolve().parents[2] / "data" / "incidents"


def test_rows_without_header_are_nccl_tests() -> None:
    # dev case ok-nccl-011: an all_reduce table pasted from its first result row, no '#' line at all
    text = (_INCIDENTS / "ok-nccl-011" / "paste.txt").read_text()
    assert sniff_nccl_tests(text.encode())
    run = parse_nccl_tests(text)
    assert len(run.rows) == 11 and run.rows[-1].in_place.busbw_gbs == pytest.approx(300.52)
    assert run.collective == "all_reduce"


@pytest.mark.parametrize(
    "text",
    [
        "  32768  8192  float  sum  -1  18.66  1.76  3.07  0  17.95  1.83  3.20  0\n",  # one row only
        "10 20 30 40 50 60 70 80 90 100 110 120 130\n10 20 30 40 50 60 70 80 90 100 110 120 130\n",
        "1 2 apples sum -1 1 2 3 0 1 2 3 0\n1 2 apples sum -1 1 2 3 0 1 2 3 0\n",
    ],
)
def test_rows_sniff_needs_two_rows_with_its_names(text: str) -> None:
    assert not sniff_nccl_tests(text.encode())


def test_rows_sniff_other_collectives_and_old_layout() -> None:
    # constructed in common.cu's row format (not a pasted sample): "none" op, and the old layout
    rows = (
        "     1048576        262144     float    none      -1   27.76   37.78   66.11       0   27.49   38.15   66.76       0\n"
        "     2097152        524288     float    none      -1   40.66   51.58   90.27       0   40.36   51.97   90.94       0\n"
    )
    assert sniff_nccl_tests(rows.encode())
    old = (
        "     1048576        262144   float     sum    27.76   37.78   66.11  0e+00    27.49   38.15   66.76  0e+00\n"
        * 2
    )
    assert sniff_nccl_tests(old.encode())  # no root column, 'error' printed as 0e+00
