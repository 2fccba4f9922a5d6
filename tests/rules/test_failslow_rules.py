"""The fail-slow rules on real probe files: findings name rank, host, GPU and NIC (the NIC joined to a
real topology when one is given), onset, slowdown and cost."""

from __future__ import annotations

import dataclasses

from clusterdoctor.analyze.failslow import table_from_records
from clusterdoctor.observe.detect import load_path
from clusterdoctor.observe.watch.records import load_watch_dir
from clusterdoctor.rules.failslow import run_failslow_rules
from clusterdoctor.rules.registry import Observations
from tests.conftest import TEST_DATA, shared_fixture

DATA = TEST_DATA / "failslow"


def _obs(folder: str, gpu_of=None) -> Observations:
    wf = load_watch_dir(str(DATA / folder))
    ids = wf.identities
    if gpu_of is not None:
        ids = {r: [dataclasses.replace(i, gpu=gpu_of(r), nic=None) for i in v] for r, v in ids.items()}
    obs = Observations()
    obs.put("watch", table_from_records(wf.steps, ids, wf.links, wf.warnings))
    return obs


def test_each_fault_one_finding_with_its_facts():
    for folder, rule in (("quota-rank2", "FS001"), ("slowloader-rank1", "FS003"), ("slowlink-rank3", "FS002"),
                         ("periodic-quota-rank2", "FS005"), ("jobwide-quota", "FS004")):  # fmt: skip
        findings, skipped, ran = run_failslow_rules(_obs(folder))
        assert [f.rule for f in findings] == [rule], folder
        f = findings[0]
        text = " ".join(f"{e.description}={e.value}" for e in f.evidence)
        assert "onset" in text and "slowdown factor" in text and "steps the job lost" in text
        if "host=" in text:  # a rank's finding: gloo ranks on this machine's CPU, not a GPU called "cpu"
            assert "device=CPU (no GPU)" in text and "GPU=" not in text
        assert f.fix and f.verify and 0 < f.confidence <= 1
        assert set(ran) == {"FS001", "FS002", "FS003", "FS004", "FS005", "FS006", "FS007"}
        # the join to GPU health is not checked without GPU data, and says so
        assert [(s.rule, "no GPU health source" in s.reason) for s in skipped] == [("GPU019", True)]


def test_gpu_and_nic_joined_to_the_topology():
    topo_file = shared_fixture("numa/nvidia-smi-topo-m_dgx-a100_epyc-nps4_8gpu-12nic.txt")
    _, data = load_path(topo_file)
    obs = _obs("quota-rank2", gpu_of=lambda r: str(r))
    obs.put("topology", data["topology"])
    (f,) = run_failslow_rules(obs)[0]
    ev = {e.description: e.value for e in f.evidence}
    assert f.subject == "rank 2, host vm, GPU 2"
    assert (
        ev["GPU"] == "2"
        and ev["NIC"].startswith("mlx5")
        and ev["GPU-NIC path"] in ("PIX", "PXB", "PHB", "NODE", "SYS")
    )


def test_no_probe_data_is_skipped_with_the_reason():
    findings, skipped, ran = run_failslow_rules(Observations())
    assert not findings and not ran
    assert all("fail-slow probe" in s.reason for s in skipped)


def test_a_rank_frozen_inside_the_collective_is_named_by_its_own_stall():
    """A real CI run (tests/data/failslow/README.md): rank 2 throttled to 15% of a CPU froze inside the
    collective, so it was seldom last to arrive and every rank's collective stretched; its own process
    stall names it a compute straggler, not a collective slowdown with no rank."""
    findings, _, _ = run_failslow_rules(_obs("quota-rank2-frozen-in-collective"))
    assert [(f.rule, f.subject) for f in findings] == [("FS001", "rank 2, host vm")]
    ev = {e.description: e.value for e in findings[0].evidence}
    assert ev["its process stalls grew by"] > 15  # ms a step
    assert ev["others wait for it, per step"] < 10  # lateness alone could not name it
    assert "stops inside the collectives" in findings[0].summary
    assert int(str(ev["onset (change point in step time)"]).split()[1]) >= 25


def test_diagnose_reads_probe_files_and_runs_the_fail_slow_rules(tmp_path):
    """`diagnose DIR` on a folder of probe files: each file is detected as a probe file and the ranks'
    files become one step table (the derived "watch" input), judged by FS001-FS007."""
    from clusterdoctor import diagnosis
    from clusterdoctor.rules.registry import run_rules

    obs = diagnosis.new_observations(clock=lambda: 1.8e9)
    refs = diagnosis.load_sources(obs, [DATA / "quota-rank2"])
    assert {r.kind for r in refs} == {f"fail-slow probe file (rank {r})" for r in range(4)}
    findings, _skipped, ran = run_rules(obs)
    assert "FS001" in ran and [f.rule for f in findings if f.layer == "failslow"] == ["FS001"]
    assert findings[0].subject == "rank 2, host vm"


def test_traces_the_straggler_explains_are_folded_into_its_finding():
    """Kineto traces of a job whose rank 1 was SIGSTOPped: the waiting ranks' exposed communication
    (COMM006, one per victim) is evidence of the straggler's FS001, not four causes of their own."""
    from clusterdoctor import diagnosis
    from clusterdoctor.rules.registry import run_rules

    obs = diagnosis.new_observations(clock=lambda: 1.8e9)
    diagnosis.load_sources(obs, [DATA / "traces-stopcont-rank1"])
    findings, _skipped, ran = run_rules(obs)
    assert {"FS001", "COMM006"} <= set(ran)
    assert [(f.rule, f.subject) for f in findings][:1] == [("FS001", "rank 1")]
    assert not [f for f in findings if f.rule in ("COMM006", "COMM007")]
    folded = [e.description for e in findings[0].evidence if e.description.startswith("explains COMM006")]
    assert len(folded) == 4


def test_diagnose_given_two_jobs_probe_files_judges_one_and_says_so():
    from clusterdoctor import diagnosis
    from clusterdoctor.rules.registry import run_rules

    obs = diagnosis.new_observations(clock=lambda: 1.8e9)
    diagnosis.load_sources(obs, [DATA / "quota-rank2", DATA / "clean"])
    findings, _skipped, _ran = run_rules(obs)
    warns = obs.get("warnings_list")
    assert any("fail-slow probe files of 2 jobs" in w for w in warns), warns
    assert len([f for f in findings if f.layer == "failslow"]) <= 1
