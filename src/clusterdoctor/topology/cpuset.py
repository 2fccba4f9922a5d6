"""CPU and node list syntax: kernel cpulists ("0-3,8-11"), hex masks ("ff,0000ffff") and back."""

from __future__ import annotations

from collections.abc import Iterable

from clusterdoctor.errors import InputError

MAX_CPU_ID = 1 << 20  # far above any real machine; guards against absurd ranges in garbage input


def parse_cpulist(text: str, *, path: str | None = None) -> tuple[int, ...]:
    """Parse a kernel list such as ``0-3,8-11`` or ``0-31:2`` (stride) into sorted ids.

    An empty string is an empty set (a CPU-less NUMA node prints nothing).
    """
    out: set[int] = set()
    s = text.strip()
    if not s:
        return ()
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        stride = 1
        if ":" in part:
            part, _, st = part.partition(":")
            if "/" in st:  # "0-31:2/4" group syntax (rare): take the stride only
                st = st.split("/", 1)[0]
            if not (st.isascii() and st.isdigit()) or int(st) == 0:
                raise InputError(f"bad stride in cpu list {text!r}", path)
            stride = int(st)
        lo, sep, hi = part.partition("-")
        if not (lo.isascii() and lo.isdigit()) or (sep and not (hi.isascii() and hi.isdigit())):
            raise InputError(f"bad cpu list {text!r}", path)
        a = int(lo)
        b = int(hi) if sep else a
        if b < a or b > MAX_CPU_ID:
            raise InputError(f"bad cpu range {part!r} in {text!r}", path)
        out.update(range(a, b + 1, stride))
    return tuple(sorted(out))


def parse_hexmask(text: str, *, path: str | None = None) -> tuple[int, ...]:
    """Parse a kernel hex mask (``ffffffff,00000000``; NCCL's ``0x...``) into sorted CPU ids."""
    s = text.strip().lower().replace(",", "")
    if s.startswith("0x"):
        s = s[2:]
    if not s:
        return ()
    if len(s) > MAX_CPU_ID // 4 or any(c not in "0123456789abcdef" for c in s):
        raise InputError(f"bad hex cpu mask {text.strip()[:60]!r}", path)
    bits = bin(int(s, 16))[2:][::-1]  # linear in the mask length (shifting a big int is quadratic)
    return tuple(i for i, b in enumerate(bits) if b == "1")


def format_cpulist(cpus: Iterable[int]) -> str:
    """Format ids as a compact kernel list: ``[0,1,2,3,8]`` -> ``"0-3,8"``."""
    ids = sorted(set(cpus))
    if not ids:
        return ""
    parts = []
    start = prev = ids[0]
    for c in ids[1:]:
        if c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = c
    parts.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(parts)
