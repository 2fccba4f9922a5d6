"""`clusterdoctor diagnose DIR` and lists of files, as users have them: incident folders with
unrelated files, a sysfs tree or a bundle inside, a bad file among good ones."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from clusterdoctor import diagnosis
from clusterdoctor.cli.progress import Progress
from clusterdoctor.errors import InputError
from clusterdoctor.observe.detect import noise_reason, walk_sources
from tests.conftest import TEST_DATA, run_cli, shared_fixture

ZAP = TEST_DATA / "etcd_dead_member" / "zap"
UNRECOGNISED = "unrecognised input"


def _incident(tmp_path: Path) -> Path:
    """The real dead-member capture, plus what else lands in such a folder."""
    inc = tmp_path / "incident"
    shutil.copytree(ZAP, inc)
    (inc / "notes.md").write_text("# on-call notes\nleader died around 15:36?\n")
    (inc / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (inc / "etcd-m0.log~").write_text("editor backup")
    (inc / "sub").mkdir()
    shutil.copy(shared_fixture("ctrl/kubelet_pod_start_sli_aks_before.prom"), inc / "sub" / "kubelet.prom")
    (inc / "sub" / "core").write_bytes(bytes(range(256)) * 4)
    return inc


def test_folder_reads_every_recognised_file_and_lists_the_others(tmp_path):
    inc = _incident(tmp_path)
    r = run_cli("diagnose", str(inc), "--format", "json")
    assert r.code == 1, r.err  # CRITICAL findings
    d = json.loads(r.out)
    locs = {s["location"] for s in d["sources"]}
    assert str(inc / "sub" / "kubelet.prom") in locs  # recursively
    assert str(inc / "etcd-m0.log") in locs and str(inc / "member_list.json") in locs
    warn = "\n".join(d["warnings"])
    for name in ("notes.md", "what_happened.txt", "prometheus.yml", "sub/core"):
        line = next(w for w in d["warnings"] if w.startswith("not used: ") and w.split(":")[1].endswith(name))
        assert UNRECOGNISED in line, line
    assert "hidden file(s): .DS_Store" in warn and "editor backup file(s): etcd-m0.log~" in warn
    assert not any(".DS_Store" in s or s.endswith("~") for s in locs)
    # the dead member is the first finding
    assert d["findings"][0]["rule"] == "ETCD009" and d["findings"][0]["subject"] == "m2 (60af19f72c903e1e)"


def test_sources_are_labelled_by_what_they_are(tmp_path):
    r = run_cli("diagnose", str(ZAP), "--format", "json")
    kinds = {Path(s["location"]).name: s["kind"] for s in json.loads(r.out)["sources"]}
    assert kinds["etcd-m0.log"] == "etcd log (member m0 (1364b0b423444e07))"
    assert kinds["client.log"] == "etcd client log"
    assert kinds["member_list.json"] == "etcdctl member list (3 members)"
    assert kinds["status_before.json"] == "etcdctl endpoint status"
    assert kinds["health_after.json"] == "etcdctl endpoint health"
    assert kinds["status_after.stderr"] == "etcdctl stderr"
    assert kinds["metrics_before_m0.prom"] == "Prometheus metrics dump (etcd)"
    assert kinds["prometheus_query_range_up.json"] == "Prometheus query answer (up)"
    assert not any("," in k and "RDMA" in k for k in kinds.values())  # never the loader group name
    r = run_cli("diagnose", str(shared_fixture("ctrl/kubelet_pod_startup_latency_tracker_aks_eks.log")))
    assert "kubelet log:" in r.out


def test_one_bad_file_in_a_list_is_a_warning_not_an_abort(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a capture\n")
    trunc = tmp_path / "status.json"
    trunc.write_bytes((ZAP / "status_before.json").read_bytes()[:100])  # cut mid-record
    good = ZAP / "health_after.json"
    r = run_cli("diagnose", str(bad), str(trunc), str(good), "--format", "json")
    assert r.code == 1, r.err  # the unhealthy endpoint is CRITICAL
    d = json.loads(r.out)
    assert [s["location"] for s in d["sources"]] == [str(good)]
    assert any(w.startswith(f"not used: {bad}: {UNRECOGNISED}") for w in d["warnings"])
    assert any(w.startswith(f"not used: {trunc}") and "JSON" in w for w in d["warnings"])
    assert "Traceback" not in r.err


def test_nothing_recognised_is_one_line_and_exit_2(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.bin"
    a.write_text("hello\n")
    b.write_bytes(b"\x00\x01\x02")
    for args in ([str(a), str(b)], [str(tmp_path)]):
        r = run_cli("diagnose", *args)
        assert r.code == 2, (args, r.out)
        assert len(r.err.strip().splitlines()) == 1 and "nothing recognised in 2 files" in r.err
    r = run_cli("diagnose", str(a))  # one file: its own reason
    assert (
        r.code == 2
        and r.err.strip()
        == f"clusterdoctor: error: {a}: {UNRECOGNISED}: " + r.err.split(f"{UNRECOGNISED}: ")[1].strip()
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_cli("diagnose", str(empty))
    assert r.code == 2 and "no file to read" in r.err and len(r.err.strip().splitlines()) == 1


def test_a_sysfs_tree_inside_a_folder_is_one_source(tmp_path):
    """A real sysfs snapshot (hwloc's 32em64t tarball) unpacked into an incident folder."""
    inc = tmp_path / "inc"
    inc.mkdir()
    with tarfile.open(shared_fixture("numa/hwloc/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2")) as t:
        t.extractall(inc / "node7", filter="data")
    shutil.copy(ZAP / "etcd-m1.log", inc / "etcd-m1.log")
    walk = walk_sources(inc)
    sysfs = [p for p in walk.sources if p.name == "sys"]
    assert len(sysfs) == 1 and not any("/sys/" in str(p) for p in walk.sources)
    obs = diagnosis.new_observations(lambda: 1796140000.0)
    refs = diagnosis.load_sources(obs, [inc])
    kinds = {r.kind for r in refs}
    assert "sysfs tree" in kinds and any(k.startswith("etcd log") for k in kinds)
    assert obs.get("topology").nodes  # the tree was read as a topology


def test_a_tarball_and_a_bundle_inside_a_folder(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    shutil.copy(shared_fixture("numa/hwloc/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2"), inc / "node.tar.bz2")
    bundle = inc / "node1.tar.zst"
    args = ["collect", "-o", str(bundle), "--unit", "none", "--rdma-interval", "0.05"]
    for i in range(3):
        args += ["--file", str(TEST_DATA / "etcd_stall" / "zap" / f"etcd-m{i}.log")]
    assert run_cli(*args).code == 0
    obs = diagnosis.new_observations(lambda: 1796140000.0)
    refs = diagnosis.load_sources(obs, [inc])
    assert {r.kind for r in refs} == {"sysfs tarball", "clusterdoctor bundle"}
    d = diagnosis.run(obs, refs)
    assert any(f.rule == "CHAIN001" and f.subject == "etcd-stall: m2 (dcdad8be1efaa5ca)" for f in d.findings)


def test_walk_skips_noise_and_does_not_follow_symlinked_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.log").write_text("x")
    (tmp_path / "a" / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    (tmp_path / "#x.log#").write_text("emacs")
    (tmp_path / ".x.log.swp").write_text("vim")
    walk = walk_sources(tmp_path)
    assert walk.sources == [tmp_path / "a" / "x.log"]
    assert {p.name for p, _ in walk.skipped} == {".git", "#x.log#", ".x.log.swp", "loop"}
    assert "symbolic link to a folder (not followed)" in "\n".join(walk.warnings(tmp_path))
    assert [noise_reason(n) for n in ("a.log", ".a", "a~", "#a#", "a.swp")] == [
        None,
        "hidden",
        "editor backup",
        "editor backup",
        "editor backup",
    ]
    with pytest.raises(InputError, match="x.log: unrecognised input"):  # named on the command line: read
        diagnosis.load_sources(diagnosis.new_observations(lambda: 0.0), [tmp_path / "a" / "loop"])


def test_a_folders_own_documentation_is_not_read_as_its_log(tmp_path):
    """A folder of real ACS listings with the SOURCES.md that quotes the threads' error lines (real:
    tests/data/pcie_acs): the quotes made 'illegal memory access' (TORCH102) the top finding. Its
    documentation is skipped by name and said in a warning; named on the command line it is read."""
    shutil.copytree(TEST_DATA / "pcie_acs", tmp_path / "acs")
    (tmp_path / "acs" / "README").write_text("notes on these captures\n")
    walk = walk_sources(tmp_path / "acs")
    assert {p.name for p, why in walk.skipped if why == "documentation"} == {"SOURCES.md", "README"}
    assert all(p.suffix == ".txt" for p in walk.sources) and len(walk.sources) == 6
    r = run_cli("diagnose", str(tmp_path / "acs"), "--format", "json")
    doc = json.loads(r.out)
    assert doc["findings"][0]["rule"] == "COMM022", [f["rule"] for f in doc["findings"]]
    assert any("documentation file(s): README, SOURCES.md" in w for w in doc["warnings"]), doc["warnings"]
    assert [noise_reason(n) for n in ("SOURCES.md", "readme.rst", "LICENSE", "readme.log", "notes.md")] == [
        "documentation",
        "documentation",
        "documentation",
        None,
        None,
    ]


def test_a_folder_past_the_file_limit_names_what_it_left(tmp_path):
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text("x")
    walk = walk_sources(tmp_path, max_files=3)
    assert len(walk.sources) == 3 and [p.name for p, _ in walk.skipped] == ["f3.txt", "f4.txt"]
    assert "beyond the first 3" in walk.warnings(tmp_path)[0]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_rewrites_a_line_on_a_terminal_and_prints_nothing_to_a_pipe(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    t = [0.0]
    tty = _Tty()
    with Progress("reading", tty, clock=lambda: t[0]) as p:
        for i in range(3):
            t[0] += 0.2
            p(i, 3, f"/x/f{i}.log")
    out = tty.getvalue()
    assert "\rreading 0/3 f0.log" in out and "\rreading 2/3 f2.log" in out
    assert out.endswith("\r") and all(len(seg) <= 39 for seg in out.split("\r"))
    pipe = io.StringIO()
    t[0] = 0.0
    p = Progress("reading", pipe, clock=lambda: t[0])
    p(0, 100, "a")
    t[0] = 1.0
    p(50, 100, "b")
    t[0] = 300.0
    p(60, 100, "c")  # however long it takes: stderr of a pipe holds errors only
    p.close()
    assert pipe.getvalue() == ""


def test_progress_goes_to_stderr_never_into_the_report(tmp_path):
    r = run_cli("diagnose", str(ZAP), "--format", "json")
    json.loads(r.out)  # stdout is the report only
    assert "reading" not in r.out


def test_dumps_inside_a_bundle_are_named_after_the_bundle_member(tmp_path):
    """Two real dumps of one member (before/after the leader was killed) collected into a bundle:
    one target, named by the bundle, never by the temporary folder it was unpacked into."""
    bundle = tmp_path / "b.tar.zst"
    args = ["collect", "-o", str(bundle), "--unit", "none", "--rdma-interval", "0.05"]
    for name in ("metrics_before_m1.prom", "metrics_after_m1.prom", "member_list.json"):
        args += ["--file", str(ZAP / name)]
    assert run_cli(*args).code == 0
    r = run_cli("diagnose", str(bundle), "--format", "json")
    d = json.loads(r.out)
    (lc,) = [f for f in d["findings"] if f["rule"] == "ETCD004"]
    srcs = [e["source"] for e in lc["evidence"] if e.get("source")]
    assert srcs and all(s.startswith(f"{bundle}:") for s in srcs), srcs
    assert any(s.endswith("metrics_after_m1.prom") for s in srcs)
    assert any(s.endswith("metrics_before_m1.prom") for s in srcs)  # the earlier dump, as evidence
    assert "cd-bundle-" not in r.out


def test_a_file_given_twice_is_read_once():
    obs = diagnosis.new_observations(lambda: 1796140000.0)
    refs = diagnosis.load_sources(obs, [ZAP, ZAP / "etcd-m0.log", str(ZAP / "etcd-m0.log")])
    locs = [r.location for r in refs]
    assert len(locs) == len(set(locs)) and str(ZAP / "etcd-m0.log") in locs
