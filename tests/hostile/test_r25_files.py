"""Issue 25's file reproducers ("more of the same classes" and deliver 7), each run by the real CLI
under the 2 GiB address-space cap and a time limit: a 64 KiB zstd file that inflated to 2 GiB while
being sniffed; a sysfs tree whose links lead to /proc/self/environ; ids beyond 64 bits in a trace;
deeply nested JSON lines for ``watch --from``; colliding integer keys in a Flight Recorder pickle; an
unreadable sub-folder; gzip traces of 400 MB of one event repeated."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import TEST_DATA
from tests.hostile.harness import run_capped, run_measured
from tests.hostile.r25_inputs import (
    kineto_identical_gzip,
    pickle_colliding_keys,
    trace_with_huge_ids,
    zstd_rle_bomb,
)

pytestmark = pytest.mark.hostile


def _no_internal_error(r) -> None:
    assert "Traceback" not in r.err and "internal error" not in r.err and r.code != 70, r.err[-2000:]


@pytest.mark.parametrize(
    "args",
    [
        ("diagnose", "{p}"),
        ("comm", "analyze", "{p}"),
        ("numa", "topology", "--from", "{p}"),
        ("watch", "--from", "{p}"),
    ],
)
def test_r25_zstd_bomb_sniffed_within_memory(tmp_path, args):
    """64 KiB of zstd RLE blocks (2 GiB inflated; the issue: 2 GiB RSS while sniffing)."""
    p = zstd_rle_bomb(tmp_path / "blob.zst")
    assert p.stat().st_size <= 64 << 10
    r = run_measured(*(a.format(p=p) for a in args), timeout=120)
    _no_internal_error(r)
    assert r.code == 2 and str(p) in r.err
    assert r.peak_rss_mb < 400, r.peak_rss_mb
    assert r.seconds < 60


def _sysfs_with_links_out(root: Path) -> Path:
    node = root / "node"
    for d in ("sys/devices/system/cpu", "sys/devices/system/node/node0", "proc/sys/kernel"):
        (node / d).mkdir(parents=True, exist_ok=True)
    (node / "sys/devices/system/cpu/online").write_text("0-1\n")
    (node / "sys/devices/system/node/node0/cpulist").write_text("0-1\n")
    os.symlink("/proc/self/environ", node / "proc/sys/kernel/hostname")
    os.symlink("/proc/self/environ", node / "proc/cpuinfo")
    os.symlink("../../../../../" * 8 + "proc/self/environ", node / "sys/devices/system/node/node0/meminfo")
    return node


MARKER = "R25-ENVIRON-MARKER-not-for-reports"


@pytest.mark.parametrize("how", ["incident", "sys", "sysfs-root", "tarball"])
def test_r25_sysfs_links_to_proc_self_environ_are_not_read(tmp_path, how):
    node = _sysfs_with_links_out(tmp_path / "inc")
    if how == "incident":
        args = ("diagnose", str(tmp_path / "inc"), "--format", "json")
    elif how == "sys":
        args = ("diagnose", str(node / "sys"), "--format", "json")
    elif how == "sysfs-root":
        args = ("numa", "topology", "--sysfs-root", str(node), "--json")
    else:
        tar = tmp_path / "snap.tar"
        subprocess.run(["tar", "-C", str(node), "-cf", str(tar), "sys", "proc"], check=True)
        args = ("diagnose", str(tar), "--format", "json")
    r = run_capped(*args, env={"R25_MARKER": MARKER}, timeout=120)
    _no_internal_error(r)
    assert r.code in (0, 1), r.err[-2000:]
    assert MARKER not in r.out + r.err
    assert "a link out of the tree" in r.out + r.err or "member left out" in r.out + r.err


def test_r25_trace_ids_beyond_64_bits(tmp_path):
    """2**63 correlation ids, a 2**64 stream, a 5,000-digit step number: read (the issue: exit 70)."""
    p = trace_with_huge_ids(tmp_path / "rank0.pt.trace.json")
    for args in (("comm", "analyze", str(p), "--format", "json"), ("diagnose", str(p), "--format", "json")):
        r = run_capped(*args, timeout=60)
        _no_internal_error(r)
        assert r.code in (0, 1), r.err[-2000:]
        json.loads(r.out)
    from clusterdoctor.observe.comm.kineto import load_kineto

    t = load_kineto(p)
    assert t.n_gpu_events == 3 and all(-(1 << 63) <= c < (1 << 63) for c in t.corr) and not t.steps
    fast = load_kineto(p)
    with open(p, "rb") as f:
        from clusterdoctor.observe.comm.kineto import parse_kineto

        slow = parse_kineto(f, str(p), bulk=False)
    assert list(fast.corr) == list(slow.corr) and fast.skipped == slow.skipped


def test_r25_watch_from_deeply_nested_json_lines(tmp_path):
    """A probe file with lines nested 100,000 and 5,000 deep among real step lines: the real lines
    are judged, the others named in a warning (the issue: exit 70 RecursionError)."""
    d = tmp_path / "job"
    shutil.copytree(TEST_DATA / "failslow" / "clean", d)
    f = sorted(d.glob("watch-rank*.jsonl"))[0]
    with open(f, "a") as out:
        out.write("[" * 100_000 + "]" * 100_000 + "\n")
        out.write('{"kind": "step", "x": ' + '{"a": ' * 5_000 + "1" + "}" * 5_000 + "}\n")
    r = run_capped("watch", "--from", str(d), "--format", "json", timeout=120)
    _no_internal_error(r)
    assert r.code == 0, r.err[-2000:]
    assert any("nested too deep" in w for w in json.loads(r.out)["warnings"])


def test_r25_flight_recorder_colliding_integer_keys(tmp_path):
    """40,000 distinct integer keys sharing one hash in one dict (560 KB: 32 s in the issue)."""
    p = pickle_colliding_keys(tmp_path / "fr_trace_rank_0.pkl")
    assert p.stat().st_size < 600_000
    for args in (("comm", "analyze", str(p)), ("diagnose", str(p))):
        r = run_capped(*args, timeout=60)
        line = r.one_line()
        assert r.code == 2 and str(p) in line and "share a hash value" in line
        assert r.seconds < 20


def test_r25_many_distinct_keys_still_load():
    """No false alarm: a dict of 100,000 ordinary integer keys (and one of strings) loads."""
    import pickle

    from clusterdoctor.observe.safe_pickle import loads

    doc = {"entries": [], "ids": {i: i for i in range(100_000)}, "names": {f"n{i}": i for i in range(50_000)}}
    assert loads(pickle.dumps(doc, protocol=2)) == doc


def test_r25_unreadable_sub_folder_is_named(tmp_path):
    """A sub-folder the reader may not list: named in a warning (the issue: dropped silently). As
    root, the run drops to nobody (permissions do not stop root)."""
    base = Path(tempfile.mkdtemp(prefix="r25-unreadable-"))
    try:
        base.chmod(0o755)
        inc = base / "inc"
        (inc / "sub").mkdir(parents=True)
        shutil.copy(TEST_DATA / "etcd_stall" / "capnslog" / "etcd-m1.log", inc / "etcd-m1.log")
        shutil.copy(TEST_DATA / "etcd_stall" / "capnslog" / "etcd-m1.log", inc / "sub" / "etcd-m2.log")
        (inc / "sub").chmod(0)
        cmd = [sys.executable, "-m", "clusterdoctor.cli.main", "diagnose", str(inc), "--format", "json"]
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("running as root without setpriv: cannot make a folder unreadable")
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
            probe = subprocess.run(
                [*cmd[:4], sys.executable, "-c", "import clusterdoctor"], capture_output=True
            )
            if probe.returncode != 0:  # e.g. a checkout under a 0700 folder (mktemp -d)
                pytest.skip(
                    "user nobody cannot run this checkout's interpreter (a folder above it is private)"
                )
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/")
        assert "Traceback" not in p.stderr and p.returncode in (0, 1), p.stderr[-2000:]
        warns = json.loads(p.stdout)["warnings"]
        assert any("unreadable folder" in w and "sub" in w for w in warns), warns
    finally:
        (base / "inc" / "sub").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("kind,rss_mb", [("ProfilerStep", 300), ("kernel", 300), ("nccl", 1024)])
def test_r25_gzip_trace_of_identical_events(tmp_path, kind, rss_mb):
    """Deliver 7: 400 MB of one event repeated (the issue: ProfilerStep, 1.5 GB RSS, 147 s). A copy
    keeps nothing: counted in the skip summary (ProfilerStep, kernels); NCCL kernels, whose
    arguments are kept per event, are refused at the records budget in one line."""
    p = kineto_identical_gzip(tmp_path, kind)
    assert p.stat().st_size < 8 << 20
    r = run_measured("comm", "analyze", str(p), timeout=300)
    _no_internal_error(r)
    assert r.peak_rss_mb < rss_mb, r.peak_rss_mb
    assert r.seconds < 90
    if kind == "nccl":
        assert r.code == 2 and "holds more than 10,000,000 records" in r.one_line()
    else:
        assert r.code in (0, 1) and "repeated" in r.out, r.out[-2000:]
