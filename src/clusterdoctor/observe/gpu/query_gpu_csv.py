"""``nvidia-smi --query-gpu=... --format=csv[,nounits]`` -> :class:`~clusterdoctor.topology.gpu.GpuReport`.

Columns are read by header name, never by position: the field list and its order change between
drivers (the 590 and 595 drivers' full lists put ``clocks_event_reasons.active`` at columns 51 and
52). Header names carry units (``power.draw [W]``), values may too (``631.95 W``) unless
``nounits``. ``[N/A]``, ``N/A`` and ``[Not Supported]`` are unknown. Several rows of one GPU (a
``-l`` loop) give timed readings; the last row is the GPU's state. Without a header (``noheader``)
the columns are named by the command line pasted above the rows (``nvidia-smi --query-gpu=... --format=
csv,noheader``), else the file is refused with that reason. ``gpu_recovery_action`` other than None is
the driver's request for a reset or reboot (an event of kind ``recovery_action``).
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import re

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import (
    as_bool,
    as_float,
    as_int,
    decode,
    is_unknown,
    norm_bus_id,
    unquote_lines,
)
from clusterdoctor.observe.paste import input_commands
from clusterdoctor.topology.gpu import CLOCK_REASONS, GpuEvent, GpuReport, GpuState, PcieLink, Reading

__all__ = ["parse_query_gpu_csv", "sniff_query_gpu_csv"]

KIND = "nvidia-smi --query-gpu"
_KNOWN = {
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "gpu_bus_id",
    "driver_version",
    "pstate",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "clocks.sm",
    "clocks.current.sm",
    "pcie.link.gen.current",
    "timestamp",
    "serial",
    "memory.used",
    "gpu_recovery_action",
}


# nvidia-smi --help-query-gpu: the property families (a header whose every column is one of them is a
# --query-gpu header even without an index/uuid/bus id column: `--query-gpu=pstate,pcie.link.gen.max`)
_FAMILIES = (
    "clocks.",
    "clocks_event_reasons.",
    "clocks_throttle_reasons.",
    "pcie.link.",
    "memory.",
    "power.",
    "enforced.power.",
    "temperature.",
    "utilization.",
    "ecc.errors.",
    "ecc.mode.",
    "retired_pages.",
    "remapped_rows.",
    "fan.",
    "encoder.",
    "inforom.",
    "mig.mode.",
    "accounting.",
    "driver_model.",
    "gom.",
    "compute_cap",
    "compute_mode",
    "display_",
    "persistence_mode",
    "vbios_version",
    "count",
    "pci.",
    "gpu_",
)


def _is_property(name: str) -> bool:
    return name in _KNOWN or any(name.startswith(f) for f in _FAMILIES)


def _is_query_header(cols: list[str]) -> bool:
    """A --query-gpu header: two or more known columns with an identity column, or every column a
    --query-gpu property (at least two)."""
    names = [c for c in cols if c]
    known = set(names) & _KNOWN
    if len(known) >= 2 and ("pci.bus_id" in names or "uuid" in names or "index" in names):
        return True
    return len(names) >= 2 and all(_is_property(n) for n in names) and bool(known or len(names) >= 3)


def _name(h: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", h.strip()).strip().lower()


def sniff_query_gpu_csv(head: bytes) -> bool:
    text = head[:16384].decode("utf-8", errors="replace")
    fields = _command_fields("\n".join(text.splitlines()[:10]))
    if len(set(_name(f) for f in fields) & _KNOWN) >= 2:
        return True  # noheader rows under the command line that names their columns
    for line in unquote_lines(text)[:5]:
        if not line.strip() or _is_command_line(line):
            continue
        return _is_query_header([_name(c) for c in line.split(",")])
    return False


def _is_command_line(line: str) -> bool:
    """The `nvidia-smi --query-gpu=...` command line a user pasted above the CSV."""
    return "nvidia-smi" in line and "--query-gpu" in line


def _time(v: str | None) -> float | None:
    """``2026/07/14 08:12:53.353`` (local time of the machine, zone not printed: read as UTC)."""
    if is_unknown(v):
        return None
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return _dt.datetime.strptime((v or "").strip(), fmt).replace(tzinfo=_dt.timezone.utc).timestamp()
        except ValueError:
            continue
    return None


def _sum(*vals: int | None) -> int | None:
    known = [v for v in vals if v is not None]
    return sum(known) if known else None


# `nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv,noheader` typed or pasted above its rows
_QUERY_CMD = re.compile(r"--query-gpu[= ](?P<fields>[\w.,\[\] ]{1,4000}?)(?:\s+-|\s*$)")
# what a user appends to a value to point at it: "1, Reset   <= GPU is unusable"
# (?<!\s): a run of white space is tried from its first character only (linear on a long run)
_MARK = re.compile(r"(?<!\s)(?:\s{2,}<[-=]{1,30}|\s+<[-=]{2,30}).{0,300}$")


def _command_fields(text: str) -> list[str]:
    for line in text.splitlines()[:50]:
        if "nvidia-smi" in line and "--query-gpu" in line and "noheader" in line:
            m = _QUERY_CMD.search(line)
            if m:
                return [f.strip() for f in m.group("fields").split(",") if f.strip()]
    return []


def _is_command(row: list[str]) -> bool:
    return any("nvidia-smi" in c or c.lstrip().startswith("#") for c in row[:1])


def _unmark(row: list[str]) -> list[str]:
    """A row without the user's pointer after its last value (and the cells that pointer split off)."""
    line = ", ".join(row)
    m = _MARK.search(line)
    if m is None:
        return row
    return [c.strip() for c in line[: m.start()].split(",")]


def parse_query_gpu_csv(data: bytes | str, path: str | None = None) -> GpuReport:
    """Parse ``--query-gpu`` CSV with its header line. InputError without a usable header."""
    src = path or "<nvidia-smi --query-gpu>"
    text = "\n".join(ln for ln in unquote_lines(decode(data, path)) if ln.strip())
    # the command line above a CSV with its header (-l N, --format=csv) is not a row
    body = "\n".join(ln for ln in text.splitlines() if not _is_command_line(ln))
    try:
        rows = list(csv.reader(io.StringIO(body), skipinitialspace=True))
    except csv.Error as e:
        raise InputError(f"not CSV: {e}", path) from None
    if not rows:
        raise InputError("empty --query-gpu CSV", path)
    header = [_name(h) for h in rows[0]]
    if len(set(header) & _KNOWN) < 2 and not _is_query_header(header):
        # noheader output: the command line pasted above it (or given as the paste's command) names the
        # columns, in the order nvidia-smi prints them
        fields = _command_fields(text) or _command_fields("\n".join(input_commands()))
        if not fields:
            raise InputError(
                "no --query-gpu header line (noheader output cannot be read by column name; rerun with "
                "--format=csv)",
                path,
                1,
            )
        rows = [[v for v in _unmark(r)] for r in rows if not _is_command(r)]
        rows = [fields] + [r for r in rows if len(r) == len(fields)]
        header = [_name(h) for h in fields]
    report = GpuReport(KIND, src)
    col = {h: i for i, h in reversed(list(enumerate(header)))}
    by_key: dict[str, GpuState] = {}
    for lineno, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            report.warnings.append(
                f"{src}:{lineno}: {len(row)} values for {len(header)} columns; row skipped"
            )
            continue

        def get(*names: str, row: list[str] = row) -> str | None:
            for n in names:
                i = col.get(n)
                if i is not None and not is_unknown(row[i]):
                    return row[i].strip()
            return None

        bus = norm_bus_id(get("pci.bus_id", "gpu_bus_id"))
        idx = as_int(get("index"))
        key = bus or (f"index {idx}" if idx is not None else get("uuid") or f"row {lineno}")
        t = _time(get("timestamp"))
        g = by_key.get(key)
        if g is None:
            g = by_key[key] = GpuState(bus_id=bus)
            g.sources.append(src)

        def put(name: str, value: object, g: GpuState = g) -> None:
            g.set(name, value, src)

        put("index", idx)
        put("model", get("name"))
        put("uuid", get("uuid"))
        put("serial", get("serial"))
        put("driver_version", get("driver_version"))
        put("pstate", get("pstate"))
        put("util_pct", as_float(get("utilization.gpu")))
        put("temp_c", as_float(get("temperature.gpu")))
        put("mem_temp_c", as_float(get("temperature.memory")))
        put("power_w", as_float(get("power.draw", "power.draw.average", "power.draw.instant")))
        put("power_limit_w", as_float(get("enforced.power.limit", "power.limit")))
        put("power_default_limit_w", as_float(get("power.default_limit")))
        put("sm_clock_mhz", as_float(get("clocks.current.sm", "clocks.sm")))
        put("sm_max_mhz", as_float(get("clocks.max.sm", "clocks.max.sm_clock")))
        put("app_sm_mhz", as_float(get("clocks.applications.graphics", "clocks.applications.gr")))
        mask = as_int(get("clocks_event_reasons.active", "clocks_throttle_reasons.active"))
        reasons: dict[str, bool] = {}
        if mask is not None:
            reasons = {name: bool(mask & bit) for name, bit in CLOCK_REASONS.items()}
        else:
            for name in CLOCK_REASONS:
                for prefix in ("clocks_event_reasons.", "clocks_throttle_reasons."):
                    key2 = prefix + ("gpu_idle" if name == "gpu_idle" else name)
                    v = as_bool(get(key2))
                    if v is not None:
                        reasons[name] = v
        if reasons:
            put("clock_reasons", reasons)
        put("ecc_mode", get("ecc.mode.current"))
        for scope in ("volatile", "aggregate"):
            put(
                f"ecc_{scope}_uncorrectable",
                as_int(get(f"ecc.errors.uncorrected.{scope}.total"))
                if get(f"ecc.errors.uncorrected.{scope}.total") is not None
                else _sum(
                    as_int(get(f"ecc.errors.uncorrected.{scope}.dram")),
                    as_int(get(f"ecc.errors.uncorrected.{scope}.sram")),
                    as_int(get(f"ecc.errors.uncorrected.{scope}.device_memory")),
                ),
            )
            put(
                f"ecc_{scope}_correctable",
                as_int(get(f"ecc.errors.corrected.{scope}.total")),
            )
        put("retired_sbe", as_int(get("retired_pages.single_bit_ecc.count", "retired_pages.sbe")))
        put("retired_dbe", as_int(get("retired_pages.double_bit.count", "retired_pages.dbe")))
        put("retired_pending", as_bool(get("retired_pages.pending")))
        put("remap_correctable", as_int(get("remapped_rows.correctable")))
        put("remap_uncorrectable", as_int(get("remapped_rows.uncorrectable")))
        put("remap_pending", as_bool(get("remapped_rows.pending")))
        put("remap_failure", as_bool(get("remapped_rows.failure")))
        action = get("gpu_recovery_action")
        if action and action.strip().lower() not in ("none", "n/a"):
            # the driver says what the GPU needs before it is usable again (R550+: Reset, Reboot,
            # Drain P2P, Drain and Reset)
            g.events.append(GpuEvent("recovery_action", action.strip(), source=src, line=lineno))
        put("fabric_state", get("fabric.state"))
        put("fabric_status", get("fabric.status"))
        pcie = PcieLink(
            gen_current=as_int(get("pcie.link.gen.current", "pcie.link.gen.gpucurrent")),
            gen_max=as_int(get("pcie.link.gen.max", "pcie.link.gen.gpumax")),
            gen_host_max=as_int(get("pcie.link.gen.hostmax")),
            width_current=as_int(get("pcie.link.width.current")),
            width_max=as_int(get("pcie.link.width.max")),
            source=src,
        )
        if any(v is not None for k, v in pcie.__dict__.items() if k != "source"):
            g.pcie = pcie
        for name in ("ecc_volatile_correctable", "ecc_aggregate_correctable", "ecc_volatile_uncorrectable"):
            v = getattr(g, name)
            if v is not None and t is not None:
                g.readings.append(Reading(name, float(v), t, src))
        if t is not None:
            report.time = t if report.time is None else max(report.time, t)
    if not by_key:
        raise InputError("--query-gpu CSV has a header but no data row", path)
    report.gpus = list(by_key.values())
    report.facts.update({"identity", "clocks", "ecc", "remap", "retired_pages", "pcie"})
    return report
