"""The NUMA probe's host buffers: one allocation per node, all alive together, each placed by first touch
under the node's memory policy and checked with move_pages (runs on any Linux; no GPU needed)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from clusterdoctor.topology.bind import page_nodes  # noqa: E402
from clusterdoctor.topology.probe import node_buffers  # noqa: E402


def _nodes() -> list[int]:
    base = "/sys/devices/system/node"
    if not os.path.isdir(base):
        return []
    return sorted(int(d[4:]) for d in os.listdir(base) if d.startswith("node") and d[4:].isdigit())


def test_each_node_gets_its_own_buffer_on_that_node():
    nodes = _nodes()
    if not nodes:
        pytest.skip("no /sys/devices/system/node: no NUMA information on this machine")
    asked = nodes + nodes[:1]  # one node twice: still two separate allocations
    warnings: list[str] = []
    bufs = node_buffers(torch, asked, 4 << 20, warnings)
    assert [b.node for b in bufs] == asked
    addrs = [b.tensor.data_ptr() for b in bufs]
    assert len(set(addrs)) == len(addrs), "every node's buffer is a distinct allocation"
    for b in bufs:
        if not b.placed:
            pytest.skip(f"the kernel refused the memory policy here: {warnings}")
        assert b.page_nodes and all(n == b.node for n in b.page_nodes), (b.node, b.page_nodes)
    assert not warnings


def test_page_nodes_reports_untouched_pages_and_touched_ones():
    t = torch.empty(1 << 20, dtype=torch.uint8)
    t.fill_(0)
    touched = page_nodes(t.data_ptr(), t.numel())
    assert touched and all(n >= 0 for n in touched)
    assert set(touched) <= set(_nodes() or [0])


def test_a_distance_matrix_with_zero_on_the_diagonal_is_flagged():
    from clusterdoctor.topology.build import parse_topology_bytes

    text = (
        "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 1000 MB\nnode 0 free: 500 MB\n"
        "node 1 cpus: 2 3\nnode 1 size: 1000 MB\nnode 1 free: 500 MB\nnode distances:\n"
        "node   0   1\n  0:   0  21\n  1:  21   0\n"
    )
    topo = parse_topology_bytes(text.encode(), "numactl.txt")
    assert sum("to itself is 0" in w for w in topo.warnings) == 2
    ok = parse_topology_bytes(text.replace(":   0  21", ":  10  21").replace("21   0", "21  10").encode())
    assert not ok.distance_warnings()
