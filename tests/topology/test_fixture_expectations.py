"""Every topology fixture in ../shared/fixtures/numa parses into what the file itself states.

For each file: the NUMA node ids, each GPU's and NIC's NUMA node (None where the file does not say),
and the distance matrix (None where the file has none). These were written by reading each file
(see the comments), not by running the parser. The sysfs tarball under hwloc/ is read by the sysfs
reader and checked by its own tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from clusterdoctor.observe.node.hwloc_xml import parse_hwloc_xml, sniff_hwloc_xml
from clusterdoctor.observe.node.nccl_topo import parse_nccl_topo_xml, sniff_nccl_topo
from clusterdoctor.observe.node.numactl import parse_numactl_hardware, sniff_numactl_hardware
from clusterdoctor.observe.node.nvidia_smi import parse_nvidia_smi_topo, sniff_nvidia_smi_topo
from clusterdoctor.testing import fixtures_root
from tests.conftest import shared_fixture

PARSERS = {
    "hwloc": (parse_hwloc_xml, sniff_hwloc_xml),
    "nccl": (parse_nccl_topo_xml, sniff_nccl_topo),
    "nvsmi": (parse_nvidia_smi_topo, sniff_nvidia_smi_topo),
    "numactl": (parse_numactl_hardware, sniff_numactl_hardware),
}


@dataclass
class Expect:
    fmt: str
    nodes: list[int]
    gpus: dict[str, int | None] = field(default_factory=dict)  # GPU name or PCI address -> node
    nics: dict[str, int | None] = field(default_factory=dict)  # NIC name -> node
    distances: list[list[int]] | None = None


EXPECTED: dict[str, Expect] = {
    # Header GPU0..7, mlx5_0..11; NUMA Affinity column 3,3,1,1,7,7,5,5. NICs: PXB pairs to GPU0/1 (mlx5_0/1),
    # GPU2/3 (mlx5_2/3), GPU4/5 (mlx5_6/7), GPU6/7 (mlx5_8/9); mlx5_4/5 and mlx5_10/11 are SYS to every
    # GPU, so the file does not place them.
    "nvidia-smi-topo-m_dgx-a100_epyc-nps4_8gpu-12nic.txt": Expect(
        "nvsmi",
        nodes=[1, 3, 5, 7],
        gpus={"GPU0": 3, "GPU1": 3, "GPU2": 1, "GPU3": 1, "GPU4": 7, "GPU5": 7, "GPU6": 5, "GPU7": 5},
        nics={
            "mlx5_0": 3,
            "mlx5_1": 3,
            "mlx5_2": 1,
            "mlx5_3": 1,
            "mlx5_4": None,
            "mlx5_5": None,
            "mlx5_6": 7,
            "mlx5_7": 7,
            "mlx5_8": 5,
            "mlx5_9": 5,
            "mlx5_10": None,
            "mlx5_11": None,
        },  # fmt: skip
    ),
    # GPU0/1 NUMA 0, GPU2/3 NUMA 1; NIC Legend NIC0..3 = mlx5_0..3; NIC0/1 NODE to GPU0/1, NIC2/3 to GPU2/3.
    "nvidia-smi-topo-m_asus-esc8000a-e12_genoa-2s_4x-rtx6000ada_2x-cx7.txt": Expect(
        "nvsmi",
        nodes=[0, 1],
        gpus={"GPU0": 0, "GPU1": 0, "GPU2": 1, "GPU3": 1},
        nics={"mlx5_0": 0, "mlx5_1": 0, "mlx5_2": 1, "mlx5_3": 1},
    ),
    # available: 2 nodes (0-1); node distances 10 32 / 32 10.
    "numactl-hardware_asus-esc8000a-e12_genoa-2s.txt": Expect(
        "numactl", nodes=[0, 1], distances=[[10, 32], [32, 10]]
    ),
    # Two <cpu numaid=0|1>; under each, four virtual bridges each holding one mlx5 VF and one H100 <gpu dev>.
    "nccl-topo-dump_ibm-cloud-gx3d-160x1792x8h100_2numa_8gpu-8nic.xml": Expect(
        "nccl",
        nodes=[0, 1],
        gpus={f"GPU{i}": 0 if i < 4 else 1 for i in range(8)},
        nics={f"mlx5_{i}": 1 if i < 4 else 0 for i in range(8)},
    ),
    # Four <cpu numaid>; GPU buses 0003/0004 on numaid 0, 0001/0002 on 1, 000d/000e on 2, 000b/000c on 3.
    "nccl-topo-file_azure-ndv4_a100x8_epyc-4numa.xml": Expect(
        "nccl",
        nodes=[0, 1, 2, 3],
        gpus={
            "0003:00:00.0": 0,
            "0004:00:00.0": 0,
            "0001:00:00.0": 1,
            "0002:00:00.0": 1,
            "000d:00:00.0": 2,
            "000e:00:00.0": 2,
            "000b:00:00.0": 3,
            "000c:00:00.0": 3,
        },  # fmt: skip
        nics={
            "0103:00:00.0": 0,
            "0104:00:00.0": 0,
            "0101:00:00.0": 1,
            "0102:00:00.0": 1,
            "0107:00:00.0": 2,
            "0108:00:00.0": 2,
            "0105:00:00.0": 3,
            "0106:00:00.0": 3,
        },  # fmt: skip
    ),
    # NUMANode 0 in Package 0, 1 in Package 1; cuda0 (84:00.0) and the M2075 at 83:00.0 under Package 1's
    # host bridge, the M2075 at 03:00.0 under Package 0; the Radeon (84:00.1, opencl0d1) under Package 1;
    # ConnectX-4 mlx5_0 at bus 0x04: placed under Package 1's bridge 80:03.0 in the (test-assembled) tree, but
    # bus 0x04 is in Package 0's host-bridge range [00-05] and pci_locality gives node 0 (as SOURCES.md says).
    # NUMALatency 10 20 20 10.
    "hwloc/32em64t-2n8c2t-pci-normalio.xml": Expect(
        "hwloc",
        nodes=[0, 1],
        gpus={"0000:84:00.0": 1, "0000:83:00.0": 1, "0000:03:00.0": 0, "0000:84:00.1": 1},
        nics={"mlx5_0": 0, "eth0": 1, "eth1": 1},
        distances=[[10, 20], [20, 10]],
    ),
    # Tesla 06:00.0 and ConnectX mlx4_0 under Package 0; Teslas 11:00.0 and 14:00.0 under Package 1.
    "hwloc/24em64t-2n6c2t-pci.xml": Expect(
        "hwloc",
        nodes=[0, 1],
        gpus={"0000:06:00.0": 0, "0000:11:00.0": 1, "0000:14:00.0": 1},
        nics={"mlx4_0": 0, "eth0": 0, "eth1": 0},
        distances=[[10, 20], [20, 10]],
    ),
    # POWER8: cuda0/1 (0002:, 0003:) under Package 0 with NUMANode 0, cuda2/3 (000a:, 000b:) under Package 1.
    "hwloc/power8gpudistances.xml": Expect(
        "hwloc",
        nodes=[0, 1],
        gpus={"GPU0": 0, "GPU1": 0, "GPU2": 1, "GPU3": 1},
        distances=[[10, 40], [40, 10]],
    ),
    # Package P#1 holds NUMANode P#0 and the whole PCI tree (eth0/eth1, mlx4_0); no distances2 element.
    "hwloc/devel09-pci.xml": Expect("hwloc", nodes=[0, 1], nics={"mlx4_0": 0, "eth0": 0, "eth1": 0}),
}

SYSFS_TARBALLS = {"hwloc/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2"}


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_fixture_parses_to_what_it_states(rel: str):
    exp = EXPECTED[rel]
    p = shared_fixture(f"numa/{rel}")
    parse, _ = PARSERS[exp.fmt]
    t = parse(p.read_bytes(), str(p))
    assert t.node_ids == exp.nodes
    assert len(t.nodes) == len(exp.nodes)
    for key, node in exp.gpus.items():
        dev = t.find_device(key)
        assert dev is not None and dev.kind == "gpu", key
        assert dev.numa_node == node, key
    if exp.gpus:
        assert len(t.gpus) == len(exp.gpus)
    for key, node in exp.nics.items():
        dev = t.find_device(key)
        assert dev is not None and dev.kind == "nic", key
        assert dev.numa_node == node, key
    assert t.distances == exp.distances
    for dev in t.devices():
        if dev.numa_node is None:
            assert dev.numa_source == "unknown"  # never a silent guess
        else:
            assert dev.numa_node in t.node_ids


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_exactly_one_format_claims_each_fixture(rel: str):
    head = shared_fixture(f"numa/{rel}").read_bytes()[:4096]
    claims = [name for name, (_, sniff) in PARSERS.items() if sniff(head)]
    assert claims == [EXPECTED[rel].fmt]


def test_every_fixture_has_expectations():
    if fixtures_root() is None:
        pytest.skip("shared fixtures absent")
    base = shared_fixture("numa")
    files = {str(f.relative_to(base)) for f in base.rglob("*") if f.is_file() and f.name != "SOURCES.md"}
    assert files - SYSFS_TARBALLS == set(EXPECTED)
