"""``fi_info`` (libfabric ``util/info.c``): the providers, fabrics and endpoint types libfabric offers.

Its default (short) form prints one block per provider/domain/endpoint type::

    provider: efa
        fabric: EFA-fe80::39:beff:fe6e:c23
        domain: efa_0-rdm
        version: 2.0
        type: FI_EP_RDM
        protocol: FI_PROTO_EFA

A listing is what libfabric can use on the host: read as ``fi_providers`` (one record per block) so that
a paste of it is recognised and says which providers are there. Its failure (``fi_getinfo: -61 (No data
available)``) is a catalogued message (rules/catalog/ib_host.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import numbered

__all__ = ["FiProvider", "load_fi_info", "parse_fi_info", "sniff_fi_info"]

_PROVIDER = re.compile(r"^provider: (?P<v>[\w;.\-]{1,80})\s*$")
_FIELD = re.compile(r"^\s{2,8}(?P<k>fabric|domain|version|type|protocol): (?P<v>\S{1,200})\s*$")
MAX_BLOCKS = 4096


@dataclass
class FiProvider:
    """One ``fi_info`` block."""

    provider: str
    fabric: str = ""
    domain: str = ""
    version: str = ""
    type: str = ""
    protocol: str = ""
    source: str = ""
    line: int = 0


def sniff_fi_info(head: bytes, name: str = "") -> bool:
    """A ``provider:`` line followed by the block's indented ``fabric:`` line."""
    lines = [ln for ln in head[:8192].decode("utf-8", "replace").splitlines() if ln.strip()][:12]
    for i, ln in enumerate(lines[:-1]):
        if _PROVIDER.match(ln.strip()):
            m = _FIELD.match(lines[i + 1])
            return bool(m) and m.group("k") == "fabric"
    return False


def parse_fi_info(text: str, path: str = "<input>") -> tuple[list[FiProvider], list[int]]:
    """The blocks, and the lines that were none of them."""
    blocks: list[FiProvider] = []
    skipped: list[int] = []
    for lineno, line in numbered(text):
        if not line.strip():
            continue
        m = _PROVIDER.match(line.strip())
        if m:
            if len(blocks) < MAX_BLOCKS:
                blocks.append(FiProvider(m.group("v"), source=path, line=lineno))
            continue
        f = _FIELD.match(line)
        if f and blocks:
            setattr(blocks[-1], f.group("k"), f.group("v"))
        else:
            skipped.append(lineno)
    if not blocks:
        raise InputError("fi_info output with no provider block", path, 1)
    return blocks, skipped


def load_fi_info(path: str | Path) -> dict[str, Any]:
    """Loader hook: ``fi_providers`` (and a warning naming the lines not read)."""
    from clusterdoctor.observe.limits import read_text

    p = str(path)
    blocks, skipped = parse_fi_info(read_text(Path(p)), p)
    names = sorted({b.provider for b in blocks})
    out: dict[str, Any] = {
        "fi_providers": blocks,
        "described_as": f"fi_info output ({len(blocks)} block(s): {', '.join(names[:4])})",
    }
    if skipped:
        out["warnings"] = [f"{p}: line(s) {', '.join(map(str, skipped[:6]))} not read (not fi_info output)"]
    return out
