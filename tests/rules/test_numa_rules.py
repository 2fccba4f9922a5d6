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
