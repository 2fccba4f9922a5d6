"""`clusterdoctor numa ...` and `diagnose` as a user runs them: real processes, real dumps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree as ET

import pytest

from tests.conftest import run_cli, shared_fixture

# hwloc XML of an HP SL390s: node 0 holds the even CPUs, node 1 the odd ones; GPU0 on node 0,
# GPU1/GPU2 on node 1 (read from the file's NUMANode/PU and PCI objects).
SL390 = "numa/hwloc/24em64t-2n6c2t-pci.xml"


@pytest.fixture
def sleeper():
    """Start real sleeping children pinned to given CPUs with given env; kill them afterwards."""
    procs = []

    def start(cpus, env=None):
        code = "import os,sys,time; b=bytearray(32<<20); sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(60)"
        e = dict(os.environ, **(env or {}))
        p = subprocess.Popen(
            [sys.executable, "-c", code],
            env=e,
            stdout=subprocess.PIPE,
            preexec_fn=lambda: os.sched_setaffinity(0, cpus),
        )
        assert p.stdout.readline().strip() == b"ready"
        procs.append(p)
        return p.pid

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_topology_json_from_dump():
    r = run_cli("numa", "topology", "--from", str(shared_fixture(SL390)), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert [n["id"] for n in doc["nodes"]] == [0, 1]
    assert doc["nodes"][0]["cpus"] == list(range(0, 24, 2))
    assert doc["distances"] == [[10, 20], [20, 10]]
    assert [g["numa_node"] for g in doc["gpus"]] == [0, 1, 1]
    assert {n["name"]: n["numa_node"] for n in doc["nics"]}["mlx4_0"] == 0
    assert {(p["gpu"], p["nic"]): p["type"] for p in doc["paths"]}[("GPU1", "mlx4_0")] == "SYS"


def test_topology_live_text():
    r = run_cli("numa", "topology")
    assert r.code == 0 and "node 0: cpus" in r.out


def test_check_exit_codes_with_real_processes(sleeper, tmp_path):
    xml = str(shared_fixture(SL390))
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    spans = sleeper({0, 1}, {"CUDA_VISIBLE_DEVICES": "0"})  # CPUs 0 and 1 are on nodes 0 and 1 of the dump
    wrong = sleeper({1}, {"CUDA_VISIBLE_DEVICES": "0"})  # node 1, GPU0 is on node 0
    right = sleeper({0}, {"CUDA_VISIBLE_DEVICES": "0"})  # node 0 with GPU0
    assert run_cli("numa", "check", "--from", xml, "--pid", str(right)).code == 0
    r = run_cli("numa", "check", "--from", xml, "--pid", str(spans))
    assert r.code == 2, r.out + r.err
    junit = tmp_path / "numa.xml"
    archive = tmp_path / "evidence"
    r = run_cli(
        "numa",
        "check",
        "--from",
        xml,
        "--pid",
        str(wrong),
        "--junit",
        str(junit),
        "--archive",
        str(archive),
        "--json",
    )
    assert r.code == 3, r.out + r.err
    doc = json.loads(r.out)
    assert doc["processes"][0]["code"] == 3 and "node" in doc["processes"][0]["reason"]
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "1"
    assert (archive / "numa-audit.json").is_file()
    # --from X archives X, not this machine's /sys
    assert (archive / "topology-from" / Path(xml).name).read_bytes() == Path(xml).read_bytes()
    assert not (archive / "sys-devices-system-node").exists()
    # the worst process decides: unbound (2) and misplaced (3) together give 3
    assert run_cli("numa", "check", "--from", xml, "--pid", str(spans), "--pid", str(wrong)).code == 3


def test_check_expect_nodes_and_env(sleeper):
    live_nodes = len(
        [d for d in os.listdir("/sys/devices/system/node") if d.startswith("node") and d[4:].isdigit()]
    )
    bound = str(sleeper({0}))  # bound to CPU 0: one node, no device, so consistent on any machine
    assert run_cli("numa", "check", "--expect-nodes", str(live_nodes), "--pid", bound).code == 0
    r = run_cli("numa", "check", "--expect-nodes", str(live_nodes + 1), "--pid", bound)
    assert r.code == 1 and "expected" in r.out
    r = run_cli("numa", "check", "--pid", bound, env={"NUMA_NODE_COUNT": str(live_nodes + 1)})
    assert r.code == 1


def test_check_is_ok_only_when_something_was_checked(sleeper, tmp_path):
    """Exit 0 needs at least one checked process, all consistent; nothing checked is exit 1, never OK."""
    bound = sleeper({0})
    # a --pid with no process: the kernel never hands out pid_max itself, so unlike the pid of a
    # process that just exited it cannot be reused by a test running beside this one
    dead = SimpleNamespace(pid=int(Path("/proc/sys/kernel/pid_max").read_text()))
    r = run_cli("numa", "check", "--pid", str(bound), "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["processes"][0]["code"] == 0
    r = run_cli("numa", "check", "--pid", str(dead.pid))
    assert r.code == 1 and "could not be checked" in r.out and "OK" not in r.out
    r = run_cli("numa", "check", "--pid", str(bound), "--pid", str(dead.pid), "--json")
    assert r.code == 1, r.out
    doc = json.loads(r.out)
    assert {p["pid"]: p["code"] for p in doc["processes"]} == {bound: 0, dead.pid: 1}
    junit = tmp_path / "numa.xml"
    r = run_cli("numa", "check", "--match", "no-process-has-this-command-line-3f9c2", "--junit", str(junit))
    assert r.code == 1 and "matched nothing" in r.out
    cases = {c.get("name"): c for c in ET.parse(junit).getroot()}
    assert cases["processes-checked"].find("failure") is not None  # CI sees the failed gate
    assert cases["numa-information"].find("failure") is None
    # this suite's machines run no GPU/RDMA process: the default selection checks nothing
    r = run_cli("numa", "check")
    if "no process uses a GPU" in r.out:
        assert r.code == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--no-such-option"],
        ["--pid", "not-a-pid"],
        ["--expect-nodes", "two"],
        ["--match", "("],
        ["--from", "/no/such/dir/topo.xml"],
    ],
)
def test_check_usage_errors_exit_4(args):
    """Click's usage code 2 means "not bound" for numa check: its usage errors give 4, in one line."""
    r = run_cli("numa", "check", *args)
    assert r.code == 4, (args, r.out, r.err)
    assert r.err.count("\n") == 1 and "Traceback" not in r.err and r.out == ""


def test_check_unwritable_junit_exits_4_before_checking(tmp_path):
    r = run_cli("numa", "check", "--pid", "1", "--junit", str(tmp_path / "missing" / "numa.xml"))
    assert r.code == 4 and "missing" in r.err and r.out == ""


def test_check_bad_input_exits_4(tmp_path):
    bad = tmp_path / "garbage.xml"
    bad.write_bytes(b"\x00\x01 not a topology")
    r = run_cli("numa", "check", "--from", str(bad))
    assert r.code == 4
    assert r.err.count("\n") == 1 and "garbage.xml" in r.err and "Traceback" not in r.err


def test_check_no_numa_information(tmp_path):
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    r = run_cli("numa", "check", "--sysfs-root", str(tmp_path))
    assert r.code == 1 and "no NUMA information" in r.out


def test_audit_vanished_and_real_process(sleeper):
    pid = sleeper({0})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    r = run_cli("numa", "audit", "--pid", str(pid), "--pid", str(dead.pid), "--json")
    assert r.code == 0, r.err
    procs = {p["pid"]: p for p in json.loads(r.out)["processes"]}
    assert procs[pid]["cpus_allowed"] == [0]
    assert procs[pid]["memory_total_bytes"] >= 32 << 20
    assert procs[dead.pid]["error"]


def test_plan_json_and_refusals(tmp_path):
    xml = str(shared_fixture(SL390))
    r = run_cli("numa", "plan", "--from", xml, "--gpus", "0,1", "--json")
    assert r.code == 0, r.err
    ranks = json.loads(r.out)["ranks"]
    for key in ("local_rank", "gpu", "numa_node", "compute_cpus", "comm_cpus", "memory_node"):
        assert key in ranks[0]
    assert [x["numa_node"] for x in ranks] == [0, 1]
    r = run_cli("numa", "plan", "--from", xml, "--gpus", "7")
    assert r.code == 2 and "not found" in r.err and "Traceback" not in r.err
    r = run_cli("numa", "plan")  # this machine: no GPU
    if "no GPU" in r.err:
        assert r.code == 2


def test_probe_without_gpu_says_so():
    r = run_cli("numa", "probe", "--json")
    doc = json.loads(r.out)
    assert doc["ran"] is False and doc["reason"]
    assert r.code == 1  # nothing measured: never "OK"


def test_diagnose_files_and_live(tmp_path):
    r = run_cli("diagnose", str(shared_fixture(SL390)), "--format", "json", "--fail-on", "critical")
    assert r.code == 1  # SYS paths between GPU1/2 and the only HCA are critical
    doc = json.loads(r.out)
    assert doc["findings"][0]["severity"] == "critical"
    r = run_cli("diagnose", "--format", "json")
    assert r.code in (0, 1), r.err
    assert json.loads(r.out)["schema"] == "clusterdoctor.diagnosis/1"
    out = tmp_path / "r.html"
    assert run_cli("diagnose", str(shared_fixture(SL390)), "--format", "html", "-o", str(out)).code == 1
    assert "<svg" in out.read_text()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 100,
        b"<topology version='2.0'><object type='Machine'>",
        b"random words\n" * 10,
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, content):
    f = tmp_path / "input.bin"
    f.write_bytes(content)
    for args in (
        ["diagnose", str(f)],
        ["numa", "topology", "--from", str(f)],
        ["numa", "plan", "--from", str(f)],
    ):
        r = run_cli(*args)
        assert r.code == 2, (args, r.out, r.err)
        assert "Traceback" not in r.err and r.err.strip().count("\n") == 0 and "input.bin" in r.err


def test_missing_file_and_permission(tmp_path):
    r = run_cli("diagnose", str(tmp_path / "nope.xml"))
    assert r.code == 2 and "no such file" in r.err
    f = tmp_path / "secret.xml"
    f.write_text("<topology/>")
    f.chmod(0)
    if os.geteuid() == 0:
        pytest.skip("root reads files regardless of mode")
    r = run_cli("diagnose", str(f))
    assert r.code == 2 and "permission" in r.err


def test_rules_command():
    r = run_cli("rules")
    assert r.code == 0 and "NUMA002" in r.out and "PCIE001" in r.out
    r = run_cli("rules", "NUMA003")
    assert r.code == 0 and "Thresholds" in r.out and "0.3" in r.out and "source:" in r.out
    assert run_cli("rules", "NOPE999").code == 2


def test_match_selects_the_workload_not_its_wrapper_or_clusterdoctor():
    """`numa audit --match` under `timeout`: the python it wraps is audited; the timeout around it,
    clusterdoctor itself and the timeout that runs clusterdoctor are not."""
    import subprocess
    import sys

    marker = "cd-match-marker-7c1f"
    child = subprocess.Popen(["timeout", "120", sys.executable, "-c", "import time; time.sleep(120)", marker])
    try:
        deadline = time.monotonic() + 60  # a generous cap on the child's start, never a speed check
        py = None
        while py is None and time.monotonic() < deadline:
            kids = Path(f"/proc/{child.pid}/task/{child.pid}/children")
            ids = kids.read_text().split() if kids.exists() else []
            py = int(ids[0]) if ids else None
            time.sleep(0.05)
        assert py is not None, "the wrapped python did not start"
        r = run_cli("numa", "audit", "--match", marker, "--json")
        assert r.code == 0, r.err
        pids = [p["pid"] for p in json.loads(r.out)["processes"]]
        assert pids == [py], (pids, child.pid)
    finally:
        child.kill()
        child.wait(timeout=30)
