"""nccl-tests output streamed with rows bounded (issue 26): past MAX_ROWS rows are summarised per size;
a real capture repeated until it overflows gives the run's figures and the rules' verdicts it gives
with every row kept, and peak memory does not grow with the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clusterdoctor.cli.comm import nccl_tests_tables
from clusterdoctor.observe.comm import nccl_tests
from clusterdoctor.observe.comm.nccl_tests import load_nccl_tests
from clusterdoctor.rules import comm_bandwidth
from clusterdoctor.rules.registry import Observations
from tests.conftest import shared_fixture

CAPTURES = (
    "comm/nccl_efa_2node_t4_init_and_allreduce_perf.log",
    "comm/nccl_tests_a40_2gpu_nvlink.txt",
    "comm/nccl_tests_dgxh100_4gpu_nvswitch.txt",
    "comm/nccl_tests_2node_socket_no_efa.log",
)


def _verdicts(run) -> list[tuple]:
    obs = Observations()
    obs.put("nccl_tests", [run])
    out = []
    for r in (comm_bandwidth.nccl_tests_outlier,):
        out += [(f.rule, f.severity) for f in r.fn(obs)]
    return sorted(set(out))


@pytest.mark.parametrize("name", CAPTURES)
def test_repeated_capture_same_figures_bounded(name: str, tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "repeated.log"
    p.write_bytes(shared_fixture(name).read_bytes() * 7)
    whole = load_nccl_tests(p)
    monkeypatch.setattr(nccl_tests, "MAX_ROWS", 10)  # every repetition after the first overflows
    bounded = load_nccl_tests(p)
    assert len(bounded.rows) == 10 and bounded.n_rows == len(whole.rows) and bounded.summary
    assert bounded.n_tables == len(whole.tables())
    assert bounded.peak_busbw() == whole.peak_busbw()
    assert bounded.collective == whole.collective and bounded.ranks == whole.ranks
    assert nccl_tests_tables(bounded)["rows"] == nccl_tests_tables(whole)["rows"]
    assert nccl_tests_tables(bounded)["tables"] == nccl_tests_tables(whole)["tables"]
    assert _verdicts(bounded) == _verdicts(whole)


def test_summarised_outlier_and_wrong_rows_are_reported(tmp_path: Path, monkeypatch) -> None:
    """Synthetic edit of a real table: in the 5th copy one 1 GiB row runs at a tenth of its busbw and
    reports #wrong; both past MAX_ROWS, both still found (counted per size, the lowest row's line)."""
    text = shared_fixture("comm/nccl_tests_a40_2gpu_nvlink.txt").read_text()
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("1073741824"))
    slow = row.replace("47.38   47.38      0", " 4.74    4.74      3", 1)
    assert slow != row
    p = tmp_path / "edited.log"
    p.write_text(text * 4 + text.replace(row, slow, 1) + text * 2)
    whole = load_nccl_tests(p)
    monkeypatch.setattr(nccl_tests, "MAX_ROWS", 8)
    bounded = load_nccl_tests(p)
    obs_w, obs_b = Observations(), Observations()
    obs_w.put("nccl_tests", [whole])
    obs_b.put("nccl_tests", [bounded])
    fw = list(comm_bandwidth.nccl_tests_outlier.fn(obs_w))
    fb = list(comm_bandwidth.nccl_tests_outlier.fn(obs_b))
    assert [f.severity for f in fw] == [f.severity for f in fb]
    assert [f.subject for f in fw] == [f.subject for f in fb]  # the same line named
    assert "3 result(s)" not in fb[-1].summary and "1 result(s) with wrong data" in fb[-1].summary


_HWM = """
import sys
from clusterdoctor.observe.limits import set_limit
set_limit("input=2G")
from clusterdoctor.observe.comm import nccl_tests
nccl_tests.MAX_ROWS = 2000  # both sizes past the cap (the default, 20,000, is ~8 MB of rows)
run = nccl_tests.load_nccl_tests(sys.argv[1])
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM"))
print(hwm, run.n_rows)
"""


def test_peak_memory_flat_in_file_size(tmp_path: Path) -> None:
    """VmHWM of a child reading the real nccl-tests logs repeated to 3 MB and to 12 MB (synthetic: a
    repeat): 4x the rows, the same memory (before: the text and every row kept, 5 MiB per MB)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (VmHWM)")
    unit = b"".join(shared_fixture(n).read_bytes() for n in CAPTURES)
    got = {}
    for mb in (3, 12):
        p = tmp_path / f"nccl-{mb}MB.log"
        p.write_bytes(unit * (mb * 1_000_000 // len(unit)))
        out = subprocess.run([sys.executable, "-c", _HWM, str(p)], capture_output=True, text=True, check=True)
        got[mb] = tuple(int(x) for x in out.stdout.split())
    assert got[12][1] >= 3.9 * got[3][1]
    assert got[12][0] / got[3][0] < 1.15, got
