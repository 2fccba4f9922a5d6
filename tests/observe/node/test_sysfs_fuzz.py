"""Fuzz the sysfs reader: garbage in the files of hwloc's real sysfs snapshot never crashes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.sysfs import collect_sysfs_topology
from clusterdoctor.topology.build import safe_extract
from tests.conftest import shared_fixture

FILES = [
    "sys/devices/system/node/node0/cpulist",
    "sys/devices/system/node/node1/distance",
    "sys/devices/system/node/node0/meminfo",
    "sys/devices/system/cpu/cpu3/topology/thread_siblings_list",
    "sys/devices/system/cpu/cpu3/topology/core_id",
    "sys/bus/pci/devices/0000:82:00.0/numa_node",
    "sys/bus/pci/devices/0000:82:00.0/local_cpulist",
    "sys/bus/pci/devices/0000:00:02.0/class",
]


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    tar = shared_fixture("numa/hwloc/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2")
    dest = tmp_path_factory.mktemp("snap")
    safe_extract(tar, dest)
    return next(dest.iterdir())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(FILES), data=st.binary(max_size=200))
def test_garbage_in_any_file(snapshot, which, data):
    target = snapshot / which
    original = target.read_bytes()
    target.write_bytes(data)
    try:
        topo = collect_sysfs_topology(snapshot)
    except InputError:
        return
    finally:
        target.write_bytes(original)  # mutate one file at a time, in place
    # whatever was read is never a guess: a device's node is one the tree lists, or unknown
    ids = {n.id for n in topo.nodes}
    for d in topo.devices():
        assert d.numa_node is None or d.numa_node in ids or not ids
        assert d.numa_source in ("numa_node", "local_cpulist", "unknown")
