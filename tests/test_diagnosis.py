"""The pipeline joining sources: a sysfs snapshot gives topology and RDMA counters in one diagnosis."""

from __future__ import annotations

from clusterdoctor import diagnosis
from tests.conftest import shared_fixture


def test_sysfs_tarball_gives_topology_and_rdma_counters():
    tar = shared_fixture("numa/hwloc/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2")
    obs = diagnosis.new_observations()
    refs = diagnosis.load_sources(obs, [tar])
    d = diagnosis.run(obs, refs)
    assert d.host == "unknown (offline sources)"
    assert len(d.topology.nodes) == 2
    ports = obs.get("rdma")
    assert any(p.device == "mlx4_0" for p in ports)
    # the snapshot's mlx4_0 port 1 counters/port_xmit_wait holds 21833
    rdma = [f for f in d.findings if f.rule == "RDMA002"]
    assert rdma and "port_xmit_wait=21833" in rdma[0].summary


def test_parse_since():
    assert diagnosis.parse_since("2h") == 7200 and diagnosis.parse_since("90") == 90
