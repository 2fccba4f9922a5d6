"""Input size limits: every file a loader reads whole goes through :func:`read_input`.

A file over the limit is refused before it is read, with one line naming the file and the limit,
never a MemoryError.
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterdoctor.errors import InputError

__all__ = ["DEFAULT_MAX_INPUT_BYTES", "MAX_INPUT_ENV", "human_size", "max_input_bytes", "read_input"]

# Every file a loader reads whole (metrics dumps, logs, JSON, counter text) is refused above this
# size, before it is read: parsed, such a file takes several times its size in memory (a metrics
# dump about 11x: 13.9 MB of node exporter text held 157 MB of samples here).
MAX_INPUT_ENV = "CLUSTERDOCTOR_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 256 << 20
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def max_input_bytes() -> int:
    """The input size limit: ``$CLUSTERDOCTOR_MAX_INPUT_BYTES`` (bytes, or with a K/M/G suffix),
    else 256 MiB. A value that is not a size is ignored (the default applies)."""
    raw = os.environ.get(MAX_INPUT_ENV, "").strip().upper().removesuffix("B").removesuffix("I")
    unit = raw[-1:] if raw[-1:] in _UNITS else ""
    try:
        n = float(raw[: len(raw) - len(unit)]) * _UNITS[unit]
    except ValueError:
        return DEFAULT_MAX_INPUT_BYTES
    if not 0 < n < float("inf"):  # also NaN ("nan") and "inf", which float() accepts
        return DEFAULT_MAX_INPUT_BYTES
    return max(1, int(n))


def human_size(n: float) -> str:
    """Bytes in words: ``133 KiB``, ``1.5 GiB``."""
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n:.0f} bytes"


def read_input(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of an input file, or :class:`InputError` (one line naming the file) when it cannot
    be read, is larger than ``limit`` (default :func:`max_input_bytes`) or does not fit in memory."""
    p = Path(path)
    cap = max_input_bytes() if limit is None else limit
    try:
        size = p.stat().st_size
        if size > cap:
            raise InputError(
                f"file is {human_size(size)}, larger than the input limit of {human_size(cap)} "
                f"(cut it with tail/grep, or raise {MAX_INPUT_ENV})",
                str(p),
            )
        with p.open("rb") as f:
            data = f.read(cap + 1)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", str(p)) from None
    except MemoryError:
        raise InputError(f"not enough memory to read it (limit {human_size(cap)})", str(p)) from None
    if len(data) > cap:  # grew while being read (a live log)
        raise InputError(f"file grew past the input limit of {human_size(cap)} while being read", str(p))
    return data
