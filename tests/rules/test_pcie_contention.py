"""PCIE004 on real dcgm-exporter dumps and real topologies (issue 23: PCIe contention).

The saturated inputs are the real dump's own lines with the PCIe byte rates raised (said so in each
test): no public dump of a saturated switch was found, and none can be made without a GPU.
"""

from __future__ import annotations

import re

from clusterdoctor import diagnosis
from clusterdoctor.analyze.pcie_traffic import gen_gbps, shared_paths
from clusterdoctor.topology.build import load_topology
from tests.conftest import shared_fixture as fixture_path

L40S = "gpu/dcgm-exporter_l40s_upcloud_595.58.03_prof-fields-healthy.prom"
DGX = "numa/nvidia-smi-topo-m_dgx-a100_epyc-nps4_8gpu-12nic.txt"


def _run(*paths):
    obs = diagnosis.new_observations(lambda: 0.0)
    refs = diagnosis.load_sources(obs, list(paths))
    return diagnosis.run(obs, refs)


def test_raw_link_rates_follow_pci_sig():
    assert round(gen_gbps(4, 16), 2) == 31.51  # 16 GT/s x 16 lanes x 128/130 / 8
    assert round(gen_gbps(3, 16), 2) == 15.75
    assert gen_gbps(None, 16) is None


def test_a_healthy_real_dump_is_read_and_not_flagged():
    d = _run(fixture_path(L40S))
    assert "PCIE004" in d.rules_run
    assert not [f for f in d.findings if f.rule == "PCIE004"]
    assert not [s for s in d.skipped if s.rule == "PCIE004"]  # judged: the L40S link is known


def test_a_saturated_link_on_the_real_dump_names_the_gpu(tmp_path):
    text = fixture_path(L40S).read_text()
    # derived: the real TX line with its value raised to 30 GB/s (95% of a Gen4 x16 link)
    text = re.sub(r"^(DCGM_FI_PROF_PCIE_TX_BYTES\{[^}]*\}) \d+", r"\1 30000000000", text, flags=re.M)
    f = tmp_path / "dcgm.prom"
    f.write_text(text)
    (finding,) = [x for x in _run(f).findings if x.rule == "PCIE004"]
    assert finding.subject == "GPU0 on gpu1-wl8sg"
    assert "95%" in finding.summary and "Gen4 x16" in finding.summary


def test_dgx_a100_pairs_share_a_switch_with_their_nics():
    paths = shared_paths(load_topology(fixture_path(DGX)))
    assert [(p.kind, p.gpus) for p in paths[:4]] == [
        ("switch", [f"GPU{i}", f"GPU{i + 1}"]) for i in (0, 2, 4, 6)
    ]
    assert paths[0].nics == ["mlx5_0", "mlx5_1"]
    assert all(p.kind == "switch" for p in paths)  # the host bridges hold the same pairs: not repeated


def test_two_gpus_behind_one_switch_saturate_its_uplink(tmp_path):
    line = next(
        ln
        for ln in fixture_path(L40S).read_text().splitlines()
        if ln.startswith("DCGM_FI_PROF_PCIE_RX_BYTES{")
    )
    # derived from the real line: 8 A100s of the DGX, GPU0 and GPU1 each receiving 14 GB/s, the others idle
    rows = []
    for i in range(8):
        v = 14_000_000_000 if i < 2 else 1_000_000
        lab = line.split("{", 1)[1].split("}", 1)[0]
        lab = re.sub(r'gpu="\d+"', f'gpu="{i}"', lab).replace("NVIDIA L40S", "NVIDIA A100-SXM4-80GB")
        lab = re.sub(r'pci_bus_id="[^"]*"', f'pci_bus_id="00000000:{i:02x}:00.0"', lab)
        rows.append(f"DCGM_FI_PROF_PCIE_RX_BYTES{{{lab}}} {v}")
    m = tmp_path / "dcgm.prom"
    m.write_text("# TYPE DCGM_FI_PROF_PCIE_RX_BYTES gauge\n" + "\n".join(rows) + "\n")
    found = [f for f in _run(m, fixture_path(DGX)).findings if f.rule == "PCIE004"]
    assert len(found) == 1
    assert found[0].subject.startswith("PCIe switch GPU0+GPU1 (GPU0, GPU1)")
    assert "89%" in found[0].summary  # 28 GB/s of one 31.5 GB/s Gen4 x16 uplink
