"""Real faults on a real job (CI-sized): 4 gloo ranks of DDP training on this machine's CPUs, each
in its own network namespace; faults injected from outside; the probe's files judged by the detector.
The full set (40+ faulty and 40+ clean runs) is bench/failslow.py."""

from __future__ import annotations

import os
import subprocess

import pytest

from clusterdoctor.analyze.failslow import detect, table_from_records
from clusterdoctor.observe.watch.records import load_watch_dir

pytestmark = [pytest.mark.slow, pytest.mark.torch, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from clusterdoctor.training.faultlab import Lab, lab_available

    why = lab_available(netns=True)
    if why:
        pytest.skip(why)
    lab = Lab(tmp_path_factory.mktemp("lab"), world=4, netns=True)
    lab.start()
    yield lab
    lab.close()
    # nothing left behind: namespaces, cgroups, processes
    assert lab.tag not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in os.listdir("/sys/fs/cgroup/cpu") if n.startswith(lab.tag)]
    assert not lab.alive()


def _verdict(res):
    assert res.error is None, res.error
    wf = load_watch_dir(res.dir)
    return detect(table_from_records(wf.steps, wf.identities, wf.links, wf.warnings))


def test_clean_run(lab):
    out = _verdict(lab.episode(60))
    assert out.episodes == [] and out.silent == []


@pytest.mark.parametrize(
    ("make", "kind", "rank"),
    [
        (lambda fl: fl.CpuQuota(2, 0.15), "compute", 2),
        (lambda fl: fl.StopCont(1, 0.03, 0.03), "compute", 1),
        (lambda fl: fl.SlowLoader(3, 0.02), "data", 3),
        (lambda fl: fl.SlowLink(0, "400mbit"), "communication", 0),
    ],
    ids=["cgroup-quota", "sigstop-duty-cycle", "slow-data-loader", "tbf-slow-link"],
)
def test_fault_named(lab, make, kind, rank):
    from clusterdoctor.training import faultlab

    fault = make(faultlab)
    res = lab.episode(70, fault, onset_step=25)
    assert res.injected_at is not None
    out = _verdict(res)
    assert out.episodes, "fault not detected"
    first = out.episodes[0]
    assert (first.kind, first.rank) == (kind, rank)
    assert first.onset_step >= 20
