"""NUMA rules on real processes audited against a real two-node topology dump (hwloc XML)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clusterdoctor import diagnosis
from clusterdoctor.observe.node import procfs
from clusterdoctor.rules.registry import run_rules
from clusterdoctor.topology import placement
from clusterdoctor.topology.build import load_topology
from tests.conftest import shared_fixture

SL390 = "numa/hwloc/24em64t-2n6c2t-pci.xml"  # node 0 = even CPUs, node 1 = odd CPUs; GPU0 on node 0


@pytest.fixture
def procs():
    started = []

    def start(cpus, env):
        code = "import sys,time; b=bytearray(96<<20); sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(60)"
        p = subprocess.Popen(
            [sys.executable, "-c", code],
            env=dict(os.environ, **env),
            stdout=subprocess.PIPE,
            preexec_fn=lambda: os.sched_setaffinity(0, cpus),
        )
        assert p.stdout.readline().strip() == b"ready"
        started.append(p)
        return p.pid

    yield start
    for p in started:
        p.kill()
        p.wait()


def _findings(topo, pids):
    infos = [procfs.collect_process(pid) for pid in pids]
    obs = diagnosis.new_observations()
    diagnosis.add_topology(obs, topo)
    diagnosis.add_processes(obs, [p.as_dict() for p in placement.audit(infos, topo)])
    findings, skipped, ran = run_rules(obs)
    return findings, {s.rule for s in skipped}, ran


def test_cpu_gpu_mismatch_and_unbound(procs):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    topo = load_topology(shared_fixture(SL390))
    wrong = procs({1}, {"CUDA_VISIBLE_DEVICES": "0"})  # runs on node 1, GPU0 on node 0
    spans = procs({0, 1}, {"CUDA_VISIBLE_DEVICES": "0"})
    right = procs({0}, {"CUDA_VISIBLE_DEVICES": "0"})
    findings, skipped, ran = _findings(topo, [wrong, spans, right])
    by_rule = {}
    for f in findings:
        by_rule.setdefault(f.rule, set()).add(f.subject)
    assert "NUMA002" in ran and "NUMA004" in ran
    assert any(str(wrong) in s for s in by_rule["NUMA002"])
    assert any(str(spans) in s for s in by_rule["NUMA004"])
    assert not any(str(right) in (f.subject or "") for f in findings if f.rule.startswith("NUMA"))
    crit = [f for f in findings if f.rule == "NUMA002" and str(wrong) in f.subject]
    assert crit[0].severity.name == "CRITICAL"
    # this machine's memory is all on its node 0, which is the dump's node 0: the process pinned to
    # CPU 1 (dump node 1) holds its memory remotely
    assert any(str(wrong) in (f.subject or "") for f in findings if f.rule in ("NUMA001", "NUMA003"))


def test_single_node_machine_skips_with_reason():
    from clusterdoctor.topology.build import from_sysfs

    topo = from_sysfs("/")
    findings, skipped, ran = _findings(topo, [os.getpid()])
    if len([n for n in topo.nodes if n.cpus]) == 1:
        assert "NUMA001" in skipped and not [f for f in findings if f.layer == "numa"]


def test_numa_finding_names_the_pod(procs, tmp_path):
    """Under Kubernetes the finding's subject is namespace/pod/container (the pid stays in brackets)."""
    import json

    from clusterdoctor.observe.control.kube_pods import parse_pod_index
    from clusterdoctor.observe.node.kube_context import KubeContext

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    topo = load_topology(shared_fixture(SL390))
    raw = shared_fixture("ctrl/app/pods/pods_kubelet_podlist_k8s1.35_minikube.json").read_bytes()
    pod = next(i for i in json.loads(raw)["items"] if i["metadata"]["name"] == "e2e-statefulset-1")
    uid, cid = pod["metadata"]["uid"], pod["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    wrong = procs({1}, {"CUDA_VISIBLE_DEVICES": "0"})
    # the process's cgroup as the kubelet (systemd driver, cgroup v2, containerd) would name it
    proc = tmp_path / "proc" / str(wrong)
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid.replace('-', '_')}.slice/"
        f"cri-containerd-{cid}.scope\n"
    )
    records = [p.as_dict() for p in placement.audit([procfs.collect_process(wrong)], topo)]
    KubeContext(pods=parse_pod_index(raw)).annotate(records, str(tmp_path / "proc"))
    obs = diagnosis.new_observations()
    diagnosis.add_topology(obs, topo)
    diagnosis.add_processes(obs, records)
    findings, _, _ = run_rules(obs)
    numa2 = [f for f in findings if f.rule == "NUMA002"]
    assert numa2 and numa2[0].subject.startswith("scraper/e2e-statefulset-1/compute-pi-digits (pid ")
    assert any(
        v.startswith("kubectl exec -n scraper e2e-statefulset-1 -c compute-pi-digits")
        for v in numa2[0].verify
    )
