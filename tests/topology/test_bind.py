"""numa exec: bind a real child (sched_setaffinity + set_mempolicy) and read its /proc."""

from __future__ import annotations

import os
import subprocess
import sys

from clusterdoctor.topology.bind import MPOL_DEFAULT, MPOL_PREFERRED, set_mempolicy
from clusterdoctor.topology.cpuset import parse_cpulist
from tests.topology.sysfs_builder import build_tree


def _run_exec(tmp_path, *extra):
    root = build_tree(tmp_path / "root")
    cmd = [
        sys.executable,
        "-m",
        "clusterdoctor.cli.main",
        "numa",
        "exec",
        "--local-rank",
        "0",
        "--sysfs-root",
        str(root),
        *extra,
        "--",
        sys.executable,
        "-c",
        "import os;print(open('/proc/self/status').read());print('NUMAMAPS');print(open('/proc/self/numa_maps').read());"
        "print('ENV', os.environ['CLUSTERDOCTOR_NUMA_NODE'], os.environ['CLUSTERDOCTOR_COMPUTE_CPUS'])",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_exec_binds_real_child(tmp_path):
    p = _run_exec(tmp_path)
    assert p.returncode == 0, p.stderr
    status = p.stdout.split("NUMAMAPS")[0]
    allowed = next(
        line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list")
    )
    node0 = parse_cpulist(open("/sys/devices/system/node/node0/cpulist").read())
    assert set(parse_cpulist(allowed)) <= set(node0)
    assert "ENV 0" in p.stdout
    maps = p.stdout.split("NUMAMAPS")[1]
    # set_mempolicy(MPOL_PREFERRED, node 0) is inherited across exec: numa_maps shows it per VMA,
    # unless the kernel/container refused it, in which case a warning names the refusal.
    assert "prefer:0" in maps or "refused" in p.stderr


def test_exec_without_memory_policy(tmp_path):
    p = _run_exec(tmp_path, "--mem", "none")
    assert p.returncode == 0, p.stderr
    assert "prefer:0" not in p.stdout.split("NUMAMAPS")[1]


def test_exec_no_command_is_usage_error(tmp_path):
    root = build_tree(tmp_path / "root")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "clusterdoctor.cli.main",
            "numa",
            "exec",
            "--local-rank",
            "0",
            "--sysfs-root",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "no command" in p.stderr and "Traceback" not in p.stderr


def test_set_mempolicy_in_a_child_process():
    # Run in a child so the test process keeps its default policy.
    code = (
        "from clusterdoctor.topology.bind import set_mempolicy, MPOL_PREFERRED, MPOL_DEFAULT\n"
        "set_mempolicy(MPOL_PREFERRED, [0])\n"
        "x = bytearray(8 << 20)\n"
        "print('prefer:0' in open('/proc/self/numa_maps').read())\n"
        "set_mempolicy(MPOL_DEFAULT, [])\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        assert "Operation not permitted" in p.stderr or "not implemented" in p.stderr.lower()
    else:
        assert p.stdout.strip() == "True"
    assert MPOL_DEFAULT == 0 and MPOL_PREFERRED == 1 and callable(set_mempolicy) and os.getpid() > 0
