"""The CPU's vendor and model as each real source states it (unknown stays unknown)."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.topology.build import load_topology
from clusterdoctor.topology.cpu import CpuId, normalise_vendor, parse_cpuinfo, read_cpuinfo
from tests.conftest import TEST_DATA, shared_fixture

TOPO = TEST_DATA / "topology"


def test_proc_cpuinfo_capture():
    cpu = parse_cpuinfo((TOPO / "proc-cpuinfo_2cpu-kvm-vm_amd-epyc.txt").read_text())
    assert (cpu.vendor, cpu.model_name, cpu.family, cpu.model) == ("AMD", "AMD EPYC", 25, 17)
    assert cpu.platform() == "amd-epyc"


def test_hwloc_xml_capture_states_the_cpu():
    topo = load_topology(TOPO / "hwloc-2.9.0_2cpu-kvm-vm_amd-epyc.xml")
    assert topo.cpu == CpuId("AMD", "AMD EPYC", 25, 17, "hwloc XML")
    assert topo.as_dict()["cpu"]["platform"] == "amd-epyc"


def test_synthetic_hwloc_xml_says_nothing_about_the_cpu():
    assert load_topology(TOPO / "hwloc-2.9.0_synthetic_pack2-numa2-core8-pu2.v2.xml").cpu is None


def test_numactl_and_nvidia_smi_do_not_state_a_cpu():
    assert load_topology(TOPO / "numactl-hardware_2cpu-kvm-vm_1node.txt").cpu is None
    topo = load_topology(shared_fixture("numa/nvidia-smi-topo-m_dgx-a100_epyc-nps4_8gpu-12nic.txt"))
    assert topo.cpu is None  # the file name says EPYC; the file does not


@pytest.mark.parametrize(
    ("fixture", "vendor", "family", "model", "platform"),
    [
        ("numa/nccl-topo-dump_ibm-cloud-gx3d-160x1792x8h100_2numa_8gpu-8nic.xml", "Intel", 6, 143, "intel-sapphire-rapids"),
        ("numa/nccl-topo-file_azure-ndv4_a100x8_epyc-4numa.xml", "AMD", 23, 49, None),  # no model name: not guessed
    ],
)  # fmt: skip
def test_nccl_topology_xml_cpu(fixture, vendor, family, model, platform):
    cpu = load_topology(shared_fixture(fixture)).cpu
    assert (cpu.vendor, cpu.family, cpu.model, cpu.platform()) == (vendor, family, model, platform)


def test_sysfs_snapshot_reads_its_own_cpuinfo():
    """hwloc-gather-topology tarballs carry proc/cpuinfo beside sys/: a Sandy Bridge Xeon, not SPR."""
    topo = load_topology(shared_fixture("numa/hwloc/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2"))
    assert topo.cpu.vendor == "Intel" and (topo.cpu.family, topo.cpu.model) == (6, 45)
    assert "E5-2680" in topo.cpu.model_name and topo.cpu.platform() is None
    assert topo.cpu.source == "proc/cpuinfo of the snapshot"


def test_this_machine():
    cpu = read_cpuinfo("/")
    if cpu is None:
        pytest.skip("no /proc/cpuinfo here")
    assert cpu.source == "/proc/cpuinfo" and cpu.vendor


def test_sapphire_rapids_by_name_only_when_no_model_number():
    assert CpuId("Intel", "Intel(R) Xeon(R) Platinum 8480+").platform() == "intel-sapphire-rapids"
    assert CpuId("Intel", "Intel(R) Xeon(R) Gold 6338").platform() is None  # Ice Lake
    assert CpuId("Intel", "Intel(R) Xeon(R) Platinum 8480+", 6, 106).platform() is None  # the number wins


def test_vendor_strings():
    assert normalise_vendor("GenuineIntel") == "Intel" and normalise_vendor("AuthenticAMD") == "AMD"
    assert normalise_vendor("0x41") == "Arm" and normalise_vendor("") is None
    assert normalise_vendor("SomethingNew") == "SomethingNew"


@given(st.text(alphabet=string.printable + "µ", max_size=400))
def test_cpuinfo_parser_never_raises(text):
    cpu = parse_cpuinfo(text)
    assert cpu is None or cpu.vendor or cpu.model_name


def test_bundle_keeps_the_cpu(tmp_path):
    """`clusterdoctor collect` keeps proc/cpuinfo beside sys/, so an offline diagnosis knows the CPU."""
    import json

    from tests.conftest import run_cli

    live = read_cpuinfo("/")
    if live is None:
        pytest.skip("no /proc/cpuinfo here")
    bundle = tmp_path / "node.tar.zst"
    r = run_cli("collect", "-o", str(bundle), "--unit", "none", "--timeout", "5", "--rdma-interval", "0")
    assert r.code == 0, r.err
    r = run_cli("diagnose", str(bundle), "--format", "json")
    doc = json.loads(r.out)
    assert doc["topology"]["cpu"]["vendor"] == live.vendor
    assert doc["topology"]["cpu"]["model_name"] == live.model_name
