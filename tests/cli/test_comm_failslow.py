"""`clusterdoctor comm analyze DIR` on per-rank Kineto traces (ProfilerStep#N) of a real 4-rank DDP
job with rank 1 frozen by a SIGSTOP/SIGCONT duty cycle (30 ms / 30 ms) from step ~28 (tests/data/failslow/traces-stopcont-rank1): the same
fail-slow finding as `watch`, read sequentially, in local processes and on a real local Ray."""

from __future__ import annotations

import json

import pytest

from clusterdoctor.observe.watch.traces import load_step_records
from tests.conftest import TEST_DATA, start_local_ray

TRACES = TEST_DATA / "failslow" / "traces-stopcont-rank1"


def _first(doc):
    fs = [f for f in doc["findings"] if f["rule"].startswith("FS")]
    assert fs, doc["failslow"]
    return fs[0]


def test_comm_analyze_names_the_straggler(cli):
    r = cli("comm", "analyze", str(TRACES), "--format", "json", timeout=120)
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    f = _first(doc)
    assert f["rule"] == "FS001" and f["subject"].startswith("rank 1")
    assert doc["failslow"]["ranks"] == 4 and doc["failslow"]["episodes"][0]["onset_step"] >= 15


def test_parallel_processes_read_the_same_records():
    seq = load_step_records([TRACES], workers=1)
    par = load_step_records([TRACES], workers=2)
    assert sorted(seq[0], key=lambda r: (r.rank, r.step)) == sorted(par[0], key=lambda r: (r.rank, r.step))
    assert sorted(seq[1]) == [0, 1, 2, 3]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ray_reads_the_same_records():
    ray = pytest.importorskip("ray", reason="Ray not installed (extra `sim`)")
    start_local_ray(ray)
    try:
        got = load_step_records([TRACES], use_ray=True)
    finally:
        ray.shutdown()
    seq = load_step_records([TRACES], workers=1)
    assert sorted(got[0], key=lambda r: (r.rank, r.step)) == sorted(seq[0], key=lambda r: (r.rank, r.step))


def test_comm_analyze_with_workers_and_bad_dir(cli, tmp_path):
    r = cli("comm", "analyze", str(TRACES), "--workers", "2", timeout=120)
    assert r.code == 1 and "FS001" in r.out and "rank 1" in r.out
    (tmp_path / "x.txt").write_text("hello")
    bad = cli("comm", "analyze", str(tmp_path))
    assert bad.code == 2 and "Traceback" not in bad.err
