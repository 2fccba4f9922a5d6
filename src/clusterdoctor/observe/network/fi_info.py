"""``fi_info`` (libfabric ``util/info.c``): the providers, fabrics and endpoint types libfabric offers.

Its default (short) form prints one block per provider/domain/endpoint type::

    provider: efa
        fabric: EFA-fe80::39:beff:fe6e:c23
        domain: efa_0-rdm
        version: 2.0
        type: FI_EP_RDM
        protocol: FI_PROTO_EFA

A listing is what libfabric can use on the host: read as ``fi_providers`` (one record per block) so that
a paste of it is recognised and says which providers are there. When ``fi_getinfo`` finds nothing that
matches the command's filters, fi_info prints only the negative error code (``-61``: ``-FI_ENODATA``,
"No data available"; pasted under ``$ fi_info -p efa`` in aws/aws-ofi-nccl#1020):
a paste of that one line under an ``fi_info`` command line is read as ``fi_info_failures`` (the code and
the command, whose ``-p`` names the provider asked for). aws-ofi-nccl's own wording of the failure
(``OFI fi_getinfo() call failed: No data available``) is a catalogued message (rules/catalog/ib_host.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import lines_not_read, numbered

__all__ = ["FiInfoFailure", "FiProvider", "load_fi_info", "parse_fi_info", "sniff_fi_info"]

_PROVIDER = re.compile(r"^provider: (?P<v>[\w;.\-]{1,80})\s*$")
_FIELD = re.compile(r"^\s{2,8}(?P<k>fabric|domain|version|type|protocol): (?P<v>\S{1,200})\s*$")
MAX_BLOCKS = 4096
_FAIL = re.compile(
    r"^\s{0,8}(?:fi_getinfo:?\s{0,4})?(?P<code>-\d{1,4})(?:\s{0,4}\((?P<text>[^)\n]{1,80})\))?\s*$"
)
_CMD = re.compile(
    r"^\s{0,8}(?:[$#>]\s{0,4})?(?:sudo\s{1,4})?(?:\S{0,200}/)?fi_info(?:\s(?P<args>.{0,300}))?$"
)
_PROV_ARG = re.compile(r"(?:^|\s)(?:-p\s{0,4}|--provider[= ])(?P<p>[\w;.\-]{1,40})")
# libfabric include/rdma/fi_errno.h: the codes fi_info's failure prints, in words
FI_ERRORS = {-61: "FI_ENODATA: no provider matched", -19: "FI_ENODEV: no such device", -2: "FI_ENOENT"}


@dataclass(frozen=True)
class FiInfoFailure:
    """fi_info printing only fi_getinfo's negative error code."""

    code: int
    command: str
    source: str = ""
    line: int = 0

    @property
    def provider(self) -> str | None:
        m = _PROV_ARG.search(self.command)
        return m.group("p") if m else None


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


def _failure(lines: list[str]) -> tuple[str, int] | None:
    """(command, index of the code line) when the lines are an fi_info command and its error code alone."""
    from clusterdoctor.observe.paste import input_commands

    typed = [c for c in input_commands() if _CMD.match(c)]
    body = [i for i, ln in enumerate(lines) if not _CMD.match(ln)]
    cmds = [ln.strip() for ln in lines if _CMD.match(ln)]
    if len(body) != 1 or not _FAIL.match(lines[body[0]]):
        return None
    command = (typed or cmds or [""])[0]
    return (command, body[0]) if command else None


def sniff_fi_info(head: bytes, name: str = "") -> bool:
    """A ``provider:`` line followed by the block's indented ``fabric:`` line, or an fi_info command line
    and its error code alone."""
    lines = [ln for ln in head[:8192].decode("utf-8", "replace").splitlines() if ln.strip()][:12]
    if len(lines) <= 3 and _failure(lines):
        return True
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
    """Loader hook: ``fi_providers`` (and a warning naming the lines not read), or ``fi_info_failures``."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_origin

    p = str(path)
    text = read_text(Path(p))
    lines = [ln for ln in text.splitlines() if ln.strip()]
    fail = _failure(lines) if len(lines) <= 3 else None
    if fail:
        command, idx = fail
        target = lines[idx]
        lineno = next((n for n, ln in numbered(text, input_origin()) if ln == target), 1)
        m = _FAIL.match(target)
        code = int(m.group("code")) if m else 0
        f = FiInfoFailure(code, command, p, lineno)
        return {
            "fi_info_failures": [f],
            "described_as": f"fi_info failure ({code}: {FI_ERRORS.get(code, 'fi_getinfo error')})",
        }
    blocks, skipped = parse_fi_info(text, p)
    names = sorted({b.provider for b in blocks})
    out: dict[str, Any] = {
        "fi_providers": blocks,
        "described_as": f"fi_info output ({len(blocks)} block(s): {', '.join(names[:4])})",
    }
    if skipped:
        out["warnings"] = [lines_not_read(p, skipped, "fi_info output")]
    return out
