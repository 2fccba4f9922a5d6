"""``ubergemm`` (the DCGM/NVVS GEMM stress plugin, ``/usr/share/nvidia-validation-suite/plugins/cuda*/ubergemm``):
the throughput each GPU reached.

Run by hand across a node's GPUs (``ubergemm --adapters 0,1,... --time_to_run 10 | grep GFlops``), it
ends each adapter's run with one line::

    GEMM [I] (ADAPTER#0)  Ending with 6698.442948608 GFlops

The adapter number is the CUDA device index. A paste may hold the command line on top (``time ...``),
the shell's ``real/user/sys`` lines below and the plugin's other ``GEMM [I]`` lines; those are known and
skipped. Lines that are none of these are named in a warning; no adapter line at all is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import lines_not_read, numbered

__all__ = ["GemmResult", "load_ubergemm", "parse_ubergemm", "sniff_ubergemm"]

_END = re.compile(
    r"^\s{0,8}GEMM \[[A-Z]\] \(ADAPTER#(?P<gpu>\d{1,3})\)\s{1,8}Ending with (?P<gflops>\d{1,9}(?:\.\d{1,12})?) "
    r"GFlops\s*$"
)
_OTHER = re.compile(r"^\s{0,8}GEMM \[[A-Z]\] ")  # the plugin's other lines (start, progress)
_CMD = re.compile(r"^\s{0,8}(?:[$#>]\s{0,4})?(?:time\s{1,4})?\S{0,200}ubergemm\b")
_TIME = re.compile(r"^\s{0,8}(?:real|user|sys)\s{1,8}\d{1,6}m\d{1,3}(?:[.,]\d{1,6})?s\s*$")
MAX_RESULTS = 4096


@dataclass(frozen=True)
class GemmResult:
    """One adapter's final GEMM throughput."""

    gpu: int
    gflops: float
    source: str = ""
    line: int = 0


def sniff_ubergemm(head: bytes, name: str = "") -> bool:
    """An ``(ADAPTER#n)  Ending with ... GFlops`` line within the first lines."""
    text = head[:16384].decode("utf-8", "replace")
    return any(_END.match(ln) for ln in text.splitlines()[:40])


def parse_ubergemm(text: str, path: str = "<input>") -> tuple[list[GemmResult], list[int]]:
    """The adapters' results, and the numbers of the lines that were not ubergemm's."""
    out: list[GemmResult] = []
    skipped: list[int] = []
    for lineno, line in numbered(text):
        m = _END.match(line)
        if m:
            if len(out) < MAX_RESULTS:
                out.append(GemmResult(int(m.group("gpu")), float(m.group("gflops")), path, lineno))
            continue
        if not line.strip() or _OTHER.match(line) or _CMD.match(line) or _TIME.match(line):
            continue
        skipped.append(lineno)
    if not out:
        raise InputError("ubergemm output with no '(ADAPTER#n) Ending with ... GFlops' line", path, 1)
    return out, skipped


def load_ubergemm(path: str | Path) -> dict[str, Any]:
    """Loader hook: ``gemm_results`` (and a warning naming the lines not read)."""
    from clusterdoctor.observe.limits import read_text

    p = str(path)
    res, skipped = parse_ubergemm(read_text(Path(p)), p)
    out: dict[str, Any] = {
        "gemm_results": res,
        "described_as": f"ubergemm output ({len(res)} GPU result(s))",
    }
    if skipped:
        out["warnings"] = [lines_not_read(p, skipped, "ubergemm output")]
    return out
