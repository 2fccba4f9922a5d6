"""``numa check``: the CI gate's decision, from a topology and the placement audit.

Exit codes (stable; README "numa check", DESIGN.md): 0 at least one process was checked and every
checked process is consistent; 1 nothing could be judged — no NUMA information, not the expected
node count, no process selected (``--match`` matched nothing, no GPU/NIC process), or a selected
process could not be read (``--pid`` of a process that exited, permission denied); 2 a checked
process is not bound to one node; 3 bound to CPUs or memory not local to its GPU/NIC; 4 bad usage or
input (raised by the caller). The worst code wins (3 over 2 over 1).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.topology.model import Topology

OK, NO_NUMA, UNBOUND, MISPLACED, BAD_INPUT = 0, 1, 2, 3, 4
NOT_CHECKED = NO_NUMA  # "could not judge": nothing to check, or a selected process unreadable
REMOTE_MEMORY_LIMIT = 0.30  # same threshold as rules/numa.py REMOTE_MEMORY_STRONG (issue #2)


@dataclass
class ProcessVerdict:
    pid: int | None
    comm: str
    code: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "comm": self.comm, "code": self.code, "reason": self.reason}


@dataclass
class CheckResult:
    code: int
    message: str
    node_count: int
    verdicts: list[ProcessVerdict] = field(default_factory=list)
    placements: list[dict[str, Any]] = field(default_factory=list)
    archived_to: str | None = None
    numa_ok: bool = True  # False: no NUMA information, or not the expected node count

    @property
    def checked(self) -> int:
        """How many processes were judged (read and given a verdict other than "not checked")."""
        return sum(1 for v in self.verdicts if v.code != NOT_CHECKED)

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": "clusterdoctor.numa-check/1",
            "code": self.code,
            "message": self.message,
            "numa_nodes": self.node_count,
            "processes_checked": self.checked,
            "processes": [v.as_dict() for v in self.verdicts],
            "archived_to": self.archived_to,
        }


def judge_process(p: dict[str, Any], multi_node: bool) -> ProcessVerdict:
    """The verdict for one placement record (Placement.as_dict())."""
    pid, comm = p.get("pid"), str(p.get("comm") or "?")
    if p.get("error"):
        return ProcessVerdict(pid, comm, NOT_CHECKED, f"not checked: {p['error']}")
    if not multi_node:
        return ProcessVerdict(pid, comm, OK, "single NUMA node: placement cannot be remote")
    cpu_nodes = set(p.get("cpu_nodes") or [])
    if not p.get("bound") or len(cpu_nodes) > 1:
        return ProcessVerdict(
            pid, comm, UNBOUND, f"not bound to one node: CPUs span nodes {sorted(cpu_nodes)}"
        )
    dev_nodes = {n for n in [*(p.get("gpu_nodes") or []), *(p.get("nic_nodes") or [])] if n is not None}
    if dev_nodes and not cpu_nodes <= dev_nodes:
        return ProcessVerdict(
            pid,
            comm,
            MISPLACED,
            f"bound to node(s) {sorted(cpu_nodes)} but its GPU/NIC is on node(s) {sorted(dev_nodes)}",
        )
    mems = set(p.get("mems_allowed") or [])
    home = dev_nodes or cpu_nodes
    if mems and not mems & home:
        return ProcessVerdict(
            pid, comm, MISPLACED, f"memory restricted to node(s) {sorted(mems)}, not {sorted(home)}"
        )
    share = p.get("remote_memory_share")
    if isinstance(share, (int, float)) and share > REMOTE_MEMORY_LIMIT:
        return ProcessVerdict(pid, comm, MISPLACED, f"{share * 100:.0f}% of its memory is on remote nodes")
    return ProcessVerdict(pid, comm, OK, f"bound to node(s) {sorted(cpu_nodes)}, local to its devices")


def decide(
    topo: Topology,
    placements: list[dict[str, Any]],
    expect_nodes: int | None,
    selection: str = "every process that uses a GPU or RDMA NIC",
) -> CheckResult:
    """The gate's verdict; ``selection`` says in words which processes were asked for (for the message)."""
    n = len(topo.nodes)
    if n == 0:
        return CheckResult(
            NO_NUMA, f"no NUMA information in {topo.source}", 0, placements=placements, numa_ok=False
        )
    if expect_nodes is not None and n != expect_nodes:
        return CheckResult(
            NO_NUMA,
            f"expected {expect_nodes} NUMA nodes, {topo.source} shows {n}",
            n,
            placements=placements,
            numa_ok=False,
        )
    multi = len([x for x in topo.nodes if x.cpus]) > 1
    verdicts = [judge_process(p, multi) for p in placements]
    code = max((v.code for v in verdicts), default=NOT_CHECKED)
    checked = sum(1 for v in verdicts if v.code != NOT_CHECKED)
    unread = len(verdicts) - checked
    if not verdicts:
        msg = f"{n} NUMA node(s); nothing checked: no process selected ({selection})"
    elif code == OK:
        msg = f"{n} NUMA node(s); {len(verdicts)} process(es) consistent"
    elif code == NOT_CHECKED:
        msg = f"{n} NUMA node(s); {unread} selected process(es) could not be checked" + (
            f", {checked} consistent" if checked else "; nothing checked"
        )
    else:
        bad = sum(1 for v in verdicts if v.code in (UNBOUND, MISPLACED))
        msg = f"{n} NUMA node(s); {bad} of {len(verdicts)} process(es) misplaced or unbound" + (
            f", {unread} could not be checked" if unread else ""
        )
    return CheckResult(code, msg, n, verdicts, placements)


def archive_evidence(
    result: CheckResult, dest: Path, sysfs_root: str = "/", from_file: str | None = None
) -> str:
    """Save the evidence the check judged into ``dest``: the audit JSON and a copy of the topology it
    read — sys/devices/system/node (regular files only) of the sysfs root, or, with ``--from``, the
    dump itself (a file is copied as it is; a sysfs tree or tarball's node folder like a live one)."""
    dest.mkdir(parents=True, exist_ok=True)
    if from_file is not None:
        fp = Path(from_file)
        if fp.is_dir():
            sysfs_root = str(fp)
        elif fp.is_file():
            from clusterdoctor.observe.limits import read_input

            (dest / "topology-from").mkdir(exist_ok=True)
            (dest / "topology-from" / fp.name).write_bytes(read_input(fp))
            sysfs_root = None  # this machine's /sys is not what was judged
    src = Path(sysfs_root or "/nonexistent") / "sys" / "devices" / "system" / "node"
    out = dest / "sys-devices-system-node"
    if src.is_dir():
        for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
            rel = Path(dirpath).relative_to(src)
            # memory blocks and per-CPU links are huge and not needed to reproduce a placement issue
            dirnames[:] = [d for d in dirnames if not d.startswith(("memory", "cpu", "hugepages", "power"))]
            for fn in filenames:
                if fn in (
                    "cpulist",
                    "cpumap",
                    "distance",
                    "meminfo",
                    "numastat",
                    "online",
                    "possible",
                    "has_cpu",
                    "has_memory",
                    "has_normal_memory",
                ):
                    target = out / rel / fn
                    target.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        shutil.copyfile(Path(dirpath) / fn, target)
                    except OSError:
                        pass
    (dest / "numa-audit.json").write_text(
        json.dumps(result.as_dict() | {"placements": result.placements}, indent=2, default=str)
    )
    return str(dest)
