"""RDMA counters: rdma statistic/res text, mlx5 hw_counters text, the sysfs tree, rates."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.network.rdma import (
    RdmaPort,
    bytes_counters,
    load_rdma,
    parse_hw_counters_text,
    parse_rdma_res_qp,
    parse_rdma_statistic,
    rates,
    read_sysfs_infiniband,
    sniff_rdma,
)
from tests.conftest import shared_fixture


def untar_infiniband(ttar: Path, dest: Path) -> Path:
    """Write the ``sys/class/infiniband`` part of a node_exporter ``ttar`` archive under ``dest``.

    ttar records are ``Path: P`` / ``Lines: N`` / N content lines / ``Mode: M`` (or ``Directory: P``).
    """
    lines = ttar.read_text().splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("Path: ") and i + 1 < len(lines) and lines[i + 1].startswith("Lines: "):
            path = ln[6:]
            n = int(lines[i + 1][7:])
            body = lines[i + 2 : i + 2 + n]
            i += 2 + n
            if path.startswith("sys/class/infiniband/"):
                f = dest / path
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text("".join(b + "\n" for b in body))
            continue
        i += 1
    return dest


@pytest.fixture
def ib_root(tmp_path):
    return untar_infiniband(
        shared_fixture("ctrl/nic/sysfs/node_exporter_sys_fixtures.ttar"), tmp_path / "root"
    )


def test_rdma_statistic_one_line_per_link():
    p = shared_fixture("ctrl/rdma_statistic_show_mlx5_4links.txt")
    ports = parse_rdma_statistic(p.read_text(), str(p))
    assert [x.name for x in ports] == ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1"]
    assert all(len(x.counters) == 29 for x in ports)
    c = ports[0].counters
    assert (c["out_of_buffer"], c["resp_cqe_error"], c["req_cqe_error"]) == (135, 1009, 22)
    assert (c["resp_cqe_flush_error"], c["req_cqe_flush_error"]) == (998, 11)
    assert all(v == 0 for x in ports[1:] for v in x.counters.values())


def test_mlx5_bond_hw_counters_text():
    p = shared_fixture("ctrl/mlx5_bond_0_show_counters_hw_counters.txt")
    (port,) = parse_hw_counters_text(p.read_text(), str(p))
    assert port.name == "mlx5_bond_0/1"
    c = port.counters
    assert c["np_cnp_sent"] == 1052612505
    assert c["np_ecn_marked_roce_packets"] == 21278189006
    assert c["out_of_sequence"] == 1811101
    assert c["rp_cnp_handled"] == 0
    assert c["lifespan"] == 10
    assert c["resp_cqe_error"] == 3293504


def test_res_qp_old_and_new_iproute2_and_stat_p():
    p = shared_fixture("ctrl/rdma_iproute2_res_qp_and_stat_p_samples.txt")
    qps = parse_rdma_res_qp(p.read_text(), str(p))
    assert len(qps) == 13
    assert all(q.kernel for q in qps[:8])  # old iproute2: `comm ib_core`
    xrc = [q for q in qps if q.type.startswith("XRC")]
    assert [(q.type, q.state) for q in xrc] == [("XRC_TGT", "INIT"), ("XRC_INI", "INIT")]
    user = [q for q in qps if not q.kernel]
    assert len(user) == 1 and user[0].pid == 419 and user[0].comm == "ibv_xsrq_pingpong"
    # the same file's `rdma stat show -p` block: one port, 21 counters, all zero
    (port,) = parse_rdma_statistic(p.read_text(), str(p))
    assert port.name == "mlx5_0/1" and len(port.counters) == 21 and not any(port.counters.values())
    out = load_rdma(p)
    assert len(out["rdma_qps"]) == 13 and len(out["rdma"]) == 1


def test_sysfs_tree_from_node_exporter_fixture(ib_root):
    ports = {p.name: p for p in read_sysfs_infiniband(ib_root)}
    assert set(ports) == {"i40iw0/1", "mlx4_0/1", "mlx4_0/2"}
    m = ports["mlx4_0/1"]
    assert m.counters["port_xmit_discards"] == 5
    assert m.counters["port_rcv_data"] == 4631917
    assert bytes_counters(m)["port_rcv_bytes"] == 4631917 * 4  # 4-byte words
    assert m.counters["port_xmit_wait"] == 4294967295
    assert "port_xmit_wait" in m.saturated  # 2**32-1: stuck, not a value
    assert m.rate == "40 Gb/sec (4X QDR)" and m.state == "4: ACTIVE" and m.link_layer == "InfiniBand"
    i40 = ports["i40iw0/1"]
    assert not i40.counters and len(i40.unavailable) == 17  # every counter reads "N/A (no PMA)"
    assert read_sysfs_infiniband(ib_root / "nothing-here") == []


def test_rates_between_two_reads_with_reset(ib_root, tmp_path):
    before = read_sysfs_infiniband(ib_root)
    after_root = tmp_path / "after"
    shutil.copytree(ib_root, after_root)
    cdir = after_root / "sys/class/infiniband/mlx4_0/ports/1/counters"
    (cdir / "port_rcv_data").write_text(f"{4631917 + 250}\n")
    (cdir / "port_xmit_discards").write_text("2\n")  # went down: reset
    after = read_sysfs_infiniband(after_root)
    r = {x.name: x for x in rates(before, after, interval_s=5.0)}["mlx4_0/1"]
    assert r.deltas["port_rcv_data"] == 250
    assert r.per_s["port_rcv_bytes"] == pytest.approx(250 * 4 / 5.0)
    assert "port_xmit_discards" in r.resets and r.deltas["port_xmit_discards"] == 2
    assert "port_xmit_wait" in r.saturated and "port_xmit_wait" not in r.deltas


@settings(max_examples=200)
@given(
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.floats(min_value=0.01, max_value=3600, allow_nan=False),
)
def test_rates_property(b, a, dt):
    r = rates([RdmaPort("d", 1, {"out_of_buffer": b})], [RdmaPort("d", 1, {"out_of_buffer": a})], dt)[0]
    expect = a - b if a >= b else a
    assert r.deltas["out_of_buffer"] == expect
    assert r.per_s["out_of_buffer"] == pytest.approx(expect / dt)
    assert r.per_s["out_of_buffer"] >= 0
    assert ("out_of_buffer" in r.resets) == (a < b)


def test_rates_need_positive_interval():
    with pytest.raises(InputError):
        rates([RdmaPort("d", 1, {"x": 1}, time=5.0)], [RdmaPort("d", 1, {"x": 2}, time=5.0)])


def test_sniff():
    for rel in (
        "ctrl/rdma_statistic_show_mlx5_4links.txt",
        "ctrl/mlx5_bond_0_show_counters_hw_counters.txt",
        "ctrl/rdma_iproute2_res_qp_and_stat_p_samples.txt",
    ):
        assert sniff_rdma(shared_fixture(rel).read_bytes())
    assert not sniff_rdma(shared_fixture("ctrl/etcd_zap_json_heartbeat_slow_disk_pr9761.log").read_bytes())


@pytest.mark.parametrize("fn", [parse_rdma_statistic, parse_hw_counters_text, parse_rdma_res_qp])
def test_garbage_is_input_error(fn):
    with pytest.raises(InputError):
        fn("hello\nworld\n", "x")


def _texts():
    return [
        shared_fixture(r).read_text()
        for r in (
            "ctrl/rdma_statistic_show_mlx5_4links.txt",
            "ctrl/mlx5_bond_0_show_counters_hw_counters.txt",
            "ctrl/rdma_iproute2_res_qp_and_stat_p_samples.txt",
        )
    ]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fuzz_parsers(data):
    fn = data.draw(st.sampled_from([parse_rdma_statistic, parse_hw_counters_text, parse_rdma_res_qp]))
    if data.draw(st.booleans()):
        text = data.draw(st.text(max_size=500))
    else:
        base = data.draw(st.sampled_from(_texts()))
        cut = data.draw(st.integers(0, len(base)))
        text = base[:cut] + data.draw(st.text(max_size=30)) + base[cut : cut + data.draw(st.integers(0, 200))]
    try:
        fn(text, "fuzz")
    except InputError:
        pass


def test_stat_p_pasted_with_spaces_for_tabs_is_read(tmp_path):
    # github.com/openucx/ucx/issues/10692 (corpus ok-rdma-1001): `rdma -p statistic show` as pasted on
    # GitHub, its tab indentation turned into four spaces; healthy counters, no finding
    from tests.conftest import diagnose_text

    text = (
        Path(__file__).resolve().parents[2] / "data" / "incidents" / "ok-rdma-1001" / "paste.txt"
    ).read_text()
    assert "\t" not in text and sniff_rdma(text.split("\n", 1)[1].encode())
    findings = diagnose_text(tmp_path, text)
    assert not [f for f in findings if f.severity.value in ("warning", "critical")]
