"""STOR001 on the fleet's node exporter rows (``diagnose --prometheus``): rows named
``NODE:MOUNTPOINT`` are judged as ``df`` rows are, the ``/dev/shm`` case included.

The rows come from a real node exporter scrape (tests/data/storage/README.md: node exporter 1.5.0 on a
1 MiB tmpfs on /dev/shm that we filled), served by a stand-in for Prometheus's instant query that
answers ``max by (...) (node_filesystem_X)`` from that dump with the scrape's ``node`` label added.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from clusterdoctor.model import Series, Severity
from clusterdoctor.observe.control.prom_text import parse_prom_text
from clusterdoctor.observe.node.prom_fleet import node_filesystems
from clusterdoctor.rules.registry import Observations, get_rule, run_rules
from clusterdoctor.rules.storage import mountpoint

DUMP = Path(__file__).parents[1] / "data" / "storage" / "node_exporter_1.5.0_filesystem_dev_shm_full.prom"


class DumpPrometheus:
    """Instant queries ``max by (...) (METRIC)`` answered from node exporter dumps, one per node."""

    def __init__(self, dumps: dict[str, str]) -> None:
        self.sets = {node: parse_prom_text(text) for node, text in dumps.items()}
        self.asked: list[str] = []

    def query(self, expr: str, at: float) -> list[Series]:
        self.asked.append(expr)
        m = re.fullmatch(r"max by \([^)]*\) \((\w+)\)", expr)
        assert m, expr  # node_filesystems asks nothing else
        out = []
        for node, ms in self.sets.items():
            for s in ms.by_name().get(m.group(1), []):
                labels = {**dict(s.labels), "node": node, "job": "node"}
                out.append(Series(m.group(1), labels, [(at, s.value)]))
        return out


def _stor001(rows):
    obs = Observations()
    obs.put("fs_usage", rows)
    findings, skipped, ran = run_rules(obs, [get_rule("STOR001")])
    assert ran == ["STOR001"] and not skipped
    return findings


def test_full_dev_shm_of_a_node_is_shared_memory():
    rows = node_filesystems(DumpPrometheus({"gpu-node-7": DUMP.read_text()}), at=1e9)
    space = {r.mount: r for r in rows if not r.inodes}
    assert set(space) == {"gpu-node-7:/", "gpu-node-7:/dev/shm"}
    assert space["gpu-node-7:/dev/shm"].use_pct == 100.0 and space["gpu-node-7:/dev/shm"].avail == 0
    (f,) = _stor001(rows)
    assert (f.subject, f.severity) == ("gpu-node-7:/dev/shm", Severity.CRITICAL)
    assert f.causes == ("storage.shm-dataloader", "nccl.shm-no-space")
    assert "shared memory for DataLoader workers and NCCL" in f.summary
    ev = f.evidence[0].description
    assert ev.startswith("node exporter on gpu-node-7: tmpfs 1.0 MiB 100%"), ev  # no ':0' line number


def test_one_finding_per_node_and_the_healthy_node_quiet():
    healthy = re.sub(
        r'^(node_filesystem_(?:avail|free)_bytes\{device="tmpfs"[^}]*\}) 0$',
        r"\g<1> 1.048576e+06",
        DUMP.read_text(),
        flags=re.M,
    )  # the same scrape with /dev/shm emptied: a variation of the real dump, made here
    client = DumpPrometheus(
        {"gpu-node-7": DUMP.read_text(), "gpu-node-8": healthy, "gpu-node-9": DUMP.read_text()}
    )
    found = _stor001(node_filesystems(client, at=1e9))
    assert sorted(f.subject for f in found) == ["gpu-node-7:/dev/shm", "gpu-node-9:/dev/shm"]
    assert all("storage.shm-dataloader" in f.causes for f in found)


def test_container_shm_seen_from_the_node():
    # synthetic: the real dump's /dev/shm row relabelled to containerd's CRI sandbox shm mount
    text = DUMP.read_text().replace(
        'mountpoint="/dev/shm"', 'mountpoint="/run/containerd/io.containerd.grpc.v1.cri/sandboxes/4f1c/shm"'
    )
    (f,) = _stor001(node_filesystems(DumpPrometheus({"n1": text}), at=1e9))
    assert f.subject.startswith("n1:/run/containerd/") and "storage.shm-dataloader" in f.causes
    # the same tmpfs elsewhere is a plain full disk
    other = DUMP.read_text().replace('mountpoint="/dev/shm"', 'mountpoint="/scratch/shm"')
    (g,) = _stor001(node_filesystems(DumpPrometheus({"n1": other}), at=1e9))
    assert g.causes == ("storage.disk-full",)


def test_a_node_row_of_a_snap_image_is_not_full():
    # synthetic: the full tmpfs row relabelled as a snap mount: read-only images are always 100 %
    text = DUMP.read_text().replace('mountpoint="/dev/shm"', 'mountpoint="/snap/core20/2105"')
    assert _stor001(node_filesystems(DumpPrometheus({"n1": text}), at=1e9)) == []


@given(
    st.from_regex(r"[a-z0-9][a-z0-9.-]{0,20}(:[0-9]{1,5})?", fullmatch=True),
    st.from_regex(r"/[a-zA-Z0-9_./:-]{0,30}", fullmatch=True),
)
def test_mountpoint_of_node_rows(node, path):
    assert mountpoint(f"{node}:{path}") == path
    assert mountpoint(path) == path
