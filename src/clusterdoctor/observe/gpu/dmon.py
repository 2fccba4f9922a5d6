"""``nvidia-smi dmon`` (and DCGM's Go ``dmon`` sample, which prints the same table) -> :class:`GpuReport`.

dmon prints a header of column names and a line of units, both led by ``#``, then one row per GPU per
sampling interval; the header is repeated every few screens::

    # gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk
    # Idx     W     C     C     %     %     %     %   MHz   MHz
        0    43    35     -     0     0     0     0  2505  1075

The columns depend on ``-s`` (p: pwr gtemp mtemp, u: sm mem enc dec [jpg ofa], c: mclk pclk, v: pviol
tviol, m: fb bar1 [ccpm], e: sbecc dbecc pci, t: rxpci txpci) and ``-o DT`` adds ``Date`` and ``Time``
in front. Drivers before ~450 print ``temp`` for the GPU temperature and no ``mtemp``. ``-`` is a metric
the GPU does not report. The last row of each GPU is its state: index, power, temperatures, SM
utilisation and processor clock. A paste may start with the command line or a tool's banner, and a
Markdown quote may escape the ``#`` (``\\#``).
"""

from __future__ import annotations

import re

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import as_float, as_int, decode, unquote_lines
from clusterdoctor.topology.gpu import GpuReport, GpuState

KIND = "nvidia-smi dmon"

# every column name dmon prints (nvidia-smi(1), "Device Monitoring"), lower case
COLUMNS = frozenset(
    "date time gpu pwr gtemp mtemp temp sm mem enc dec jpg ofa mclk pclk pviol tviol fb bar1 ccpm "
    "sbecc dbecc pci rxpci txpci".split()
)
# column -> GpuState attribute (numbers)
_FIELDS = {
    "pwr": "power_w",
    "gtemp": "temp_c",
    "temp": "temp_c",
    "mtemp": "mem_temp_c",
    "sm": "util_pct",
    "pclk": "sm_clock_mhz",
}
_HEADER = re.compile(r"^\s{0,4}\\?#\s{0,4}(?:Date\s+Time\s+)?gpu\s", re.I)
_COMMENT = re.compile(r"^\s{0,4}\\?#")
MAX_LEAD = 3  # lines before the first header (a command line, a banner)


def _header(line: str) -> list[str] | None:
    """The column names of a dmon header line, or None when the line is not one."""
    if not _HEADER.match(line):
        return None
    names = line.strip().lstrip("\\").lstrip("#").lower().split()
    if len(names) < 2 or names[-1] == "gpu" or not set(names) <= COLUMNS:
        return None
    return names


def _rows(text: str) -> tuple[list[str], list[tuple[int, list[str]]], int]:
    """(columns, data rows with their line numbers, rows skipped) of a dmon output."""
    cols: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    skipped = 0
    lead = 0
    for lineno, line in enumerate(unquote_lines(text), 1):
        if not line.strip():
            continue
        h = _header(line)
        if h is not None:
            if cols is not None and h != cols:
                skipped += 1  # a second table with other columns: only the first is read
            cols = cols or h
            continue
        if cols is None:
            lead += 1
            if lead > MAX_LEAD:
                break
            continue
        if _COMMENT.match(line):
            continue  # the units line, a repeated units line
        vals = line.split()
        if len(vals) == len(cols) and as_int(vals[cols.index("gpu")]) is not None:
            rows.append((lineno, vals))
        else:
            skipped += 1
    return cols or [], rows, skipped


def sniff_dmon(head: bytes) -> bool:
    """Whether ``head`` is ``nvidia-smi dmon`` output: a dmon header then at least one row of its width."""
    cols, rows, _ = _rows(head[:16384].decode("utf-8", errors="replace"))
    return bool(cols) and bool(rows)


def parse_dmon(data: bytes | str, path: str | None = None) -> GpuReport:
    """Each GPU's last dmon row: index, power, temperatures, SM utilisation, processor clock."""
    src = path or "<nvidia-smi dmon>"
    cols, rows, skipped = _rows(decode(data, path))
    if not cols or not rows:
        raise InputError("no '# gpu ...' dmon header followed by a row of its columns", path)
    report = GpuReport(KIND, src)
    report.facts.add("identity")
    gpus: dict[int, GpuState] = {}
    for _lineno, vals in rows:
        row = dict(zip(cols, vals, strict=True))
        idx = as_int(row["gpu"])
        if idx is None:
            continue
        g = gpus.get(idx)
        if g is None:
            g = gpus[idx] = GpuState()
            g.sources.append(src)
            g.set("index", idx, src)
        for col, attr in _FIELDS.items():
            v = row.get(col, "-")
            # the last row wins (the GPU's state when the paste ends); "-" is not reported
            g.set(attr, as_float(v) if v != "-" else None, src)
    report.gpus = [gpus[i] for i in sorted(gpus)]
    if skipped:
        report.warnings.append(f"{src}: {skipped} line(s) that are not rows of the dmon table were skipped")
    return report
