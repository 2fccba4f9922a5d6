"""``perftest`` output (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``, ``ib_*_lat``): the test's header
and its result table.

Formats from linux-rdma/perftest ``src/perftest_parameters.h`` (``RESULT_FMT``: ``#bytes #iterations
BW peak[MiB/sec] BW average[MiB/sec] MsgRate[Mpps]``, ``RESULT_FMT_G`` with ``Gb/sec``, older ``MB/sec``,
``RESULT_FMT_LAT``: ``t_min[usec] t_max[usec] t_typical[usec] t_avg[usec] ...``) and
``perftest_parameters.c`` (the `` Device : mlx5_0``/`` Link type : IB`` header, two fields a line).
Error lines (``Failed status 12``, ``Port number 1 state is Down``) are catalogued messages
(:mod:`clusterdoctor.rules.catalog.ib`), not read here.

A run is data, not a verdict: an 8-byte ``ib_write_bw`` reports a fraction of a Gb/s by design
(message-rate bound), so nothing here judges bandwidth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError
from clusterdoctor.observe.paste import numbered

__all__ = ["PerftestRun", "load_perftest", "parse_perftest", "sniff_perftest"]

MAX_ROWS = 10_000

_TITLE = re.compile(
    r"^\s{0,40}(?P<title>(?:RDMA_Write|RDMA_Read|Send|Atomic (?:FETCH_AND_ADD|CMP_AND_SWAP)|Raw Ethernet|"
    r"RDMA_Write Post List|Send Post List)[\w ]{0,40}? (?:BW|Latency) Test)\s*$"
)
_HEADER_BW = re.compile(
    r"^\s{0,4}#bytes\s+(?:#sl\s+)?#iterations\s+BW peak\[(?P<unit>[A-Za-z]{2,4}/sec)\]\s+BW average\["
)
_HEADER_LAT = re.compile(r"^\s{0,4}#bytes\s+#iterations\s+t_min\[usec\]")
_NUM = r"\d{1,20}(?:\.\d{1,9})?"
_ROW_BW = re.compile(
    rf"^\s{{0,8}}(?P<bytes>\d{{1,12}})\s+(?P<iters>\d{{1,20}})\s+(?P<peak>{_NUM})\s+(?P<avg>{_NUM})\s+(?P<rate>{_NUM})(?:\s+{_NUM}){{0,6}}\s*$"
)
_ROW_LAT = re.compile(
    rf"^\s{{0,8}}(?P<bytes>\d{{1,12}})\s+(?P<iters>\d{{1,20}})\s+(?P<tmin>{_NUM})\s+(?P<tmax>{_NUM})\s+(?P<ttyp>{_NUM})\s+(?P<tavg>{_NUM})(?:\s+{_NUM}){{0,4}}\s*$"
)
_FIELD = re.compile(
    r"^\s{0,8}(?P<key>[A-Za-z][\w.#\-]{0,20}(?: [\w.#\-]{1,20}){0,3})\s{0,20}:\s{0,4}(?P<val>\S[^\t]{0,80}?)\s*$"
)
# two header fields on one line, separated by tabs (as printed) or by spaces (as some pastes turn them)
_SPLIT = re.compile(r"\t+|\s{2,64}+(?=[A-Za-z][\w.#\-]{0,20}(?: [\w.#\-]{1,20}){0,3}\s{1,20}: )")
_RULE = re.compile(r"^-{20,}\s*$")

# Bandwidth units perftest prints, in Gb/s (MiB/sec since 2023, MB/sec before: both 2**20 bytes).
UNIT_GBPS = {"Gb/sec": 1.0, "MiB/sec": 8 * 2**20 / 1e9, "MB/sec": 8 * 2**20 / 1e9}


@dataclass
class PerftestRun:
    """One perftest run: its title, header fields and result rows."""

    title: str | None
    source: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)  # "Device": "mlx5_0", "Link type": "IB", ...
    unit: str | None = None  # of the bandwidth columns
    bw: list[dict[str, float]] = field(default_factory=list)  # bytes, iterations, peak, avg, msgrate
    lat: list[dict[str, float]] = field(
        default_factory=list
    )  # bytes, iterations, t_min, t_max, t_typical, t_avg

    # the GIDs printed under "local address:" and "remote address:" (RoCE and IB with GRH), in order
    gids: list[str] = field(default_factory=list)

    @property
    def device(self) -> str | None:
        return self.fields.get("Device")

    def avg_gbps(self) -> list[tuple[int, float]]:
        """(message size, average bandwidth in Gb/s) per row."""
        k = UNIT_GBPS.get(self.unit or "", 0.0)
        return [(int(r["bytes"]), r["avg"] * k) for r in self.bw] if k else []


def parse_perftest(text: str, path: str = "<perftest>", origin: list[int] | None = None) -> list[PerftestRun]:
    """Every run in ``text``; raises :class:`InputError` when there is no perftest header or table."""
    runs: list[PerftestRun] = []
    cur: PerftestRun | None = None
    table: str | None = None
    for lineno, line in numbered(text, origin):
        if len(line) > 4096 or not line.strip():
            continue
        m = _TITLE.match(line)
        if m:
            cur = PerftestRun(m.group("title").strip(), path, lineno)
            runs.append(cur)
            table = None
            continue
        m = _HEADER_BW.match(line)
        if m or _HEADER_LAT.match(line):
            if cur is None or cur.bw or cur.lat:
                cur = PerftestRun(cur.title if cur else None, path, lineno, dict(cur.fields) if cur else {})
                runs.append(cur)
            table = "bw" if m else "lat"
            if m:
                cur.unit = m.group("unit")
            continue
        if _RULE.match(line):
            continue
        if cur is not None and table == "bw":
            r = _ROW_BW.match(line)
            if r and len(cur.bw) < MAX_ROWS:
                cur.bw.append(
                    {"bytes": float(r["bytes"]), "iterations": float(r["iters"]), "peak": float(r["peak"]),
                     "avg": float(r["avg"]), "msgrate": float(r["rate"])}
                )  # fmt: skip
                continue
        if cur is not None and table == "lat":
            r = _ROW_LAT.match(line)
            if r and len(cur.lat) < MAX_ROWS:
                cur.lat.append(
                    {"bytes": float(r["bytes"]), "iterations": float(r["iters"]), "t_min": float(r["tmin"]),
                     "t_max": float(r["tmax"]), "t_typical": float(r["ttyp"]), "t_avg": float(r["tavg"])}
                )  # fmt: skip
                continue
        if cur is not None and table is None and ":" in line:
            for seg in _SPLIT.split(line):
                f = _FIELD.match(seg)
                if f:
                    cur.fields.setdefault(f.group("key").strip(), f.group("val").strip())
                    if f.group("key").strip() == "GID" and len(cur.gids) < 64:
                        cur.gids.append(f.group("val").strip())  # local address's, then remote's
    runs = [r for r in runs if r.bw or r.lat or r.fields]
    if not runs:
        raise InputError("no perftest header or result table (#bytes #iterations ...)", path, 1)
    return runs


_SNIFF = (
    re.compile(
        rb"^\s{0,40}(?:RDMA_Write|RDMA_Read|Send|Atomic [A-Z_]{3,16})[\w ]{0,40}? (?:BW|Latency) Test\s*$",
        re.M,
    ),
    re.compile(rb"^\s{0,4}#bytes\s+(?:#sl\s+)?#iterations\s+(?:BW peak\[|t_min\[usec\])", re.M),
)


def sniff_perftest(head: bytes, name: str = "") -> bool:
    """True for perftest output (its test title or its result table header)."""
    return b"\x00" not in head[:4096] and any(rx.search(head) for rx in _SNIFF)


def load_perftest(path: str | Path) -> dict[str, Any]:
    """Read perftest output → ``{"perftest": [PerftestRun, ...]}``."""
    from clusterdoctor.observe.limits import read_text
    from clusterdoctor.observe.paste import input_origin

    p = str(path)
    runs = parse_perftest(read_text(Path(p)), p, origin=input_origin())
    title = runs[0].title or "perftest"
    return {
        "perftest": runs,
        "described_as": f"perftest output ({title}, {sum(len(r.bw) + len(r.lat) for r in runs)} result row(s))",
    }
