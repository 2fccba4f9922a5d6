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
    from tests.conftest import require_quiet_machine

    require_quiet_machine()  # before the lab's own ranks start (they keep the CPUs busy)
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


def _alarms(out):
    return [e for e in out.episodes if e.level != "info"]  # info: contention that passed


def test_clean_run(lab):
    out = _verdict(lab.episode(60))
    assert _alarms(out) == [] and out.silent == []


@pytest.mark.parametrize(
    ("make", "kind", "rank"),
    [
        # 5% of a CPU: a rank needs ~25% of one here, so it is throttled on any machine; at 15% a quiet
        # machine's 14 ms steps lose ~15% in spikes every ~3 steps, which the detector misses in some runs
        # (a sensitivity gap recorded under issue 20)
        (lambda fl: fl.CpuQuota(2, 0.05), "compute", 2),
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
    assert _alarms(out), "fault not detected"
    first = _alarms(out)[0]
    assert (first.kind, first.rank) == (kind, rank), first.why
    assert first.onset_step >= 20


@pytest.mark.parametrize("wrap", ["fsdp1", "fsdp2"])
def test_fsdp_straggler_named(lab, wrap):
    """The same job sharded with FSDP1 (device_id=cpu) or FSDP2 (fully_shard per layer) instead of DDP;
    from outside, rank 1's training thread alone (cgroup v1 ``tasks``) held to 1 ms of CPU per 25 ms:
    its compute is slower while gloo's threads are not, as a GPU at a lower clock behind a healthy
    network. The probe (installed on the FSDP model) sees the others waiting inside FSDP's all-gathers
    and reduce-scatters for rank 1, and the detector names it a compute straggler. (A quota on the
    whole process slows gloo's transfer threads too: on CPU that is a slow collective as much as a
    slow rank, and FSDP2, whose steps are mostly collectives here, reads as a communication slowdown.)"""
    from clusterdoctor.training import faultlab

    res = lab.episode(
        70,
        faultlab.CpuQuota(1, 0.04, period_us=25_000, main_thread=True),
        onset_step=25,
        extra={"wrap": wrap},
    )
    assert res.injected_at is not None, res.error
    wf = load_watch_dir(res.dir)
    after = res.injected_after_step + 3

    def med(rank, field, lo, hi):
        v = sorted(getattr(x, field) for x in wf.steps if x.rank == rank and lo <= x.step < hi)
        return v[len(v) // 2]

    assert all(med(r, "coll", 5, 20) > 0 for r in range(4))  # FSDP's collectives are timed
    late = med(1, "own", after, 71) - max(med(r, "own", after, 71) for r in (0, 2, 3))
    waited = min(med(r, "wait", after, 71) for r in (0, 2, 3)) - med(1, "wait", after, 71)
    assert late > 0.01 and waited > 0.01, (late, waited)
    out = _verdict(res)
    assert _alarms(out), "fault not detected"
    first = _alarms(out)[0]
    # the throttled training thread also runs the batch fetch (the DataLoader's queue is read on it),
    # so its lost time shows in its compute and in its data wait, in shares that vary run to run: the
    # class must name the rank's own side (compute, or data), never the network; which of the two is
    # an open fail-slow question (issue 20), not asserted here
    assert first.rank == 1 and first.kind in ("compute", "data"), (first.kind, first.rank, first.why)
