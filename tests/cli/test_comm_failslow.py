"""`clusterdoctor comm analyze DIR` on per-rank Kineto traces (ProfilerStep#N) of a real 4-rank DDP
job with rank 1 frozen by a SIGSTOP/SIGCONT duty cycle (30 ms / 30 ms) from step ~28 (tests/data/failslow/traces-stopcont-rank1): the same
fail-slow finding as `watch`, read sequentially, in local processes and on a real local Ray. Then the
real gloo Flight Recorder dumps of a run with a CPU-throttled rank, and traces of a run with a starved
data loader (tests/data/failslow/README.md says how each was made)."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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
    # the straggler is the first finding; the ranks that waited for it (COMM006, one each) and "arrives
    # last" (COMM007) are evidence of it, not causes listed before it
    assert doc["findings"][0]["rule"] == "FS001"
    assert not [x for x in doc["findings"] if x["rule"] in ("COMM006", "COMM007")]
    assert any(e["description"].startswith("explains COMM006") for e in doc["findings"][0]["evidence"])


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


# -- Flight Recorder dumps (real gloo dumps, tests/data/failslow/fr-quota-rank2) -----------------------

FR = TEST_DATA / "failslow" / "fr-quota-rank2"
FR_PROBE = TEST_DATA / "failslow" / "fr-quota-rank2-probe"


def test_flight_recorder_dumps_name_the_straggler(cli):
    """Rank 2 was held to 10 % of a CPU (cgroup, from outside) from the probe's step 28: the dumps alone
    (no durations: gloo) name it, as the probe's own files of the same run do."""
    r = cli("comm", "analyze", str(FR), "--format", "json", timeout=120)
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    f = _first(doc)
    assert f["rule"] == "FS001" and f["subject"] == "rank 2", f
    sec = doc["failslow"]
    assert sec["ranks"] == 4 and sec["steps"] >= 60  # two bucket all-reduces a step, grouped into steps
    (ep,) = [e for e in sec["episodes"] if e["rank"] == 2]
    assert 24 <= ep["onset_step"] <= 34  # the fault began at the probe's step 28
    assert any("without collective durations" in w for w in sec["warnings"])
    truth = cli("watch", "--from", str(FR_PROBE), "--once", "--format", "json", timeout=120)
    t = json.loads(truth.out)["findings"][0]
    assert (t["rule"], t["subject"].split(",")[0]) == ("FS001", "rank 2")


def test_flight_recorder_steps_follow_the_pattern_of_collectives():
    steps, ids, warns = load_step_records([FR], workers=1)
    assert sorted(ids) == [0, 1, 2, 3]
    by_rank = {r: sorted(s.step for s in steps if s.rank == r) for r in ids}
    # the same steps on every rank, consecutive: the start-up collectives are left out, one step a period
    assert len({tuple(v) for v in by_rank.values()}) == 1
    got = by_rank[0]
    assert got == list(range(got[0], got[-1] + 1)) and 60 <= len(got) <= 69
    for s in steps:
        assert s.wall > 0 and abs(s.own + s.wait - s.wall) < 1e-9 and s.wait == s.coll
    par = load_step_records([FR], workers=2)
    assert sorted(par[0], key=lambda r: (r.rank, r.step)) == sorted(steps, key=lambda r: (r.rank, r.step))


def test_flight_recorder_ring_buffer_that_wrapped(tmp_path):
    """One rank's buffer lost its oldest 60 entries (a ring buffer that wrapped: derived from the real
    dump by dropping entries): its steps start later, the straggler is still named."""
    import pickle
    import shutil

    for f in FR.iterdir():
        shutil.copy(f, tmp_path / f.name)
    p = tmp_path / "fr_trace_rank_1"
    obj = pickle.loads(p.read_bytes())  # our own capture (trusted): the reader itself never unpickles
    obj["entries"] = obj["entries"][60:]
    p.write_bytes(pickle.dumps(obj))
    steps, ids, _w = load_step_records([tmp_path], workers=1)
    first = {r: min(s.step for s in steps if s.rank == r) for r in ids}
    assert first[1] > first[0]
    from clusterdoctor.cli.comm_failslow import failslow_report

    findings, _sec = failslow_report(None, [tmp_path], workers=1)
    assert findings and findings[0].rule == "FS001" and findings[0].subject == "rank 2"


def test_flight_recorder_two_rank_mismatch_dump_is_not_a_crash(cli):
    """The 7-collective 2-rank dumps of tests/data/comm (rank 0 issued one more): too few steps, a warning."""
    r = cli("comm", "analyze", str(TEST_DATA / "comm" / "fr_gloo_2rank"), "--format", "json", timeout=120)
    assert r.code in (0, 1) and "Traceback" not in r.err
    assert not [f for f in json.loads(r.out)["findings"] if f["rule"].startswith("FS")]


@settings(max_examples=60, deadline=None)
@given(
    pattern=st.lists(st.sampled_from("abcd"), min_size=1, max_size=7),
    warmup=st.lists(st.sampled_from("xyz"), max_size=5),
    reps=st.integers(4, 12),
)
def test_period_of_a_repeated_pattern(pattern, warmup, reps):
    from clusterdoctor.observe.watch.traces import _period

    assume(len(pattern) * reps >= len(warmup))  # a buffer mostly of steps, as real ones are
    # the pattern's own smallest period (a pattern "abab" repeats every 2)
    p = next(
        q
        for q in range(1, len(pattern) + 1)
        if all(pattern[i] == pattern[i % q] for i in range(len(pattern))) and len(pattern) % q == 0
    )
    got = _period(warmup + pattern * reps)
    assert got is not None and got[0] == p
    assert got[1] <= len(warmup)


# -- data-loader wait from the DataLoader's annotations (tests/data/failslow/traces-slowloader-rank1) ---

LOADER = TEST_DATA / "failslow" / "traces-slowloader-rank1"


def test_data_loader_wait_from_trace_annotations(cli):
    """Rank 1's loader worker process was held to 2 % of a CPU from step 28: the traces' DataLoader
    annotations make it a data-loader straggler (FS003), as the probe's files of the run say."""
    r = cli("comm", "analyze", str(LOADER), "--format", "json", timeout=120)
    assert r.code == 1, r.err
    f = _first(json.loads(r.out))
    assert (f["rule"], f["subject"]) == ("FS003", "rank 1"), f
    steps, _ids, _w = load_step_records([LOADER], workers=1)
    before = sorted(s.data for s in steps if s.rank == 1 and 5 <= s.step < 25)
    after = sorted(s.data for s in steps if s.rank == 1 and s.step > 35)
    others = sorted(s.data for s in steps if s.rank != 1 and s.step > 35)
    assert after[len(after) // 2] > 5 * max(before[len(before) // 2], 1e-3)
    assert after[len(after) // 2] > 5 * max(others[len(others) // 2], 1e-3)
    truth = cli("watch", "--from", str(LOADER) + "-probe", "--once", "--format", "json", timeout=120)
    t = json.loads(truth.out)["findings"][0]
    assert (t["rule"], t["subject"].split(",")[0]) == ("FS003", "rank 1")


@settings(max_examples=80, deadline=None)
@given(
    ranks=st.integers(1, 4),
    pattern=st.lists(
        st.sampled_from(["all_reduce[[8]]", "all_reduce[[4]]", "broadcast[[2]]"]), min_size=1, max_size=3
    ),
    steps=st.integers(0, 12),
    drop=st.integers(0, 5),
    timed=st.booleans(),
    jitter=st.lists(st.floats(0, 0.05), min_size=1, max_size=50),
)
def test_flight_recorder_steps_never_break(ranks, pattern, steps, drop, timed, jitter):
    """Any collective logs (ring buffers cut at the start, with or without durations, no pattern at
    all): records or nothing, never an exception; every record's parts add up to its wall time."""
    from clusterdoctor.observe.watch.traces import FrRankLog, steps_from_flight_recorder

    sigs = ["barrier[]"] + pattern * steps
    logs = []
    for r in range(ranks):
        t, created, durs = 1.7e9, [], []
        for i in range(len(sigs)):
            t += 0.01 + jitter[(i + r) % len(jitter)]
            created.append(t)
            durs.append(0.002 if timed else None)
        cut = drop if r == ranks - 1 else 0
        logs.append(
            FrRankLog(f"fr{r}", r, 0, tuple(range(1 + cut, len(sigs) + 1)), tuple(sigs[cut:]),
                      tuple(created[cut:]), tuple(durs[cut:]))
        )  # fmt: skip
    recs, ids, warns = steps_from_flight_recorder(logs)
    assert set(ids) <= set(range(ranks))
    for s in recs:
        assert s.wall > 0 and s.own >= 0 and s.wait >= 0 and abs(s.own + s.wait - s.wall) < 1e-6
