"""The sysfs reader on this machine's live /sys and on hwloc's real sysfs snapshot tarball."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.sysfs import collect_sysfs_topology, device_node
from clusterdoctor.topology.build import load_topology, safe_extract
from clusterdoctor.topology.model import NumaNode
from tests.conftest import shared_fixture

SNAPSHOT = "numa/hwloc/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2"


def test_live_sys_matches_kernel_files():
    topo = collect_sysfs_topology("/")
    node_dirs = sorted(p for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    assert [n.id for n in topo.nodes] == [int(p.name[4:]) for p in node_dirs]
    # every online CPU that sysfs lists under a node is in exactly one node
    all_cpus = [c for n in topo.nodes for c in n.cpus]
    assert len(all_cpus) == len(set(all_cpus))
    assert set(os.sched_getaffinity(0)) <= set(all_cpus)
    first = node_dirs[0]
    assert topo.distances is not None
    assert topo.distances[0] == [int(x) for x in (first / "distance").read_text().split()]
    assert topo.allowed_cpus == tuple(sorted(os.sched_getaffinity(0)))
    assert topo.nodes[0].memory_bytes and topo.nodes[0].memory_bytes > 0
    assert topo.cpus and all(c.siblings for c in topo.cpus.values())


def test_hwloc_snapshot_tarball_read_directly():
    tar = shared_fixture(SNAPSHOT)
    topo = load_topology(tar)
    # Values below read from the snapshot's files (see fixtures/numa/SOURCES.md):
    # node0/cpulist 0-7, node1/cpulist 8-15, node0/distance "10 21".
    assert [n.id for n in topo.nodes] == [0, 1]
    assert topo.nodes[0].cpus == tuple(range(8))
    assert topo.nodes[1].cpus == tuple(range(8, 16))
    assert topo.distances == [[10, 21], [21, 10]]
    assert topo.nodes[0].memory_bytes == 16747124 * 1024  # "Node 0 MemTotal: 16747124 kB"
    mlx = topo.find_device("mlx4_0")
    assert mlx is not None and mlx.kind == "nic" and mlx.pci == "0000:82:00.0"
    assert mlx.numa_node == 1 and mlx.numa_source == "numa_node"
    assert mlx.attrs["rdma"] is True and "ib0" in mlx.attrs["netdevs"]
    # NVMe with numa_node=-1 but local_cpulist=0-3: falls back to local_cpulist -> node 0.
    nvme = next(d for d in topo.other_devices if d.pci == "0000:00:02.0")
    assert nvme.kind == "nvme" and nvme.numa_node == 0 and nvme.numa_source == "local_cpulist"
    assert topo.source_kind == "sysfs-tarball"
    assert not topo.gpus


def test_snapshot_extracted_as_directory(tmp_path):
    tar = shared_fixture(SNAPSHOT)
    safe_extract(tar, tmp_path)
    topo = collect_sysfs_topology(tmp_path)  # one level above the sys/ root: found automatically
    assert len(topo.nodes) == 2
    assert topo.find_device("eth0").numa_node == 0


def test_device_node_never_guesses_zero():
    nodes = [NumaNode(0, (0, 1)), NumaNode(1, (2, 3))]
    assert device_node(-1, None, nodes) == (None, "unknown")
    assert device_node(-1, (0, 1, 2, 3), nodes) == (None, "unknown")  # spans both nodes: unknown
    assert device_node(-1, (2,), nodes) == (1, "local_cpulist")
    assert device_node(1, (0,), nodes) == (1, "numa_node")


def test_not_a_sysfs_root(tmp_path):
    with pytest.raises(InputError, match="not a sysfs root"):
        collect_sysfs_topology(tmp_path)


def test_tarball_escaping_members_are_refused(tmp_path):
    evil = tmp_path / "evil.tar"
    payload = tmp_path / "p"
    payload.write_text("x")
    with tarfile.open(evil, "w") as tf:
        tf.add(payload, arcname="../escaped")
        link = tarfile.TarInfo("sys/devices/system/node/node0/cpulist")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)
    dest = tmp_path / "out"
    dest.mkdir()
    warnings = safe_extract(evil, dest)
    assert len(warnings) == 2
    assert not (tmp_path / "escaped").exists()
    assert not (dest / "sys/devices/system/node/node0/cpulist").exists()


def test_garbage_tarball_is_input_error(tmp_path):
    bad = tmp_path / "x.tar.bz2"
    bad.write_bytes(b"BZh91AY&SY" + b"\x00" * 50)
    with pytest.raises(InputError):
        load_topology(bad)
