"""Filesystem usage and quota listings as users paste them next to a failed checkpoint or data write.

* ``df`` (coreutils ``src/df.c``: ``Filesystem  Size  Used Avail Use% Mounted on``, ``-T`` adds ``Type``,
  ``-k``/``-P`` print ``1K-blocks``/``1024-blocks`` and ``Capacity``, ``-i`` prints ``Inodes IUsed IFree
  IUse%``; a long device name wraps its numbers onto the next line) → :class:`FsUsage`;
* quota tables → :class:`QuotaUsage`: ``quota -s`` (``Filesystem  space  quota  limit  grace  files ...``,
  ``*`` after a value over its soft quota), Lustre ``lfs quota`` (``Filesystem  kbytes  quota  limit  grace
  files ...``), GPFS ``mmlsquota`` and the site wrappers built on it (``Filesystem type  KB|blocks  quota
  limit  in_doubt  grace |  files ...``). Whatever the tool, the first three values after the filesystem
  (and its type) are used, soft quota and hard limit; ``0`` is "no limit".

Sizes are converted to bytes: suffixes ``K M G T P E`` are powers of 1024, as ``df -h`` and the quota
tools print them; plain numbers count 1 KiB blocks (``1K-blocks``, ``KB``, ``kbytes``, quota ``blocks``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import numbered

__all__ = ["FsUsage", "QuotaUsage", "load_usage", "parse_df", "parse_quota", "sniff_usage"]

MAX_ROWS = 100_000
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}


@dataclass(frozen=True)
class FsUsage:
    """One ``df`` row."""

    filesystem: str
    mount: str
    source: str
    line: int
    size: int | None  # bytes (inodes with -i)
    used: int | None
    avail: int | None
    use_pct: float | None
    fstype: str | None = None
    inodes: bool = False


@dataclass(frozen=True)
class QuotaUsage:
    """One filesystem's block (or file) quota."""

    filesystem: str
    kind: str  # "blocks" | "files"
    source: str
    line: int
    used: int  # bytes for blocks, a count for files
    soft: int  # 0: none
    hard: int  # 0: none
    grace: str | None = None  # "expired", "6days", "none", "-"
    over_mark: bool = False  # the tool flagged it (`*` after the value)
    qtype: str | None = None  # USR | GRP | FILESET (GPFS), when printed


def _size(tok: str, block: int) -> tuple[int | None, bool]:
    """A size token (``99G``, ``4.0K``, ``1234*``, ``-``) in bytes, and whether it carried a ``*``."""
    star = tok.endswith("*")
    t = tok.rstrip("*")
    m = re.fullmatch(r"(\d{1,20}(?:[.,]\d{1,6})?)\s?([KMGTPEB]?)(?:i?B)?", t, re.I)
    if not m:
        return None, star
    num = float(m.group(1).replace(",", "."))
    unit = m.group(2).upper()
    return int(num * (_UNITS[unit] if unit else block)), star


def _count(tok: str) -> int | None:
    m = re.fullmatch(r"(\d{1,20}(?:\.\d{1,6})?)([kKmMgG]?)\*?", tok)
    if not m:
        return None
    mult = {"": 1, "k": 1000, "m": 10**6, "g": 10**9}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


# --- df -----------------------------------------------------------------------------------------------

_DF_HDR = re.compile(
    r"^Filesystem\s+(?P<type>Type\s+)?(?P<size>Size|Inodes|\d{1,4}[KMG]?-blocks)\s+(?:Used|IUsed)\s+"
    r"(?:Avail|Available|IFree)\s+(?:Use%|Capacity|IUse%)\s+Mounted on\s*$"
)


# a df row without its header (`df -h | grep shm`, a `watch df -h` excerpt): filesystem, size, used, avail,
# use%, mount point (an absolute path)
_DF_SIZE = r"\d{1,20}(?:[.,]\d{1,6})?[KMGTPE]?"
_DF_ROW = re.compile(
    rf"^\S{{1,256}}\s+{_DF_SIZE}\s+{_DF_SIZE}\s+{_DF_SIZE}\s+(?:\d{{1,3}}%|-)\s+/\S{{0,1024}}\s*$"
)
_DF_ROWS_HEADER = "Filesystem Size Used Avail Use% Mounted on"


def _headerless_df(text: str) -> bool:
    """Every non-empty line is a df row (the header cut by a grep or the paste)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (
        bool(lines)
        and len(lines) <= MAX_ROWS
        and all(len(ln) <= 4096 and _DF_ROW.match(ln.strip()) for ln in lines)
    )


def parse_df(text: str, path: str = "<df>", origin: list[int] | None = None) -> list[FsUsage]:
    """``df`` output → rows; raises :class:`InputError` without its header line, unless every line is a
    df row (``df -h | grep shm``: read with df's default columns)."""
    out: list[FsUsage] = []
    header: re.Match[str] | None = None
    if _DF_HDR.search(text) is None and _headerless_df(text):
        header = _DF_HDR.match(_DF_ROWS_HEADER)
    block = 1024
    pending: tuple[str, int] | None = None
    for lineno, line in numbered(text, origin):
        if len(line) > 4096 or not line.strip():
            continue
        h = _DF_HDR.match(line.strip())
        if h:
            header, pending = h, None
            size = h.group("size")
            block = 1 if size == "Inodes" else _block_size(size)
            continue
        if header is None:
            continue
        toks = line.split()
        if pending is not None and not line[:1].isspace() and len(toks) > 1:
            pending = None  # the wrapped name had no numbers after all
        if len(toks) == 1 and pending is None:
            pending = (toks[0], lineno)  # a long device name; its numbers are on the next line
            continue
        if pending is not None:
            toks = [pending[0], *toks]
            lineno = pending[1]
            pending = None
        typed = header.group("type") is not None
        need = 6 + typed
        if len(toks) < need:
            continue
        fs = toks[0]
        fstype = toks[1] if typed else None
        vals = toks[1 + typed : 5 + typed]
        mount = " ".join(toks[5 + typed :])
        inodes = header.group("size") == "Inodes"
        size, used, avail = (_count(t) if inodes else _size(t, block)[0] for t in vals[:3])
        pct_m = re.fullmatch(r"(\d{1,3})%|-", vals[3])
        if pct_m is None:
            continue
        pct = float(pct_m.group(1)) if pct_m.group(1) else None
        if len(out) < MAX_ROWS:
            out.append(FsUsage(fs, mount, path, lineno, size, used, avail, pct, fstype, inodes))
    if header is None:
        raise InputError("no `Filesystem ... Use% Mounted on` header (not df output)", path, 1)
    return out


def _block_size(col: str) -> int:
    m = re.match(r"(\d{1,4})([KMG]?)-blocks", col)
    if not m:
        return 1024  # -h sizes carry their unit; a bare number is then bytes-free anyway
    return int(m.group(1)) * _UNITS[m.group(2) or "B"]


# --- quota tables -------------------------------------------------------------------------------------

_Q_HDR = re.compile(
    r"^\s{0,8}Filesystem\s+(?:type\s+)?(?:blocks|KB|kbytes|space|used|\d{1,4}[KMG]?-blocks)\s+quota\s+limit\b",
    re.I,
)
_NUMISH = re.compile(r"^\d{1,20}(?:[.,]\d{1,6})?[KMGTPEkmgtpe]?(?:i?B)?\*?$")


def parse_quota(text: str, path: str = "<quota>", origin: list[int] | None = None) -> list[QuotaUsage]:
    """A quota table → one :class:`QuotaUsage` per filesystem (blocks, and files when limited)."""
    out: list[QuotaUsage] = []
    header: list[str] | None = None
    pending: tuple[str, int] | None = None
    for lineno, line in numbered(text, origin):
        if len(line) > 4096 or not line.strip():
            continue
        if _Q_HDR.match(line):
            header = [t.lower() for t in line.split()]
            pending = None
            continue
        if header is None:
            continue
        toks = line.split()
        if len(toks) == 1 and not _NUMISH.match(toks[0]):
            pending = (toks[0], lineno)  # lfs quota: a long mount point wraps the numbers
            continue
        if pending is not None and _NUMISH.match(toks[0]):
            toks = [pending[0], *toks]
            lineno = pending[1]
        pending = None
        rows = _quota_row(header, toks, path, lineno)
        if rows and len(out) < MAX_ROWS:
            out.extend(rows)
    if header is None:
        raise InputError("no `Filesystem ... quota limit` header (not a quota listing)", path, 1)
    return out


def _quota_row(header: list[str], toks: list[str], path: str, lineno: int) -> list[QuotaUsage]:
    typed = len(header) > 1 and header[1] == "type"
    i = 2 if typed else 1
    if len(toks) < i + 3 or not all(_NUMISH.match(t) for t in toks[i : i + 3]):
        return []
    fs, qtype = toks[0], (toks[1] if typed else None)
    unit_col = header[i]
    block = 1024 if unit_col in ("blocks", "kb", "kbytes") or unit_col.endswith("-blocks") else 1024
    (used, star), (soft, _), (hard, _) = (_size(t, block) for t in toks[i : i + 3])
    j = i + 3
    if j < len(header) and header[j] == "in_doubt" and j < len(toks) and _NUMISH.match(toks[j]):
        j += 1
    grace = None
    if j < len(toks) and toks[j] != "|" and not _NUMISH.match(toks[j]):
        grace = toks[j]
        j += 1
    rows = [QuotaUsage(fs, "blocks", path, lineno, used or 0, soft or 0, hard or 0, grace, star, qtype)]
    if j < len(toks) and toks[j] == "|":
        j += 1
    # files: used, quota, limit when the header lists them after the block columns
    files_hdr = header[header.index("files") :] if "files" in header else []
    if len(files_hdr) >= 3 and files_hdr[1] == "quota" and len(toks) >= j + 3:
        fu, fs_, fh = (_count(t) for t in toks[j : j + 3])
        if fu is not None and fs_ is not None and fh is not None:
            fgrace = toks[j + 3] if len(toks) > j + 3 and not _NUMISH.match(toks[j + 3]) else None
            rows.append(
                QuotaUsage(fs, "files", path, lineno, fu, fs_, fh, fgrace, toks[j].endswith("*"), qtype)
            )
    return rows


# --- detection and loading ----------------------------------------------------------------------------

_SNIFF_DF = re.compile(
    rb"^Filesystem\s+(?:Type\s+)?(?:Size|Inodes|\d{1,4}[KMG]?-blocks)\s+I?Used\s+\S{1,12}\s+\S{1,8}\s+Mounted on\s*$",
    re.M,
)
_SNIFF_Q = re.compile(
    rb"^\s{0,8}Filesystem\s+(?:type\s+)?(?:blocks|KB|kbytes|space|used|\d{1,4}[KMG]?-blocks)\s+quota\s+limit\b",
    re.M | re.I,
)


def sniff_usage(head: bytes, name: str = "") -> bool:
    """True for ``df`` output (with its header, or rows only) or a quota table."""
    if b"\x00" in head[:4096]:
        return False
    if _SNIFF_DF.search(head) or _SNIFF_Q.search(head):
        return True
    text = head[:16384].decode("utf-8", "replace")
    if len(head) > 16384:  # judge whole lines only
        text = text[: text.rfind("\n") + 1]
    return _headerless_df(text)


def load_usage(path: str | Path) -> dict[str, Any]:
    """Read ``df`` output → ``{"fs_usage": [...]}``, or a quota table → ``{"quotas": [...]}`` (or both)."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_origin

    p = str(path)
    text = read_text(Path(p))
    out: dict[str, Any] = {}
    what = []
    try:
        rows = parse_df(text, p, origin=input_origin())
        out["fs_usage"] = rows
        what.append(f"df output ({len(rows)} filesystems)")
    except InputError:
        pass
    try:
        q = parse_quota(text, p, origin=input_origin())
        out["quotas"] = q
        what.append(f"quota listing ({len({x.filesystem for x in q})} filesystems)")
    except InputError:
        pass
    if not out:
        raise InputError("no df or quota table", p, 1)
    out["described_as"] = " + ".join(what)
    return out
