"""Nsight Compute ``ncu --csv`` reports, reduced to what the NCCL-kernel rules use.

Two layouts exist: the long one (``--page details`` and ``--metrics`` runs; one row per metric with
``"ID","Process ID",…,"Kernel Name",…,"Section Name","Metric Name","Metric Unit","Metric Value"``)
and the wide one (``--page raw``: one row per kernel, metric names as columns, a second row of
units). ``==PROF==`` progress lines and application output around the CSV are ignored. Values may
carry thousands separators (``"1,234.5"``) and are scaled by their unit to ms, GB/s and percent.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError

_TIME_UNITS = {
    "nsecond": 1e-6,
    "usecond": 1e-3,
    "msecond": 1.0,
    "second": 1e3,
    "ns": 1e-6,
    "us": 1e-3,
    "ms": 1.0,
}
_RATE_UNITS = {
    "byte/second": 1e-9,
    "kbyte/second": 1e-6,
    "mbyte/second": 1e-3,
    "gbyte/second": 1.0,
    "tbyte/second": 1e3,
    "byte/s": 1e-9,
    "gb/s": 1.0,
    "tb/s": 1e3,
}
DURATION = ("gpu__time_duration.sum", "Duration")
L2_PCT = (
    "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "L2 Cache Throughput",
    "SOL L2",
)
DRAM_RATE = ("dram__bytes.sum.per_second", "dram__bytes_read.sum.per_second", "DRAM Bandwidth")
DRAM_PCT = ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput", "SOL FB")
NCCL_KERNEL_RE = re.compile(r"nccl", re.IGNORECASE)


@dataclass
class NcuKernel:
    """One profiled kernel launch and its metrics (name -> (unit, value))."""

    id: str
    name: str
    stream: str | None = None
    device: str | None = None
    metrics: dict[str, tuple[str, float | None]] = field(default_factory=dict)

    @property
    def is_nccl(self) -> bool:
        return bool(NCCL_KERNEL_RE.search(self.name))

    def _first(self, names: tuple[str, ...]) -> tuple[str, float] | None:
        for n in names:
            v = self.metrics.get(n)
            if v is not None and v[1] is not None:
                return v[0], v[1]
        return None

    @property
    def duration_ms(self) -> float | None:
        v = self._first(DURATION)
        if v is None:
            return None
        scale = _TIME_UNITS.get(v[0].lower())
        return v[1] * scale if scale is not None else None

    @property
    def l2_pct(self) -> float | None:
        v = self._first(L2_PCT)
        return v[1] if v else None

    @property
    def dram_gbs(self) -> float | None:
        v = self._first(DRAM_RATE)
        if v is None:
            mt = self.metrics.get("Memory Throughput")  # byte/second-valued in Memory Workload Analysis
            if mt is not None and mt[1] is not None and mt[0].lower() in _RATE_UNITS:
                v = (mt[0], mt[1])
        if v is None:
            return None
        scale = _RATE_UNITS.get(v[0].lower())
        return v[1] * scale if scale is not None else None

    @property
    def dram_pct(self) -> float | None:
        v = self._first(DRAM_PCT)
        return v[1] if v else None

    def stall_share(self, needle: str = "memory_throttle") -> float | None:
        """Share of a stall reason among the stall metrics reported for this kernel (0..1), or None."""
        stalls = {
            n: val
            for n, (_u, val) in self.metrics.items()
            if val is not None and ("stalled_" in n or n.lower().startswith("stall "))
        }
        if not stalls:
            return None
        key = needle.lower()
        hit = sum(v for n, v in stalls.items() if key in n.lower() or key.replace("_", " ") in n.lower())
        tot = sum(v for v in stalls.values() if v > 0)
        if tot <= 0:
            return None
        return hit / tot


@dataclass
class NcuReport:
    path: str
    kernels: list[NcuKernel] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def nccl_kernels(self) -> list[NcuKernel]:
        return [k for k in self.kernels if k.is_nccl]


def _value(text: str) -> float | None:
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def parse_ncu_csv(text: str, path: str = "<ncu csv>") -> NcuReport:
    """Parse ``ncu --csv`` output (long or wide layout). Raises InputError when no CSV table is found."""
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        if line.startswith('"ID"') and "Kernel Name" in line:
            start = i
            break
    if start is None:
        raise InputError('no ncu CSV header ("ID",…,"Kernel Name",…) found', path)
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    try:
        rows = list(csv.reader(io.StringIO("\n".join(body))))
    except csv.Error as e:
        raise InputError(f"bad CSV: {e}", path, start + 1) from None
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    if "ID" not in col or "Kernel Name" not in col:
        raise InputError('the ncu CSV header has no "ID" and "Kernel Name" columns', path, start + 1)
    rep = NcuReport(path)
    if "Metric Name" in col and "Metric Value" in col:
        kernels: dict[str, NcuKernel] = {}
        need = max(col["Metric Value"], col["Kernel Name"], col["Metric Name"])
        for r in rows[1:]:
            if len(r) <= need:
                continue
            kid = r[col["ID"]]
            k = kernels.get(kid)
            if k is None:
                k = kernels[kid] = NcuKernel(
                    kid,
                    r[col["Kernel Name"]],
                    r[col["Stream"]] if "Stream" in col and len(r) > col["Stream"] else None,
                    r[col["Device"]] if "Device" in col and len(r) > col["Device"] else None,
                )
            unit = r[col["Metric Unit"]] if "Metric Unit" in col and len(r) > col["Metric Unit"] else ""
            k.metrics[r[col["Metric Name"]]] = (unit, _value(r[col["Metric Value"]]))
        rep.kernels = list(kernels.values())
    else:
        units: list[str] = [""] * len(header)
        data = rows[1:]
        if data and data[0] and data[0][0] == "":
            units = data[0] + [""] * (len(header) - len(data[0]))
            data = data[1:]
        skip = {
            "ID",
            "Process ID",
            "Process Name",
            "Host Name",
            "Kernel Name",
            "Context",
            "Stream",
            "Device",
            "CC",
        }
        for r in data:
            if len(r) < len(header):
                continue
            k = NcuKernel(
                r[col["ID"]],
                r[col["Kernel Name"]],
                r[col["Stream"]] if "Stream" in col else None,
                r[col["Device"]] if "Device" in col else None,
            )
            for i, name in enumerate(header):
                if name not in skip:
                    k.metrics[name] = (units[i], _value(r[i]))
            rep.kernels.append(k)
    if not rep.kernels:
        rep.warnings.append(f"{path}: the ncu table holds no kernel rows")
    return rep


def load_ncu_csv(path: str | Path) -> NcuReport:
    p = Path(path)
    from clusterdoctor.observe.limits import read_text

    text = read_text(p)
    return parse_ncu_csv(text, str(p))


def sniff_ncu(head: bytes) -> bool:
    return b'"ID","Process ID"' in head or (b"==PROF==" in head and b'"Kernel Name"' in head)
