"""NCCL logs with repeated inits kept bounded (issue 26): every init prints its transport, ring,
affinity and socket-interface lines again; each distinct one is kept once with the lines it was first
and last printed on and a count. Real captures repeated give the findings they give with every line
kept (``KEEP_REPEATS``), and peak memory does not grow with the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clusterdoctor.observe.comm import nccl_log
from clusterdoctor.observe.comm.nccl_log import load_nccl_log, parse_nccl_log
from clusterdoctor.observe.comm.sources import load_comm_observations
from clusterdoctor.rules.registry import Observations, load_all, run_rules
from clusterdoctor.topology.model import Device, NumaNode, Topology
from tests.conftest import TEST_DATA, shared_fixture

EFA = "comm/nccl_efa_2node_t4_init_and_allreduce_perf.log"
PUBLIC = TEST_DATA / "comm" / "public"
# Real logs with transports, affinities, "NET/Socket : Using" and "No device found" lines (sources in
# their SOURCES.md / case.toml): EFA over Libfabric, DeepSpeed pdsh with and without IB, a 2-node
# socket job (pytorch#38702).
CAPTURES = (
    PUBLIC / "deepspeed_pdsh_accelerate_1317.log",
    PUBLIC / "deepspeed_pdsh_accelerate_1317_socket.log",
    TEST_DATA / "incidents" / "ok-nccl-003" / "paste.txt",
)
# pytorch#68893 (the lines tests/rules/test_comm_hangs.py quotes): a docker veth with a link-local
# address beside ens5 on a 2-node socket job, COMM015's case.
VETH = (
    "\x1b[0m ip-172-31-0-137:14605:14673 [0] NCCL INFO NET/Socket : Using [0]ens5:172.31.0.137<0> "
    "[1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>\n"
    "\x1b[0m ip-172-31-0-137:14605:14673 [0] NCCL INFO Using network Socket\n"
    "\x1b[0m NCCL version 2.7.8+cuda11.1\n"
    "\x1b[0m ip-172-31-0-137:14605:14688 [0] NCCL INFO Channel 00 : 1[1e0] -> 0[1e0] [receive] via NET/Socket/0\n"
)


def _topo(gpu_node: int) -> Topology:
    # A constructed two-socket machine for the affinity join (not a captured topology), as in
    # tests/rules/test_comm_rules.py: worker-0's mask (node 0) is remote when its GPU is on node 1.
    gpu = Device("GPU0", "gpu", pci="0000:35:00.0", numa_node=gpu_node, index=0)
    return Topology(
        source="constructed",
        source_kind="test",
        nodes=[
            NumaNode(0, tuple(range(0, 24)) + tuple(range(48, 72))),
            NumaNode(1, tuple(range(24, 48)) + tuple(range(72, 96))),
        ],
        gpus=[gpu],
        nics=[],
        hostname="test-nccl-efa-worker-0",
    )


def _findings(path: Path, **extra) -> list[str]:
    """Every comm rule's findings, whole, except that evidence repeating an earlier item's description,
    value and threshold at another line is left out: with every line kept, COMM003 added one such item
    per repeated init (one per copy of the mask line: a report that grows with the log); folded, the
    item names the first line."""
    obs = Observations(dict(load_comm_observations(path)))
    for k, v in extra.items():
        obs.put(k, v)
    findings, _skipped, _ran = run_rules(obs, [r for r in load_all() if r.layer == "comm"])
    out = []
    for f in findings:
        d = f.as_dict()
        firsts: dict[str, dict] = {}
        for e in d.get("evidence", []):
            firsts.setdefault(repr((e.get("description"), e.get("value"), e.get("threshold"))), e)
        d["evidence"] = list(firsts.values())
        out.append(repr(d))
    return sorted(out)


def _both(path: Path, monkeypatch, **extra) -> tuple[list, list]:
    """Findings on ``path`` with every repeated line kept, then with repeats folded (the default)."""
    monkeypatch.setattr(nccl_log, "KEEP_REPEATS", True)
    whole = _findings(path, **extra)
    monkeypatch.setattr(nccl_log, "KEEP_REPEATS", False)
    return whole, _findings(path, **extra)


def _repeat(tmp_path: Path, data: bytes, times: int = 7) -> Path:
    p = tmp_path / "repeated.log"
    p.write_bytes(data if data.endswith(b"\n") else data + b"\n")
    p.write_bytes(p.read_bytes() * times)
    return p


@pytest.mark.parametrize("src", CAPTURES, ids=lambda p: p.name)
def test_repeated_capture_same_findings_distinct_kept(src: Path, tmp_path: Path, monkeypatch) -> None:
    one = load_nccl_log(src)
    p = _repeat(tmp_path, src.read_bytes())
    monkeypatch.setattr(nccl_log, "KEEP_REPEATS", True)
    whole = load_nccl_log(p)
    monkeypatch.setattr(nccl_log, "KEEP_REPEATS", False)
    folded = load_nccl_log(p)
    assert one.transports or one.affinities or one.socket_ifs
    # as many entries as one copy (these captures print each line once per copy), the rest counted
    assert len(folded.transports) == len(one.transports) and len(whole.transports) == 7 * len(one.transports)
    assert folded.lines_of(folded.transports) == len(whole.transports)
    assert len(folded.affinities) == len(one.affinities)
    assert sum(a.count for a in folded.affinities) == len(whole.affinities)
    assert folded.socket_ifs == list(dict.fromkeys(whole.socket_ifs))
    assert sum(s.count for s in folded.socket_if_seen.values()) == len(whole.socket_ifs)
    assert sorted(folded.rings) == sorted(set(whole.rings))
    # each entry names the line it was first printed on, as the first of its repeats did
    firsts = {
        (t.channel, t.src, t.dst, t.direction, t.via, t.proc): t.line for t in reversed(whole.transports)
    }
    assert {
        (t.channel, t.src, t.dst, t.direction, t.via, t.proc): t.line for t in folded.transports
    } == firsts
    assert not folded.dropped and folded.warnings == whole.warnings


@pytest.mark.parametrize("src", CAPTURES, ids=lambda p: p.name)
def test_repeated_capture_findings_equal_with_every_line_kept(src: Path, tmp_path: Path, monkeypatch) -> None:
    whole, folded = _both(_repeat(tmp_path, src.read_bytes()), monkeypatch)
    assert folded == whole


def test_affinity_and_transports_of_the_efa_log_repeated(tmp_path: Path, monkeypatch) -> None:
    """COMM003 (remote affinity mask, joined with a topology) names the same line and mask when the
    log repeats, and nothing when the GPU is local."""
    p = _repeat(tmp_path, shared_fixture(EFA).read_bytes())
    whole, folded = _both(p, monkeypatch, topology=_topo(gpu_node=1))
    assert folded == whole and any("'COMM003'" in f for f in folded)
    whole, folded = _both(p, monkeypatch, topology=_topo(gpu_node=0))
    assert folded == whole and not any("'COMM003'" in f for f in folded)


def test_socket_interface_on_a_veth_repeated(tmp_path: Path, monkeypatch) -> None:
    """COMM015 and COMM001 on pytorch#68893's lines repeated 50 times: the same findings, the channel
    count in COMM001's evidence the 50 lines printed."""
    p = _repeat(tmp_path, VETH.encode(), 50)
    whole, folded = _both(p, monkeypatch)
    assert folded == whole
    assert any("'COMM015'" in f for f in folded) and any("'COMM001'" in f for f in folded)
    log = load_nccl_log(p)
    assert len(log.transports) == 1 and log.transports[0].count == 50
    (seen,) = log.socket_if_seen.values()
    assert (seen.first, seen.last, seen.count) == (1, 197, 50)


def test_distinct_lines_past_the_cap_are_counted(monkeypatch) -> None:
    """Synthetic: 30 distinct channel lines and 30 distinct masks with MAX_DISTINCT 10: 10 of each kept,
    20 counted and warned once per kind; repeats of kept lines still counted on them."""
    monkeypatch.setattr(nccl_log, "MAX_DISTINCT", 10)
    lines = []
    for i in range(30):
        lines.append(f"h:1:1 [0] NCCL INFO Channel 00/0 : {i}[0] -> {i + 1}[0] via NET/IB/0\n")
        lines.append(f"h:1:1 [0] NCCL INFO Setting affinity for GPU {i} to ff\n")
    text = "".join(lines) + lines[0]
    log = parse_nccl_log(text, "x.log")
    assert len(log.transports) == 10 and len(log.affinities) == 10
    assert log.dropped == {"transports": 20, "affinities": 20}
    assert log.transports[0].count == 2 and (log.transports[0].line, log.transports[0].last_line) == (1, 61)
    assert sum("over 10 distinct" in w for w in log.warnings) == 2


def test_lines_longer_than_a_block(tmp_path: Path, monkeypatch) -> None:
    """Synthetic: lines of 10 KB (a long env dump) before and after real lines, read in 4 KB blocks:
    the same records and line numbers as the text parser, every byte counted; no line break in more
    than _LONGEST_LINE bytes is refused in one line."""
    text = shared_fixture(EFA).read_text()
    long = "x" * 10_000 + " NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
    body = long + text + long + text + "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>"
    p = tmp_path / "long.log"
    p.write_text(body)
    monkeypatch.setattr(nccl_log, "_BLOCK", 4096)
    got, ref = load_nccl_log(p), parse_nccl_log(body)
    assert got.bytes_read == len(body.encode()) and got.env == ref.env
    assert got.env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert [(t.line, t.last_line, t.count) for t in got.transports] == [
        (t.line, t.last_line, t.count) for t in ref.transports
    ]
    assert got.socket_if_seen == ref.socket_if_seen and len(got.socket_if_seen) == 1
    monkeypatch.setattr(nccl_log, "_LONGEST_LINE", 8192)
    p.write_text(text + "y" * 20_000)
    with pytest.raises(nccl_log.InputError) as e:
        load_nccl_log(p)
    assert "no line breaks" in e.value.one_line() and "long.log" in e.value.one_line()


_HWM = """
import sys
from clusterdoctor.observe.limits import set_limit
set_limit("input=2G")
from clusterdoctor.observe.comm import nccl_log
log = nccl_log.load_nccl_log(sys.argv[1])  # in 1 MiB blocks: both sizes read in many
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM"))
print(hwm, log.lines_of(log.transports))
"""


def test_peak_memory_flat_in_file_size(tmp_path: Path) -> None:
    """VmHWM of a child reading the real EFA init log repeated (synthetic: a repeat) to 4 MB and to
    28 MB: 7x the transport lines, under 2 MiB more memory (measured 0.1 MiB; before, with each line
    kept, 4.0 MiB more from 4 to 16 MB: ~8 MiB here)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (VmHWM)")
    unit = shared_fixture(EFA).read_bytes()
    got = {}
    for mb in (4, 28):
        p = tmp_path / f"nccl-{mb}MB.log"
        p.write_bytes(unit * (mb * 1_000_000 // len(unit)))
        out = subprocess.run([sys.executable, "-c", _HWM, str(p)], capture_output=True, text=True, check=True)
        got[mb] = tuple(int(x) for x in out.stdout.split())
    assert got[28][1] >= 6.9 * got[4][1]
    assert (got[28][0] - got[4][0]) / 1024 < 2.0, got
