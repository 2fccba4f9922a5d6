"""sysfs PCIe link of each NVIDIA GPU: ``current_link_speed/width`` vs ``max_link_speed/width``, bound driver.

``/sys/bus/pci/devices/<bdf>/current_link_speed`` reads ``16.0 GT/s PCIe`` (kernels before 4.19/5.x:
``16 GT/s``; a link that is down: ``Unknown``), ``current_link_width`` reads ``16``. The ``driver``
symlink names the bound driver (none: no link). Works on this machine (``root="/"``), on a saved
sysfs tree and on the copy a bundle holds (its ``links.json`` records the symlinks).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from clusterdoctor.observe.gpu.common import norm_bus_id
from clusterdoctor.topology.gpu import GpuReport, GpuState, PcieLink

__all__ = ["parse_link_speed", "read_sysfs_gpu_links", "sysfs_gpu_report"]

NVIDIA = "0x10de"


def parse_link_speed(text: str | None) -> float | None:
    """``16.0 GT/s PCIe`` / ``8 GT/s`` / ``2.5 GT/s`` -> GT/s; ``Unknown`` or garbage -> None."""
    if not text:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", text)
    if not m:
        return None
    v = float(m.group(1))
    return v if 0 < v < 1000 else None


def _read(p: Path) -> str | None:
    """A small sysfs attribute: bounded, regular files only (not a crafted tree's link to /dev/zero
    or out of the tree: :func:`clusterdoctor.observe.confine.confined`)."""
    from clusterdoctor.errors import InputError
    from clusterdoctor.observe.limits import read_bounded

    try:
        return read_bounded(p, 1 << 16, prefix=True).decode("utf-8", errors="replace").strip()
    except (OSError, InputError):
        return None


def _int(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit():
        return None
    v = int(text.strip())
    return v if 0 <= v <= 64 else None


def _driver(dev: Path, links: dict[str, str], live: bool) -> str | None:
    """The bound driver's name; "" when none is bound (live only); None when a saved tree does not say."""
    if dev.joinpath("driver").is_symlink():
        return os.path.basename(os.readlink(dev / "driver"))
    rel = f"sys/bus/pci/devices/{dev.name}/driver"
    if rel in links:
        return os.path.basename(links[rel])
    return "" if live else None


def read_sysfs_gpu_links(root: str | os.PathLike[str] = "/") -> list[GpuState]:
    """NVIDIA display-class devices under ``root``/sys/bus/pci/devices with their link and driver."""
    base = Path(root)
    devdir = base / "sys" / "bus" / "pci" / "devices"
    links: dict[str, str] = {}
    lj = base / "links.json"
    if lj.is_file():
        try:
            loaded = json.loads(lj.read_text())
            if isinstance(loaded, dict):
                links = {str(k): str(v) for k, v in loaded.items()}
        except (OSError, ValueError):
            links = {}
    out: list[GpuState] = []
    live = base.resolve() == Path("/")
    try:
        names = sorted(os.listdir(devdir))
    except OSError:
        return out
    for name in names:
        d = devdir / name
        if (_read(d / "vendor") or "").lower() != NVIDIA:
            continue
        cls = _read(d / "class") or ""
        if not cls.lower().startswith(("0x03",)):
            continue
        bus = norm_bus_id(name)
        if bus is None:
            continue
        src = str(d)
        link = PcieLink(
            speed_current_gts=parse_link_speed(_read(d / "current_link_speed")),
            speed_max_gts=parse_link_speed(_read(d / "max_link_speed")),
            width_current=_int(_read(d / "current_link_width")),
            width_max=_int(_read(d / "max_link_width")),
            source=src,
        )
        g = GpuState(bus_id=bus)
        if any(v is not None for k, v in link.__dict__.items() if k != "source"):
            g.pcie = link
        drv = _driver(d, links, live)
        if drv is not None:
            g.set("driver_in_use", drv, src)
        g.sources.append(src)
        out.append(g)
    return out


def sysfs_gpu_report(root: str | os.PathLike[str], source: str | None = None) -> GpuReport | None:
    """A GpuReport of the NVIDIA GPUs' links in a sysfs tree, or None when it has none."""
    gpus = read_sysfs_gpu_links(root)
    if not gpus:
        return None
    rep = GpuReport("sysfs", source or str(root), gpus=gpus)
    rep.facts.add("pcie")
    return rep
