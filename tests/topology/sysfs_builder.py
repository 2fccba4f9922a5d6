"""Build a small sysfs tree for tests that must run real binaries on THIS machine's CPUs.

This is a constructed tree, not a capture: the NUMA node and CPU files are copied from this
machine's live /sys (so their CPUs exist and binding works), and one PCI GPU entry is added in the
kernel's layout (class 0x030200, vendor 0x10de) so a binding plan has a GPU to bind to.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def build_tree(root: Path, gpu_numa_node: int = 0) -> Path:
    live = Path("/sys/devices/system")
    for node in live.joinpath("node").glob("node[0-9]*"):
        dst = root / "sys/devices/system/node" / node.name
        dst.mkdir(parents=True)
        for fn in ("cpulist", "distance", "meminfo"):
            shutil.copyfile(node / fn, dst / fn)
    for cpu in live.joinpath("cpu").glob("cpu[0-9]*"):
        topo = cpu / "topology"
        if not topo.is_dir():
            continue
        dst = root / "sys/devices/system/cpu" / cpu.name / "topology"
        dst.mkdir(parents=True)
        for fn in ("core_id", "physical_package_id", "thread_siblings_list"):
            shutil.copyfile(topo / fn, dst / fn)
    dev = root / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    dev.mkdir(parents=True)
    (dev / "class").write_text("0x030200\n")
    (dev / "vendor").write_text("0x10de\n")
    (dev / "device").write_text("0x2330\n")
    (dev / "numa_node").write_text(f"{gpu_numa_node}\n")
    bus = root / "sys/bus/pci/devices"
    bus.mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0", bus / "0000:01:00.0")
    return root
