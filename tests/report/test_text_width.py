"""Readable in an 80-column terminal: the text outputs on real inputs, at COLUMNS=80.

No line may be wider than the terminal unless it cannot be broken: what sticks out is one token (a
path, a URL, a shell word) longer than a line, after at most a short label ("-", "fix:", "verify:").
"""

from __future__ import annotations

import os
import re
import shlex
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor import diagnosis
from clusterdoctor.report.text import common_folder, render_text, shell_words, wrap, wrap_command
from clusterdoctor.testing import fixtures_root
from clusterdoctor.topology.build import load_topology
from clusterdoctor.topology.text import matrix_lines, render_topology_text
from tests.conftest import TEST_DATA, run_cli, shared_fixture

WIDTH = 80


def too_wide(text: str, width: int = WIDTH) -> list[str]:
    """The lines wider than ``width`` that could have been broken."""
    bad = []
    for line in text.splitlines():
        if len(line) <= width:
            continue
        words = line.split()
        longest = max(words, key=len)
        rest = line.replace(longest, "", 1).replace("\\", "").split()
        if len(rest) <= 1 and all(len(w) <= 8 for w in rest):
            continue  # a label and one unbreakable token
        bad.append(line)
    return bad


def _shared(pattern: str) -> list[str]:
    root = fixtures_root()
    if root is None:
        return []
    folder, _, glob = pattern.rpartition("/")
    return sorted(str(p.relative_to(root)) for p in (root / folder).glob(glob) if p.is_file())


# Real inputs: every topology and control-plane capture in the shared fixtures, and the captures made
# here with the real tools (tests/data) so that a clone without ../shared still runs something.
SHARED_INPUTS = (
    _shared("numa/*.txt")
    + _shared("numa/*.xml")
    + _shared("numa/hwloc/*.xml")
    + _shared("ctrl/*.prom")
    + _shared("ctrl/*.log")
    + _shared("ctrl/*.txt")
)
LOCAL_INPUTS = [
    [TEST_DATA / "etcd_stall/zap" / f"etcd-m{i}.log" for i in range(3)],
    [TEST_DATA / "etcd_stall/capnslog" / f"etcd-m{i}.log" for i in range(3)],
    [TEST_DATA / "ctrl/etcd_3.4.23_3member_after_leader_stop_metrics.prom"],
    [TEST_DATA / "ctrl/etcdctl_3.4.23_endpoint_status_leader_stopped.json"],
    [TEST_DATA / "topology/hwloc-2.9.0_2cpu-kvm-vm_amd-epyc.xml"],
]


def _diagnose_text(paths, width=WIDTH) -> str:
    obs = diagnosis.new_observations(clock=lambda: 1.8e9)
    refs = diagnosis.load_sources(obs, list(paths))
    return render_text(diagnosis.run(obs, refs), width=width)


@pytest.mark.parametrize("rel", SHARED_INPUTS or ["(shared fixtures absent)"])
def test_diagnose_report_fits_80_columns_shared(rel):
    text = _diagnose_text([shared_fixture(rel)])
    assert text.strip()
    assert not too_wide(text), "\n".join(too_wide(text))


@pytest.mark.parametrize("paths", LOCAL_INPUTS, ids=lambda ps: ps[0].parent.name + "/" + ps[0].name)
def test_diagnose_report_fits_80_columns_local(paths):
    text = _diagnose_text(paths)
    assert not too_wide(text), "\n".join(too_wide(text))


def test_evidence_paths_are_relative_to_the_inputs_folder():
    zap = TEST_DATA / "etcd_stall/zap"
    text = _diagnose_text([zap / f"etcd-m{i}.log" for i in range(3)])
    header = [ln for ln in text.splitlines() if ln.startswith("sources in ")]
    assert header and str(zap) in header[0]
    assert sum(str(zap) in ln for ln in text.splitlines()) == 1  # named once, in the header
    assert re.search(r"\[etcd-m2\.log:\d+\]", text)  # evidence: file:line, relative


def test_a_finding_about_a_file_names_it_relative_to_the_inputs_folder():
    path = shared_fixture("ctrl/kubelet_pod_start_sli_aks_before.prom")
    text = _diagnose_text([path])
    heads = [ln for ln in text.splitlines() if "KUBELET003" in ln]
    assert heads and "[kubelet_pod_start_sli_aks_before.prom]" in text.replace("\n   ", " ")
    assert sum(str(path.parent) in ln for ln in text.splitlines()) == 1  # only the header


def test_common_folder():
    assert common_folder(["/a/b/x.log", "/a/b/y.log"]) == "/a/b"
    assert common_folder(["/a/b/x.log", "/a/c/y.log"]) == "/a"
    assert common_folder(["/a/b/x.log"]) == "/a/b"
    assert common_folder(["/", "/proc"]) is None  # live: nothing to shorten
    assert common_folder(["http://prometheus:9090"]) is None


def test_columns_is_honoured_and_80_is_the_default_off_a_terminal():
    paths = [str(TEST_DATA / "etcd_stall/zap" / f"etcd-m{i}.log") for i in range(3)]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    narrow = run_cli("diagnose", *paths, env={"COLUMNS": "80"}).out
    wide = run_cli("diagnose", *paths, env={"COLUMNS": "160"}).out
    assert max(map(len, narrow.splitlines())) <= 80 < max(map(len, wide.splitlines())) <= 160
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "clusterdoctor.cli.main", "diagnose", *paths],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    # stdout is a pipe here: 80 columns (the header lines hold the time of the run)
    start = next(i for i, ln in enumerate(narrow.splitlines()) if ln.startswith("sources"))
    assert p.stdout.splitlines()[start:] == narrow.splitlines()[start:]


def test_rules_catalog_and_every_rule_fit_80_columns():
    r = run_cli("rules", env={"COLUMNS": "80"})
    assert r.code == 0 and not too_wide(r.out), too_wide(r.out)
    ids = re.findall(r"^  ([A-Z]+\d{3})\s", r.out, re.M)
    assert len(ids) > 40
    # the title column is aligned: every rule line starts its title at the same column
    starts = {m.start(2) for ln in r.out.splitlines() if (m := re.match(r"^  ([A-Z]+\d{3})\s+(\S)", ln))}
    assert len(starts) == 1
    from clusterdoctor.cli.rules import explain_text
    from clusterdoctor.rules.registry import get_rule

    for rid in ids:
        text = explain_text(get_rule(rid), WIDTH)
        assert not too_wide(text), (rid, too_wide(text))


TOPOLOGIES = _shared("numa/*.txt") + _shared("numa/*.xml") + _shared("numa/hwloc/*")


@pytest.mark.parametrize("rel", TOPOLOGIES or ["(shared fixtures absent)"])
def test_numa_topology_fits_80_columns(rel):
    text = render_topology_text(load_topology(shared_fixture(rel)), WIDTH)
    assert not too_wide(text), "\n".join(too_wide(text))


def test_numa_topology_matrix_is_the_files_gpu_nic_matrix():
    """DGX A100 `nvidia-smi topo -m`: the GPU×NIC block of our matrix equals the file's cells."""
    path = shared_fixture("numa/nvidia-smi-topo-m_dgx-a100_epyc-nps4_8gpu-12nic.txt")
    rows = [ln.split("\t") for ln in path.read_text().splitlines() if ln.startswith(("\t", "GPU"))]
    header = [h.strip() for h in rows[0]]
    nic_cols = [i for i, h in enumerate(header) if h.startswith("mlx5_")]
    expected = {r[0].strip(): [r[i].strip() for i in nic_cols] for r in rows[1:] if r[0].startswith("GPU")}
    r = run_cli("numa", "topology", "--from", str(path), env={"COLUMNS": "80"})
    assert r.code == 0 and not too_wide(r.out)
    block = r.out.split("GPU to NIC paths")[1].split("\n\n")[0].splitlines()[1:]
    assert block[0].split() == [f"NIC{i}" for i in range(12)]
    got = {ln.split()[0]: ln.split()[1:] for ln in block[1:]}
    assert got == expected
    legend = r.out.split("NIC legend:")[1]
    assert "NIC10: mlx5_10" in legend and "PXB = " in r.out and "SYS = " in r.out
    assert "path GPU0 <-> " not in r.out  # no more one line per pair


def test_derived_paths_are_marked():
    topo = load_topology(
        shared_fixture("numa/nccl-topo-dump_ibm-cloud-gx3d-160x1792x8h100_2numa_8gpu-8nic.xml")
    )
    text = render_topology_text(topo, WIDTH)
    assert "PIX*" in text and "derived from the PCI tree" in text


@given(
    st.lists(st.text(string.ascii_letters + string.digits, min_size=1, max_size=8), min_size=1, max_size=6),
    st.lists(st.text(string.ascii_letters + string.digits, min_size=1, max_size=8), min_size=1, max_size=40),
    st.integers(min_value=20, max_value=200),
)
def test_matrix_blocks_fit_the_width(rows, cols, width):
    rows, cols = list(dict.fromkeys(rows)), list(dict.fromkeys(cols))
    cell = {(r, c): "PXB" for r in rows for c in cols}
    lines = matrix_lines(rows, cols, cell, width)
    assert all(len(ln) <= width for ln in lines)
    shown = [w for ln in lines if ln and not ln.startswith(tuple(rows)) for w in ln.split()]
    assert shown == cols  # every column once, in order


@given(st.lists(st.sampled_from(["ls", "-la", "'a b'", '"x y"', "grep", "-E", "'wal_fsync|heartbeat'", "a\\ b", "|"]), min_size=1, max_size=30), st.integers(min_value=30, max_value=120))  # fmt: skip
def test_wrapped_command_is_the_same_command(words, width):
    cmd = " ".join(words)
    lines = wrap_command(cmd, width, "   verify: ", "       ")
    rejoined = " ".join(ln.removeprefix("   verify: ").strip().removesuffix("\\").strip() for ln in lines)
    assert shlex.split(rejoined) == shlex.split(cmd)
    assert shell_words(cmd) == words
    for ln in lines:
        assert len(ln) <= width or len(ln.split()) <= 3  # only a long word sticks out


@given(st.text(string.ascii_letters + " -/.", max_size=300), st.integers(min_value=20, max_value=120))
def test_wrap_never_exceeds_unless_one_long_word(text, width):
    for ln in wrap(text, width, first="   - "):
        assert len(ln) <= width or len(ln.split()) <= 2


def test_watch_text_keeps_hyphenated_words_and_paths_whole() -> None:
    from clusterdoctor.report.watch_text import render_watch_text

    path = "/var/log/train/probe-rank-00003-of-00016.jsonl"
    report = {
        "source": path,
        "jobs": [],
        "findings": [
            {
                "severity": "warning",
                "rule": "FS001",
                "title": "fail-slow straggler",
                "confidence": 0.9,
                "summary": "rank 3 is the data-loader-bound straggler of the fail-slow job " * 3,
                "evidence": [{"description": f"probe file {path}"}],
            }
        ],
    }
    for width in (40, 57, 80):
        text = render_watch_text(report, width=width)
        words = text.split()
        assert path in words and "data-loader-bound" in words and "fail-slow" in words
        assert not any(ln.rstrip().endswith("-") for ln in text.splitlines())
