"""``numactl --hardware`` parser: the published ASUS output, this machine's live output, bad input."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from clusterdoctor.errors import InputError
from clusterdoctor.observe.node.numactl import parse_numactl_hardware, sniff_numactl_hardware
from tests.conftest import TEST_DATA, shared_fixture

ASUS = "numa/numactl-hardware_asus-esc8000a-e12_genoa-2s.txt"
MIB = 1 << 20


def test_asus_genoa_two_nodes():
    p = shared_fixture(ASUS)
    t = parse_numactl_hardware(p.read_text(), str(p))
    assert t.source_kind == "numactl-hardware"
    assert t.node_ids == [0, 1]
    assert t.node(0).cpus == tuple(range(32)) and t.node(1).cpus == tuple(range(32, 64))
    assert t.node(0).memory_bytes == 193129 * MIB and t.node(0).free_bytes == 186031 * MIB
    assert t.node(1).memory_bytes == 193477 * MIB and t.node(1).free_bytes == 186364 * MIB
    assert t.distances == [[10, 32], [32, 10]]  # published copy: trailing blanks stripped
    assert t.warnings == []


def test_committed_capture_with_trailing_blanks():
    p = TEST_DATA / "topology" / "numactl-hardware_2cpu-kvm-vm_1node.txt"
    raw = p.read_text()
    assert "  0:  10 \n" in raw  # real output keeps a blank after each cell
    t = parse_numactl_hardware(raw, str(p))
    assert t.node_ids == [0] and t.node(0).cpus == (0, 1) and t.distances == [[10]]
    assert t.node(0).memory_bytes == 6490 * MIB


@pytest.mark.skipif(shutil.which("numactl") is None, reason="numactl not installed")
def test_this_machine_agrees_with_sysfs():
    out = subprocess.run(["numactl", "--hardware"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0 or "No NUMA" in out.stdout:
        pytest.skip("numactl sees no NUMA here")
    t = parse_numactl_hardware(out.stdout, "<numactl --hardware>")
    from pathlib import Path

    from clusterdoctor.topology.cpuset import parse_cpulist

    for n in t.nodes:
        f = Path(f"/sys/devices/system/node/node{n.id}/cpulist")
        if f.exists():
            assert n.cpus == parse_cpulist(f.read_text())
        d = Path(f"/sys/devices/system/node/node{n.id}/distance")
        if d.exists() and t.distances is not None:
            assert t.distances[t.node_ids.index(n.id)] == [int(x) for x in d.read_text().split()]


def transform_asus(fn) -> str:
    """A variant of the real ASUS output (e.g. a CPU-less or memory-less node made by editing it)."""
    return fn(shared_fixture(ASUS).read_text())


def test_cpu_less_node():
    text = transform_asus(
        lambda s: s.replace("node 1 cpus: " + " ".join(str(c) for c in range(32, 64)), "node 1 cpus:")
    )
    t = parse_numactl_hardware(text)
    assert t.node(1).cpus == () and t.node(1).memory_bytes == 193477 * MIB
    assert not t.is_multi_node  # only one node has CPUs


def test_memory_less_node():
    t = parse_numactl_hardware(
        transform_asus(lambda s: s.replace("node 1 size: 193477 MB", "node 1 size: 0 MB"))
    )
    assert t.node(1).memory_bytes == 0 and t.node(1).cpus == tuple(range(32, 64))


def test_truncated_matrix_is_an_input_error():
    text = transform_asus(lambda s: s.rsplit("\n", 2)[0])
    with pytest.raises(InputError, match="truncated or inconsistent"):
        parse_numactl_hardware(text, "n.txt")


def test_missing_distance_section_is_a_warning():
    t = parse_numactl_hardware(transform_asus(lambda s: s.split("node distances:")[0]))
    assert t.distances is None and any("distances unknown" in w for w in t.warnings)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("No NUMA available on this system\n", "no NUMA support"),
        ("", "not `numactl --hardware` output"),
        ("hello world\n", "not `numactl --hardware` output"),
        ("available: 1 nodes (0)\nnode 0 cpus: 0 a\n", "bad cpu id"),
        ("available: 1 nodes (0)\nnode 0 cpus: 0\nnode 0 size: lots\n", "is not a size"),
        ("node 0 cpus: 0\nnode 1 cpus: 0\n", "listed on node 0 and node 1"),
        ("node 0 cpus: 0\nnode distances:\nnode 0 1\n  0: 10 20\n  1: 20 10\n", "distance header"),
        ("node 0 cpus: 0\nnode 1 cpus: 1\nnode distances:\nnode 0 1\n  0: 10\n", "has 1 values"),
    ],
)
def test_bad_input(text: str, reason: str):
    with pytest.raises(InputError) as e:
        parse_numactl_hardware(text, "n.txt")
    assert reason in e.value.reason


def test_sniff():
    assert sniff_numactl_hardware(b"available: 2 nodes (0-1)\nnode 0 cpus: 0 1\n")
    assert not sniff_numactl_hardware(b"<topology version='2.0'>")
    assert not sniff_numactl_hardware(b"\tGPU0\tGPU1\tCPU Affinity\n")
