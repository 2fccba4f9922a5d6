"""The CUDA samples' ``p2pBandwidthLatencyTest`` output: which GPU pairs can use peer access, and the copy
bandwidth and latency between them with peer access disabled and enabled.

The format is the sample's own (``Samples/5_Domain_Specific/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest.cu``,
older ``1_Utilities``): ``Device: N, NAME, pciBusID: X, pciDeviceID: Y, pciDomainID:Z`` per GPU,
``Device=A CAN|CANNOT Access Peer Device=B`` per pair, then titled matrices, each a ``D\\D`` (or ``GPU``)
header of device indices and one row per device: ``P2P Connectivity Matrix``, ``Unidirectional
P2P=Disabled Bandwidth Matrix (GB/s)``, ``Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)``,
the ``Bidirectional`` pair, and the latency matrices in us (whose ``CPU`` rows are the host's side).
Pastes are often cut inside a matrix: a matrix is kept with the rows it has.

``nvidia-smi topo -p2p <r|w|n|a|p>`` answers the same question from the driver: a ``GPU0 GPU1 ...``
header and one row per GPU whose cells are ``X`` (self), ``OK`` or why not (``CNS`` chipset, ``GNS``
GPU, ``TNS`` topology not supported, ``NS`` not supported, ``DR`` disabled by regkey, ``U`` unknown),
then its legend. Its cells become the pairs' peer access (``OK`` or not) and ``statuses``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError

__all__ = ["P2PTest", "load_p2p_test", "parse_p2p_test", "sniff_p2p_test"]

MAX_DEVICES = 1024
_DEVICE = re.compile(
    r"^Device: (?P<i>\d{1,4}), (?P<name>[^,\n]{1,120}), pciBusID: (?P<bus>[0-9a-fA-F]{1,8}), "
    r"pciDeviceID: (?P<dev>[0-9a-fA-F]{1,8}), pciDomainID: ?(?P<dom>[0-9a-fA-F]{1,8})"
)
_PEER = re.compile(r"^Device=(?P<a>\d{1,4}) (?P<can>CAN|CANNOT) Access Peer Device=(?P<b>\d{1,4})\s*$")
_TITLE = re.compile(
    r"^(?P<dir>Unidirectional |Bidirectional )?P2P(?: Connectivity Matrix|=(?P<state>Enabled|Disabled) "
    r"(?P<what>Bandwidth|Latency)[^\n]{0,40}Matrix \((?P<unit>GB/s|us)\))\s*$"
)
_HEADER = re.compile(r"^(?:D\\D|GPU)(?:\s+\d{1,4}){1,1024}\s*$")
_CPU_HEADER = re.compile(r"^CPU(?:\s+\d{1,4}){1,1024}\s*$")
_ROW = re.compile(r"^(?P<i>\d{1,4})(?P<vals>(?:\s+-?\d{1,9}(?:\.\d{1,6})?){1,1024})\s*$")
# nvidia-smi topo -p2p: the legend's codes, its header and its rows
P2P_STATUS = {
    "OK": "Status Ok",
    "CNS": "Chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "Topology not supported",
    "NS": "Not supported",
    "DR": "Disabled by regkey",
    "U": "Unknown",
}
_SMI_HEADER = re.compile(r"^GPU0(?:\s+GPU\d{1,4}){0,1023}\s*$")
_SMI_ROW = re.compile(r"^GPU(?P<i>\d{1,4})(?P<vals>(?:\s+(?:X|OK|CNS|GNS|TNS|NS|DR|U)){1,1024})\s*$")


@dataclass
class P2PTest:
    path: str
    devices: dict[int, str] = field(default_factory=dict)  # index -> "NAME (bus X)"
    can_access: dict[tuple[int, int], bool] = field(default_factory=dict)
    # matrix title ("connectivity", "uni-Disabled-Bandwidth", "bi-Enabled-Bandwidth", "Enabled-Latency", ...)
    # -> (row device, column device) -> value
    matrices: dict[str, dict[tuple[int, int], float]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # nvidia-smi topo -p2p: (row GPU, column GPU) -> its cell (OK, CNS, GNS, ...)
    statuses: dict[tuple[int, int], str] = field(default_factory=dict)

    @staticmethod
    def meaning(status: str) -> str:
        """What an nvidia-smi topo -p2p cell means (its legend), or the cell itself."""
        return P2P_STATUS.get(status, status)

    def bandwidth(self, state: str, direction: str = "uni") -> dict[tuple[int, int], float]:
        return self.matrices.get(f"{direction}-{state}-Bandwidth", {})


def _key(t: re.Match[str]) -> str:
    if t.group("state") is None:
        return "connectivity"
    d = (t.group("dir") or "").strip()
    prefix = {"Unidirectional": "uni-", "Bidirectional": "bi-"}.get(d, "")
    # newer samples print a "(P2P Reads)" matrix after the "(P2P Writes)" one: kept apart
    reads = "-reads" if "(P2P Reads)" in t.group(0) else ""
    return f"{prefix}{t.group('state')}-{t.group('what')}{reads}"


def parse_p2p_test(text: str, path: str = "<p2pBandwidthLatencyTest>") -> P2PTest:
    """The devices, peer-access pairs and matrices of the output; InputError when it holds none."""
    out = P2PTest(path)
    cur: str | None = None
    cols: list[int] = []
    smi_cols: list[int] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or len(line) > 16384:
            continue
        if _SMI_HEADER.match(line):
            smi_cols = [int(x[3:]) for x in line.split()]
            continue
        if smi_cols and (r := _SMI_ROW.match(line)):
            a = int(r.group("i"))
            for b, v in zip(smi_cols, r.group("vals").split(), strict=False):
                if v != "X" and a != b:
                    out.statuses[(a, b)] = v
                    out.can_access[(a, b)] = v == "OK"
            continue
        if m := _DEVICE.match(line):
            if len(out.devices) < MAX_DEVICES:
                out.devices[int(m.group("i"))] = f"{m.group('name').strip()} (bus {m.group('bus')})"
            continue
        if m := _PEER.match(line):
            out.can_access[(int(m.group("a")), int(m.group("b")))] = m.group("can") == "CAN"
            continue
        if t := _TITLE.match(line):
            cur, cols = _key(t), []
            out.matrices.setdefault(cur, {})
            continue
        if cur is None:
            continue
        if _HEADER.match(line):
            cols = [int(x) for x in line.split()[1:]]
            continue
        if _CPU_HEADER.match(line):
            cur, cols = None, []  # the host-side rows of a latency matrix are not GPU pairs
            continue
        if (r := _ROW.match(line)) and cols:
            vals = r.group("vals").split()
            for c, v in zip(cols, vals, strict=False):
                out.matrices[cur][(int(r.group("i")), c)] = float(v)
            continue
        cur, cols = None, []  # a line that is not the matrix ends it (the NOTE, the next section)
    out.matrices = {k: v for k, v in out.matrices.items() if v}
    if not out.devices and not out.can_access and not out.matrices:
        raise InputError(
            "no p2pBandwidthLatencyTest devices, peer-access lines or matrices, nor an nvidia-smi topo -p2p "
            "matrix",
            path,
        )
    if out.statuses and not out.matrices and not out.devices:
        return out  # nvidia-smi topo -p2p says which pairs can, not how fast: nothing missing
    for name in ("uni-Enabled-Bandwidth", "uni-Disabled-Bandwidth"):
        if name not in out.matrices:
            out.warnings.append(
                f"{path}: no complete '{name.replace('uni-', 'Unidirectional P2P=').replace('-', ' ')}' "
                "matrix (the paste ends before it): P2P bandwidth is not judged"
            )
            break
    return out


_SNIFF = re.compile(
    rb"\[P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test\]|^Device=\d{1,4} (?:CAN|CANNOT) Access Peer Device=\d"
    rb"|^P2P Connectivity Matrix|^(?:Unidirectional |Bidirectional )P2P=(?:Enabled|Disabled) Bandwidth"
    rb"|^[ \t]*GPU0[ \t]+X(?:[ \t]+(?:X|OK|CNS|GNS|TNS|NS|DR|U)){1,1024}[ \t]*\r?$",
    re.M,
)


def sniff_p2p_test(head: bytes) -> bool:
    return _SNIFF.search(head) is not None


def load_p2p_test(path: str | Path) -> P2PTest:
    from clusterdoctor.observe.limits import read_text

    p = Path(path)
    return parse_p2p_test(read_text(p), str(p))
