"""NVIDIA driver versions as the host's own files and package tools state them, to compare the loaded
kernel module with the user-space libraries (NVML's "Driver/library version mismatch").

Read, in any mix (a paste of several commands):

- ``cat /proc/driver/nvidia/version``: ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  ...``
  (the kernel module that is loaded; the open modules print ``Open Kernel Module``);
- ``dpkg -l``: rows ``ii  <package>  <version>  <arch>  <description>`` of NVIDIA driver packages
  (``nvidia-*``, ``libnvidia-*``, ``xserver-xorg-video-nvidia-*``, ``cuda-drivers``) -- what is installed;
- ``/var/log/apt/history.log``: ``Start-Date:`` and ``Upgrade:``/``Install:`` entries that change an NVIDIA
  driver package (unattended-upgrades replacing the user space under a loaded module).

A version is kept as its driver release ``major.minor[.patch]`` (``460.73.01`` of ``460.73.01-0ubuntu0.20.04.1``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["DriverVersions", "load_driver_versions", "parse_driver_versions", "sniff_driver_versions"]

_MODULE = re.compile(
    r"^NVRM version: NVIDIA UNIX [\w-]{1,32} (?:Open )?Kernel Module(?: for \w+)?\s+(?P<v>\d{2,4}\.\d{1,4}(?:\.\d{1,4})?)"
)
_PKG = r"(?:nvidia-[\w.+\-]{1,100}|libnvidia-[\w.+\-]{1,100}|xserver-xorg-video-nvidia[\w.+\-]{0,100}|cuda-drivers[\w.+\-]{0,40})"
_DPKG = re.compile(
    r"^[a-z][a-zA-Z]{1,2}\s+(?P<pkg>"
    + _PKG
    + r")(?::\w{1,16})?\s+(?:\d{1,3}:)?(?P<v>\d{2,4}\.\d{1,4}(?:\.\d{1,4})?)\S{0,80}\s"
)
_APT_DATE = re.compile(r"^Start-Date: (?P<d>\d{4}-\d\d-\d\d\s+\d\d:\d\d:\d\d)")
_APT_CHANGE = re.compile(r"^(?P<op>Upgrade|Install|Downgrade): ")
_APT_ITEM = re.compile(
    r"(?P<pkg>"
    + _PKG
    + r"):\w{1,16} \((?:(?P<old>[^,()\s]{1,80}), )?(?P<new>[^,()\s]{1,80})(?:, automatic)?\)"
)
_REL = re.compile(r"(?:\d{1,3}:)?(\d{2,4}\.\d{1,4}(?:\.\d{1,4})?)")
# packages whose version is not the driver's (their own numbering)
_NOT_DRIVER = re.compile(
    r"^(?:nvidia-container|libnvidia-container|nvidia-docker|nvidia-modprobe|nvidia-settings|nvidia-prime|nvidia-cuda-toolkit|nvidia-profiler|nvidia-visual-profiler|nvidia-cuda-)"
)


@dataclass(frozen=True)
class PackageChange:
    """An apt history entry that changed an NVIDIA driver package."""

    package: str
    old: str | None
    new: str
    when: str  # Start-Date as written
    line: int


@dataclass
class DriverVersions:
    """What one input says about the NVIDIA driver versions of a host."""

    source: str
    kernel_module: str | None = None
    kernel_line: int = 0
    packages: dict[str, tuple[str, int]] = field(default_factory=dict)  # package -> (release, line)
    changes: list[PackageChange] = field(default_factory=list)

    def describe(self) -> str:
        parts = []
        if self.kernel_module:
            parts.append(f"kernel module {self.kernel_module}")
        if self.packages:
            parts.append(f"{len(self.packages)} NVIDIA package(s)")
        if self.changes:
            parts.append(f"{len(self.changes)} NVIDIA package change(s)")
        return "NVIDIA driver versions (" + ", ".join(parts) + ")"


def _release(v: str) -> str | None:
    m = _REL.match(v)
    return m.group(1) if m else None


def parse_driver_versions(text: str, path: str) -> DriverVersions:
    """The versions in ``text`` (see the module docstring). InputError when none is stated."""
    out = DriverVersions(path)
    when = ""
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        m = _MODULE.match(s)
        if m:
            out.kernel_module, out.kernel_line = m.group("v"), n
            continue
        m = _DPKG.match(s)
        if m and not _NOT_DRIVER.match(m.group("pkg")):
            out.packages.setdefault(m.group("pkg"), (m.group("v"), n))
            continue
        m = _APT_DATE.match(s)
        if m:
            when = " ".join(m.group("d").split())
            continue
        if _APT_CHANGE.match(s):
            for it in _APT_ITEM.finditer(s):
                if _NOT_DRIVER.match(it.group("pkg")):
                    continue
                new = _release(it.group("new"))
                if new:
                    old = _release(it.group("old")) if it.group("old") else None
                    out.changes.append(PackageChange(it.group("pkg"), old, new, when, n))
    if not (out.kernel_module or out.packages or out.changes):
        raise InputError(
            "no NVIDIA driver version in it (/proc/driver/nvidia/version, dpkg -l, apt history)", path
        )
    return out


def sniff_driver_versions(head: bytes, name: str = "") -> bool:
    """Loader hook for ``observe.detect``. A paste that a GPU tool's reader takes (nvidia-smi beside the
    version file) is left to it: its tables say more than the versions."""
    from clusterdoctor.observe.gpu.load import sniff_gpu

    if sniff_gpu(head, name):
        return False
    if b"NVRM version: NVIDIA UNIX" in head:
        return True
    if b"Desired=Unknown/Install" in head and re.search(rb"^\S{2,3}\s+(?:lib)?nvidia-", head, re.M):
        return True
    return (
        b"Start-Date: " in head
        and re.search(rb"^(?:Upgrade|Install|Downgrade): [^\n]*nvidia", head, re.M) is not None
    )


def load_driver_versions(path: str | Path) -> dict[str, Any]:
    """Loader hook for ``observe.detect``: ``{"nvidia_versions": [DriverVersions]}``."""
    from clusterdoctor.observe.limits import read_text

    p = str(path)
    dv = parse_driver_versions(read_text(p), p)
    return {"nvidia_versions": [dv], "described_as": dv.describe()}
