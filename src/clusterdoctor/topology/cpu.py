"""Which CPU a machine has — vendor, model name, family and model numbers — as its sources state it.

Read from ``/proc/cpuinfo`` (``vendor_id``, ``cpu family``, ``model``, ``model name``; on Arm
``CPU implementer``/``CPU part``), hwloc's ``CPUVendor``/``CPUFamilyNumber``/``CPUModelNumber``/
``CPUModel`` infos, or NCCL's ``<cpu vendor familyid modelid>``. A source that does not say leaves it
unknown; nothing is assumed from the absence of "AMD".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# CPUID vendor strings (x86) and Arm implementer codes (Arm ARM, MIDR_EL1.Implementer).
VENDORS = {
    "genuineintel": "Intel",
    "authenticamd": "AMD",
    "hygongenuine": "Hygon",
    "centaurhauls": "Centaur",
    "shanghai": "Zhaoxin",
    "0x41": "Arm",
    "0x42": "Broadcom",
    "0x43": "Cavium",
    "0x48": "HiSilicon",
    "0x4e": "NVIDIA",
    "0x50": "APM",
    "0x51": "Qualcomm",
    "0x61": "Apple",
    "0xc0": "Ampere",
}
# Intel family 6 server models (Intel SDM vol. 4, table 2-1 "CPUID signature values"; Linux
# arch/x86/include/asm/intel-family.h): 0x8F = INTEL_SAPPHIRERAPIDS_X, 0xCF = INTEL_EMERALDRAPIDS_X.
INTEL_SAPPHIRE_RAPIDS = (6, 0x8F)
INTEL_EMERALD_RAPIDS = (6, 0xCF)
# AMD EPYC server families (AMD PPRs; Linux arch/x86 amd_nb/zen): 0x17 Zen/Zen 2 (Naples, Rome),
# 0x19 Zen 3/4 (Milan, Genoa, Bergamo), 0x1A Zen 5 (Turin).
AMD_ZEN_FAMILIES = {0x17: "Zen/Zen 2", 0x19: "Zen 3/Zen 4", 0x1A: "Zen 5"}
# 4th-generation Xeon Scalable SKUs are numbered x4xx (Platinum 8480+, Gold 6430, Silver 4410Y …):
# Intel's "processor numbers" scheme; used only when a source gives the name but no model number.
_SPR_NAME = re.compile(r"xeon.*\b(platinum|gold|silver|bronze|max)\s+\d4\d{2}", re.I)


@dataclass(frozen=True)
class CpuId:
    """What the source says about the CPU (each field None when it does not say)."""

    vendor: str | None = None  # normalised: "Intel", "AMD", "Arm", "NVIDIA", ... or the raw string
    model_name: str | None = None
    family: int | None = None
    model: int | None = None
    source: str | None = None  # "/proc/cpuinfo", "hwloc XML", "NCCL topology XML", "model name"

    def platform(self) -> str | None:
        """``"amd-epyc"``, ``"intel-sapphire-rapids"`` (or emerald) when the CPU is known to be one;
        None otherwise (an unknown or other CPU is not guessed to be either)."""
        name = (self.model_name or "").lower()
        if self.vendor == "AMD" and "epyc" in name:  # family 0x17/0x19 alone is also Ryzen/Threadripper
            return "amd-epyc"
        if self.vendor == "Intel":
            if (self.family, self.model) == INTEL_SAPPHIRE_RAPIDS:
                return "intel-sapphire-rapids"
            if (self.family, self.model) == INTEL_EMERALD_RAPIDS:
                return "intel-emerald-rapids"
            if self.model is None and _SPR_NAME.search(self.model_name or ""):
                return "intel-sapphire-rapids"
        return None

    def describe(self) -> str:
        parts = [self.vendor or "unknown vendor"]
        if self.model_name:
            parts.append(self.model_name)
        if self.family is not None and self.model is not None:
            parts.append(f"family {self.family:#x} model {self.model:#x}")
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "vendor": self.vendor,
            "model_name": self.model_name,
            "family": self.family,
            "model": self.model,
            "source": self.source,
            "platform": self.platform(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> CpuId | None:
        if not isinstance(d, dict):
            return None
        return cls(
            vendor=normalise_vendor(d.get("vendor")),
            model_name=d.get("model_name") or None,
            family=_int(d.get("family")),
            model=_int(d.get("model")),
            source=d.get("source"),
        )


def _int(v: Any) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v.strip(), 0)
        except ValueError:
            return None
    return None


def normalise_vendor(raw: str | None) -> str | None:
    """``GenuineIntel`` → ``Intel``, ``AuthenticAMD`` → ``AMD``, ``0x41`` → ``Arm``; other text as given."""
    if raw is None:
        return None
    s = str(raw).strip()
    if not s:
        return None
    return VENDORS.get(s.lower(), VENDORS.get(str(raw).lower(), s))


def vendor_from_model_name(name: str | None) -> str | None:
    """The vendor a model name states outright ("AMD EPYC 7763 ...", "Intel(R) Xeon(R) ..."), else None."""
    n = (name or "").lower()
    if n.startswith("amd ") or "epyc" in n or "ryzen" in n:
        return "AMD"
    if n.startswith("intel") or "xeon" in n:
        return "Intel"
    return None


def parse_cpuinfo(text: str, source: str = "/proc/cpuinfo") -> CpuId | None:
    """The first processor's identity in ``/proc/cpuinfo`` text (x86 or Arm), None if it says nothing."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor block is enough: Linux prints the same for each
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    vendor = fields.get("vendor_id") or fields.get("cpu implementer")
    name = fields.get("model name") or fields.get("cpu model") or None
    family = _int(fields.get("cpu family"))
    model = _int(fields.get("model")) if "vendor_id" in fields else None
    if not (vendor or name):
        return None
    return CpuId(normalise_vendor(vendor) or vendor_from_model_name(name), name, family, model, source)


def read_cpuinfo(root: str = "/") -> CpuId | None:
    """``<root>/proc/cpuinfo`` (this machine for ``/``; a sysfs snapshot's copy otherwise), if readable."""
    import os

    from clusterdoctor.errors import InputError
    from clusterdoctor.observe.limits import read_bounded

    path = os.path.join(root, "proc", "cpuinfo")
    try:  # bounded, regular files only (a snapshot's link to /dev/zero or out of its tree is not read)
        text = read_bounded(path, 1 << 20, prefix=True).decode("utf-8", errors="replace")
    except (OSError, InputError):
        return None
    return parse_cpuinfo(
        text, "/proc/cpuinfo" if os.path.abspath(root) == "/" else "proc/cpuinfo of the snapshot"
    )
