"""PCIe Access Control Services (ACS) settings of bridges and switch ports, as pasted.

NVIDIA's NCCL troubleshooting guide ("PCI Access Control Services (ACS)",
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs)
asks for ``sudo lspci -vvv | grep ACSCtl``: with ACS redirection enabled on a PCIe switch or root port,
peer-to-peer traffic between GPUs (and GPUDirect RDMA between a NIC and a GPU) is sent up to the root
complex, slowly or not at all, and NCCL hangs or crawls. Three shapes are read:

- ``ACSCtl:\\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-`` —
  pciutils' decoding of the ACS Control register, alone (the grep) or inside an ``lspci -vvv`` device
  block (then the port's address is known);
- ``0000:00:07.1 (ecap 000d @2a0) @2a6 0000`` — ``setpci -v -s <bdf> ECAP_ACS+6.w`` (the script NCCL's
  maintainers hand out): the register as a hex word, bit 0 SrcValid, 1 TransBlk, 2 ReqRedir,
  3 CmpltRedir, 4 UpstreamFwd, 5 EgressCtrl, 6 DirectTrans (PCIe Base Specification, ACS Control
  Register);
- ``ACSCap:`` lines (what the port supports) are skipped: capability is not a setting.

A parser only records what is set; which setting matters is the rule's (rules/comm_p2p.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError

__all__ = ["AcsPort", "FLAGS", "REDIRECTING", "parse_acs", "sniff_acs", "load_acs"]

# The ACS Control register's bits, in pciutils' names and order (bit 0 first)
FLAGS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# The settings that send peer traffic up to the root complex (or check its source there): NCCL's guide
# names SrcValid+ as the sign, ReqRedir/CmpltRedir are the redirection itself
REDIRECTING = ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl")

_CTL = re.compile(r"^\s{0,40}ACSCtl:\s{0,8}(?P<flags>(?:[A-Za-z]{1,20}[+-]\s{0,4}){3,12})")
_FLAG = re.compile(r"(?<![A-Za-z])(?P<name>[A-Za-z]{1,20})(?P<v>[+-])")
_SETPCI = re.compile(
    r"^\s*(?P<bdf>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+\(ecap 0*d\s+@[0-9a-fA-F]+\)"
    r"\s+@[0-9a-fA-F]+\s+(?P<hex>[0-9a-fA-F]{1,4})\s*$"
)
_DEV = re.compile(r"^(?P<bdf>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (?P<desc>[^:]+: .*)$")
_DETAIL = re.compile(r"^\s+\S|^\s*Capabilities: \[")  # a line inside an lspci -vvv device block
_ACS_OTHER = re.compile(r"^\s*(?:ACSCap:|Capabilities: \[[0-9a-f]+(?: v\d+)?\] Access Control Services)")


@dataclass
class AcsPort:
    """One port's ACS Control setting: ``flags`` maps each flag name to on/off."""

    flags: dict[str, bool]
    line: int
    source: str
    bdf: str | None = None
    device: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    def enabled(self) -> list[str]:
        """The redirecting flags that are set (empty: ACS does not redirect peer traffic here)."""
        return [f for f in REDIRECTING if self.flags.get(f)]

    def label(self) -> str:
        return self.bdf or f"line {self.line}"


def _from_hex(word: int) -> dict[str, bool]:
    return {name: bool(word >> i & 1) for i, name in enumerate(FLAGS)}


def parse_acs(text: str, path: str | None = None, origin: list[int] | None = None) -> list[AcsPort]:
    """Every ACS Control setting in ``text`` (see the module doc), with the device block it is in;
    ``origin``: the paste's line numbers (observe.paste.numbered)."""
    from clusterdoctor.observe.paste import numbered

    src = path or "<lspci -vvv>"
    out: list[AcsPort] = []
    bdf: str | None = None
    desc = ""
    for lineno, line in numbered(text, origin):
        m = _DEV.match(line)
        if m:
            bdf, desc = m.group("bdf"), m.group("desc").strip()
            continue
        c = _CTL.match(line)
        if c:
            flags = {f.group("name"): f.group("v") == "+" for f in _FLAG.finditer(c.group("flags"))}
            if any(k in flags for k in FLAGS):
                out.append(AcsPort(flags, lineno, src, bdf, desc))
            continue
        s = _SETPCI.match(line)
        if s:
            word = int(s.group("hex"), 16)
            out.append(
                AcsPort(_from_hex(word), lineno, src, s.group("bdf"), attrs={"register": f"{word:04x}"})
            )
    return out


def _lines(head: bytes) -> list[str]:
    return [ln for ln in head.decode("utf-8", "replace").split("\n") if ln.strip()]


def sniff_acs(head: bytes, name: str = "") -> bool:
    """An ACS listing: at least one ACS setting, and every other non-empty line an ACSCap line, the ACS
    capability header or a device line (``lspci -vvv | grep -e '^[0-9]' -e ACS``); or an ``lspci -vvv``
    excerpt cut inside a device block (its first line indented) that holds an ACS setting. A whole
    ``lspci -vvv`` (a device line first, with other capabilities) is the GPU lspci reader's, which reads
    its ACS settings too."""
    lines = _lines(head)
    if not lines:
        return False
    settings = 0
    grep_only = True
    for ln in lines:
        if _CTL.match(ln) or _SETPCI.match(ln):
            settings += 1
        elif not (_ACS_OTHER.match(ln) or _DEV.match(ln)):
            grep_only = False
            if not _DETAIL.match(ln):
                return False
    if settings == 0:
        return False
    return grep_only or not _DEV.match(lines[0])


def load_acs(path: str | Path) -> dict[str, Any]:
    """Loader hook for ``observe.detect``: ``{"pcie_acs": [AcsPort, ...]}``."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_origin

    p = str(path)
    ports = parse_acs(read_text(Path(p)), p, input_origin())
    if not ports:
        raise InputError("no ACSCtl line or setpci ACS read: not an ACS listing", p)
    on = sum(1 for x in ports if x.enabled())
    return {"pcie_acs": ports, "described_as": f"PCIe ACS listing ({len(ports)} port(s), {on} redirecting)"}
