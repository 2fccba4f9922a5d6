"""What every GPU parser shares: decoding text, unquoting Markdown copies, PCI bus ids, unknown values.

Users paste tool output into Markdown (``> `` quotes, code fences) and tickets; the parsers take it
as it comes. ``N/A``, ``[N/A]``, ``[Not Supported]``, ``Unknown Error`` and "Requested functionality
has been deprecated" all mean *unknown* and become ``None``.
"""

from __future__ import annotations

import re

from clusterdoctor.errors import InputError

__all__ = [
    "as_bool",
    "as_float",
    "as_int",
    "decode",
    "is_unknown",
    "norm_bus_id",
    "unquote_lines",
]

_UNKNOWN = {
    "",
    "n/a",
    "[n/a]",
    "na",
    "none",
    "[not supported]",
    "not supported",
    "[unknown error]",
    "unknown error",
    "unknown",
    "[insufficient permissions]",
    "insufficient permissions",
    "[gpu is lost]",
    "gpu is lost",
    "[requested functionality has been deprecated]",
    "requested functionality has been deprecated",
    "[gpu requires reset]",
    "gpu requires reset",
}


def decode(data: bytes | str, path: str | None = None) -> str:
    """Text of ``data`` (UTF-8, undecodable bytes replaced; CR/CRLF -> LF). Refuses binary input."""
    if isinstance(data, bytes):
        if b"\x00" in data[:65536]:
            raise InputError("binary data (NUL bytes), not tool output", path)
        text = data.decode("utf-8", errors="replace")
    else:
        text = data
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


_QUOTE_RE = re.compile(r"^[ \t]{0,3}(?:>[ \t]?)+")
_FENCE_RE = re.compile(r"^[ \t]*(```|~~~)")


def unquote_lines(text: str) -> list[str]:
    """Lines with Markdown quoting removed: a file whose lines mostly start with ``>`` loses that
    prefix; code-fence lines are dropped. Other text is returned as is."""
    lines = text.split("\n")
    quoted = sum(1 for ln in lines if ln.lstrip().startswith(">"))
    nonblank = sum(1 for ln in lines if ln.strip())
    strip_quotes = nonblank > 0 and quoted >= max(1, nonblank // 2)
    out = []
    for ln in lines:
        if strip_quotes:
            ln = _QUOTE_RE.sub("", ln, count=1)
        if _FENCE_RE.match(ln):
            continue
        out.append(ln)
    return out


def is_unknown(v: str | None) -> bool:
    return v is None or v.strip().lower() in _UNKNOWN


_NUM_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def as_float(v: str | None) -> float | None:
    """The first number in ``v`` (units dropped: ``631.95 W`` -> 631.95); None when unknown."""
    if is_unknown(v):
        return None
    m = _NUM_RE.search(v or "")
    if not m:
        return None
    try:
        x = float(m.group(0))
    except ValueError:
        return None
    return x if x == x and abs(x) != float("inf") else None


def as_int(v: str | None) -> int | None:
    """An integer value (``16x`` -> 16, ``0x1F`` hex accepted); None when unknown or not a number."""
    if is_unknown(v):
        return None
    s = (v or "").strip()
    if s.lower().startswith("0x"):
        try:
            return int(s.split()[0], 16)
        except ValueError:
            return None
    x = as_float(s)
    if x is None:
        return None
    try:
        return int(x)
    except (OverflowError, ValueError):
        return None


def as_bool(v: str | None) -> bool | None:
    """``Yes``/``Active``/``Enabled`` -> True, ``No``/``Not Active``/``Disabled`` -> False, else None."""
    if is_unknown(v):
        return None
    s = (v or "").strip().lower()
    if s in ("yes", "active", "enabled", "true", "1", "on"):
        return True
    if s in ("no", "not active", "disabled", "false", "0", "off"):
        return False
    return None


_BUS_RE = re.compile(
    r"(?:PCI:)?(?:(?P<dom>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})(?:\.(?P<fn>[0-7]))?"
)


def norm_bus_id(text: str | None) -> str | None:
    """A PCI address in the form sysfs uses (``0000:75:00.0``), from any spelling the tools print:
    ``00000000:75:00.0`` (nvidia-smi, DCGM), ``PCI:0000:19:00`` (NVRM, no function), ``0002:21:00.0``,
    ``75:00.0`` (lspci without -D: domain 0 assumed). None when ``text`` holds no PCI address."""
    if not text:
        return None
    m = _BUS_RE.search(text.strip())
    if not m:
        return None
    dom = m.group("dom") or "0000"
    dom = dom[-4:] if len(dom) > 4 and set(dom[:-4]) <= {"0"} else dom
    if len(dom) != 4:
        return None
    fn = m.group("fn") or "0"
    return f"{dom}:{m.group('bus')}:{m.group('dev')}.{fn}".lower()
