"""`diagnose` on the real GPU/RDMA pastes of tests/data/infra_pastes (SOURCES.md names each thread):
the first finding is the rule that names what the thread established, on the right instance."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdoctor import diagnosis

PASTES = Path(__file__).resolve().parents[1] / "data" / "infra_pastes"

# file, first rule, subject the first finding names ("" = the node / none)
CASES = (
    ("rdma-shared-dp-192-rdma-cm.txt", "RDMADP101", "0000:16:00.0"),
    ("rdma-shared-dp-44-empty.txt", "RDMADP101", "0000:2e:00.0"),
    ("rdma-shared-dp-159-eth.txt", "RDMADP101", "0000:c4:00.0"),
    ("sriov-dp-340-empty-pool.txt", "RDMADP104", "intel_sriov_netdevice"),
    ("rdma-shared-dp-87-exclusive.txt", "RDMADP102", ""),
    ("sriov-dp-424-no-rdma.txt", "RDMADP105", "0000:01:00.1"),
    ("nvrm-pai-4344-cut-prefix.txt", "GPU002", ""),
    ("dcgm-exporter-414-hostengine.txt", "DCGM103", ""),
    ("dcgm-exporter-188-stale.txt", "DCGM103", ""),
    ("dcgm-exporter-148-profiling-gsp.txt", "DCGM106", ""),
    ("dcgmi-dcgm-53-profiling.txt", "DCGM106", ""),
)
# read, and nothing wrong in them (the readers' own tests check the values)
QUIET = ("dmon-deepspeech-178-pucvmet.txt", "dmon-gpu-monitoring-tools-12.txt", "rdma-system-84-shared.txt")


def _diagnose(name: str):
    obs = diagnosis.new_observations(clock=lambda: 1.8e9)
    refs = diagnosis.load_sources(obs, [PASTES / name])
    return diagnosis.run(obs, refs)


@pytest.mark.parametrize(("name", "rule", "subject"), CASES, ids=[c[0] for c in CASES])
def test_first_finding_names_the_established_cause(name, rule, subject):
    diag = _diagnose(name)
    assert diag.findings, diag.warnings
    first = diag.findings[0]
    assert first.rule == rule, [f.rule for f in diag.findings]
    if subject:
        assert first.subject == subject


def test_every_paste_is_listed_with_its_source():
    listed = (PASTES / "SOURCES.md").read_text()
    files = sorted(p.name for p in PASTES.glob("*.txt"))
    assert files and all(f in listed for f in files)
    assert {c[0] for c in CASES} | set(QUIET) == set(files)


@pytest.mark.parametrize("name", QUIET)
def test_healthy_pastes_are_read_without_an_alarm(name):
    from clusterdoctor.model import Severity

    diag = _diagnose(name)
    assert not [w for w in diag.warnings if w.startswith("not used: ")]
    assert not [f for f in diag.findings if f.severity >= Severity.WARNING]


def test_cut_uptime_prefix_is_a_timestamp_not_part_of_the_message():
    from clusterdoctor.observe.gpu.kernel_log import parse_kernel_log

    rep = parse_kernel_log((PASTES / "nvrm-pai-4344-cut-prefix.txt").read_text(), "p")
    first = rep.events[0]
    assert first.kind == "probe_failed"
    assert first.message == "RmInitAdapter failed! (0x26:0xffff:1127)"
    assert first.time_text == "uptime 38.773115 s"
    assert len(rep.events) == 8


def test_empty_rdma_resource_names_the_resource():
    diag = _diagnose("rdma-shared-dp-44-empty.txt")
    assert ("RDMADP103", "hpc_shared_devices_e") in {(f.rule, f.subject) for f in diag.findings}
