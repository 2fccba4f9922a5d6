"""Plain ``nvidia-smi`` (the default table) and ``nvidia-smi -L`` -> :class:`GpuReport`.

The table, as every driver since r340 prints it (column widths changed in r525 and r550, the cells did
not)::

    | NVIDIA-SMI 535.230.02             Driver Version: 535.230.02   CUDA Version: 12.2     |
    |-----------------------------------------+----------------------+----------------------+
    | GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
    | Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
    |                                         |                      |               MIG M. |
    |=========================================+======================+======================|
    |   0  Tesla T4                       On  | 00000000:00:1E.0 Off |                    0 |
    | N/A   21C    P8              10W /  70W |      2MiB / 15360MiB |      0%      Default |
    |                                         |                      |                  N/A |
    +-----------------------------------------+----------------------+----------------------+

One GPU is the group of ``|``-rows between two ``+---+`` borders after the ``===`` line: the first row
names index, model, persistence mode, bus id, display and the volatile uncorrectable ECC count; the
second fan, temperature, performance state, power draw and cap, memory use, utilisation and compute
mode; a third (r450+) the MIG mode. Cells are read by position inside their ``|`` column, never by
character offset, so every width reads the same; a model name cut with ``...`` is kept as printed.

``ERR!`` in a cell means nvidia-smi could not read that value from the GPU; in the temperature, power,
performance or ECC cell it means the GPU does not answer (fallen off the bus, or a board fault): the
GPU gets an ``smi_error`` event. ``N/A`` is unknown. The process table below is read for pids.

The table may sit inside a longer paste (a command's output before it, a cut after it): the rows that
belong to it are read, the rest is counted in a warning. A table cut before its first GPU row gives
the driver version only. A fragment without the header (users paste the one GPU row they ask about)
is read when one of its ``|``-rows is a GPU's first row (index, model, persistence mode, then a bus id):
the driver version is then unknown and a warning says the header is missing.

``ERR!`` in the power cell alone, with temperature and performance state read, is a power sensor that
did not answer (seen on healthy cloud VMs, where the maintainers call it transient): a warning on the
report, not a GPU that does not answer.

``nvidia-smi -L``: ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)`` per GPU (MIG devices indented below).
"""

from __future__ import annotations

import re

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import as_float, as_int, decode, is_unknown, norm_bus_id, unquote_lines
from clusterdoctor.topology.gpu import GpuEvent, GpuReport, GpuState

__all__ = [
    "parse_nvidia_smi_list",
    "parse_nvidia_smi_table",
    "sniff_nvidia_smi_list",
    "sniff_nvidia_smi_table",
]

KIND = "nvidia-smi"
KIND_LIST = "nvidia-smi -L"

_HEADER = re.compile(
    r"NVIDIA-SMI (?P<smi>[\d.]{2,20})\s+Driver Version: (?P<drv>[\w.\-]{1,20})(?:\s+CUDA Version: (?P<cuda>[\w.\-/]{1,10}))?"
)
_BORDER = re.compile(r"^\s{0,4}\+[-=+]{10,}\+\s*$")
_SEPARATOR = re.compile(r"^\s{0,4}\|[=+|]{10,}\|\s*$")
_ROW = re.compile(r"^\s{0,4}\|.*\|\s*$")
_FIRST = re.compile(  # the name up to the spaces before the last word (lazy over spaces: quadratic)
    r"^\s*(?P<idx>\d{1,3})(?:\s++(?!(?:On|Off|N/A|ERR!)\s*$)|\s)"
    r"(?P<name>(?>\S+|[^\S\n]+(?!\s*(?:On|Off|N/A|ERR!)\s*$))*)\s+(?P<pm>On|Off|N/A|ERR!)\s*$"
)
_BUS = re.compile(r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+(?P<disp>\S+)")
_POWER = re.compile(r"(?<!\S)(?P<use>\S{1,64})\s*/\s*(?P<cap>\S{1,64}+)\s*+$")  # from a word's start, bounded
_PROC = re.compile(
    r"^\s*(?P<gpu>\d{1,3})\s+(?:\S+\s+\S+\s+)?(?P<pid>\d{1,10})\s+[CGM+]{1,3}\s+(?P<name>\S.*?)\s+\S+MiB\s*$"
)
# a paste may lose the closing parenthesis of its last line (CPU-X#115): a whole 8-4-4-4-12 UUID
# without it is still the line
_LIST = re.compile(
    r"^GPU (?P<idx>\d{1,3}): (?P<name>.+?) \(UUID: (?P<uuid>GPU-[0-9A-Fa-f-]{8,64})(?:\)|(?<=-[0-9A-Fa-f]{12}))\s*$"
)
_MIG_LIST = re.compile(r"^\s+MIG \S+\s+Device\s+\d+: \(UUID: MIG-")
# what -L prints for a GPU NVML cannot open, in place of its line ("Unable to determine the device
# handle for gpu 0000:18:00.0: Unknown Error"): the GPU is named by its bus id (NVML103 judges the text)
_LIST_ERR = re.compile(
    r"^Unable to determine the device handle for (?:GPU|gpu) ?(?:\d{1,3}: )?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
    r"[0-9A-Fa-f]{2}\.[0-7]): (?P<err>\S.{0,100})$"
)
# the command the user ran, pasted as its first line ("$ nvidia-smi -L", "root@node:~# nvidia-smi --list-gpus"),
# behind a label the user put before the prompt ("(host) # nvidia-smi -L", NVIDIA/nvidia-container-toolkit#1227),
# or the bare command without a prompt (CPU-X#115)
_LIST_PROMPT = re.compile(
    r"^(?:(?:\([^()\n]{1,40}\)\s{0,4})?\S{0,80}?[$#>]\s{0,4})?nvidia-smi\s{1,4}(?:-L|--list-gpus)\s*$"
)


def _list_lines(text: str) -> list[str]:
    """The non-blank lines of a -L paste, without the command line the user pasted above them."""
    lines = [ln.rstrip() for ln in unquote_lines(text) if ln.strip()]
    if lines and _LIST_PROMPT.match(lines[0].strip()):
        lines = lines[1:]
    return lines


ERR = "ERR!"


def sniff_nvidia_smi_table(head: bytes) -> bool:
    """Whether ``head`` holds the ``nvidia-smi`` table header (``| NVIDIA-SMI … Driver Version: …``), or
    a fragment of the table: a border line and a GPU's first row (see :func:`_gpu_row_at`)."""
    text = head[:65536].decode("utf-8", errors="replace")
    if re.search(r"^\s{0,4}\|\s*NVIDIA-SMI [\d.]{2,20}\s+Driver Version:", text, re.M):
        return True
    lines = unquote_lines(text)
    return any(_BORDER.match(ln) for ln in lines) and _gpu_row_at(lines) is not None


def _gpu_row_at(lines: list[str]) -> int | None:
    """The index of the first line that is a GPU's first table row (``|   1  Tesla V100-PCIE...  On  |
    00008ED0:00:00.0 Off |   0 |``): three cells, the first an index, a model and a persistence mode, the
    second a bus id and the display state."""
    for i, ln in enumerate(lines):
        if not _ROW.match(ln):
            continue
        cells = _cells(ln)
        if len(cells) >= 3 and _FIRST.match(cells[0]) and _BUS.search(cells[1]):
            return i
    return None


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_nvidia_smi_table(data: bytes | str, path: str | None = None) -> GpuReport:
    """GPUs of an ``nvidia-smi`` table. InputError when the text holds no table header."""
    src = path or "<nvidia-smi>"
    lines = unquote_lines(decode(data, path))
    header_at = next((i for i, ln in enumerate(lines) if _HEADER.search(ln) and _ROW.match(ln)), None)
    report = GpuReport(KIND, src)
    report.facts.update({"identity", "ecc"})
    driver: str | None = None
    if header_at is None:
        first_row = _gpu_row_at(lines)
        if first_row is None or not any(_BORDER.match(ln) for ln in lines):
            raise InputError(
                "no '| NVIDIA-SMI … Driver Version: …' table header: not nvidia-smi output", path
            )
        report.warnings.append(
            f"{src}: a fragment of the nvidia-smi table without its header (driver version unknown)"
        )
        sep: int | None = first_row - 1  # the GPU rows start here, as after the === separator
        used: set[int] = set()
    else:
        m = _HEADER.search(lines[header_at])
        assert m is not None
        driver = m.group("drv")
        report.attrs["driver_version"] = driver
        if m.group("cuda"):
            report.attrs["cuda_version"] = m.group("cuda")
        used = {header_at}
        # the GPU rows: after the first === separator, groups of |-rows closed by a +---+ border
        sep = next((i for i in range(header_at + 1, len(lines)) if _SEPARATOR.match(lines[i])), None)
        i = header_at + 1
        while i < (sep if sep is not None else len(lines)):
            used.add(i)  # the column titles and borders between the header and the first separator
            i += 1
    groups: list[list[tuple[int, str]]] = []
    if sep is not None:
        if sep >= 0:
            used.add(sep)
        cur: list[tuple[int, str]] = []
        for j in range(sep + 1, len(lines)):
            ln = lines[j]
            if _BORDER.match(ln) or _SEPARATOR.match(ln):
                used.add(j)
                if cur:
                    groups.append(cur)
                    cur = []
                if _BORDER.match(ln) and j + 1 < len(lines) and not _ROW.match(lines[j + 1]):
                    break  # the table's last border
                continue
            if not _ROW.match(ln):
                break
            cells = _cells(ln)
            if len(cells) < 3:
                break  # the process table or a MIG table: other columns
            used.add(j)
            cur.append((j + 1, ln))
        if cur:
            groups.append(cur)
            report.warnings.append(f"{src}: the table ends inside a GPU row (cut short)")
    for grp in groups:
        g = _gpu(grp, src, driver, report.warnings)
        if g is not None:
            report.gpus.append(g)
    _processes(lines, report, used)
    if not report.gpus:
        report.warnings.append(f"{src}: nvidia-smi table without any GPU row (cut short?)")
    others = [
        n
        for n, ln in enumerate(lines)
        if ln.strip()
        and n not in used
        and not _is_table_noise(ln)
        and not _ROW.match(ln)
        and not _BORDER.match(ln)
    ]
    if others:
        report.warnings.append(f"{src}: {len(others)} line(s) outside the nvidia-smi table were not read")
    if any(g.events for g in report.gpus):
        report.facts.add("smi_errors")
    return report


_WEEKDAY = re.compile(r"^\s*(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\s*$")


def _is_table_noise(line: str) -> bool:
    """The timestamp nvidia-smi prints above its table."""
    return bool(_WEEKDAY.match(line))


def _gpu(rows: list[tuple[int, str]], src: str, driver: str | None, warnings: list[str]) -> GpuState | None:
    first_no, first = rows[0]
    c1 = _cells(first)
    m = _FIRST.match(c1[0])
    if m is None:
        return None
    g = GpuState()
    g.set("index", int(m.group("idx")), src)
    name = m.group("name").strip()
    g.set("model", None if is_unknown(name) else name, src)
    g.set("driver_version", driver, src)
    bm = _BUS.search(c1[1]) if len(c1) > 1 else None
    if bm:
        g.set("bus_id", norm_bus_id(bm.group("bus")), src)
    errs: list[str] = []
    if len(c1) > 2:
        ecc = c1[2].strip()
        if ecc == ERR:
            errs.append("volatile uncorrectable ECC")
        else:
            g.set("ecc_volatile_uncorrectable", as_int(ecc), src)
    if len(rows) > 1:
        c2 = _cells(rows[1][1])
        parts = c2[0].split()
        # Fan Temp Perf Pwr:Usage/Cap
        pw_cell = c2[0].rsplit("/", 1)[0].split()[-1:] if "/" in c2[0] else []
        answers = len(parts) >= 3 and parts[1] != ERR and bool(re.fullmatch(r"P\d{1,2}", parts[2]))
        if parts and parts[0] == ERR and all(p != ERR for p in parts[1:]):
            pass  # only the fan is unreadable: a fan sensor, not a lost GPU
        elif answers and pw_cell == [ERR] and parts[3:].count(ERR) == 1 and parts[0] != ERR:
            # only the power draw: the GPU reads its temperature and P-state, so it answers
            warnings.append(
                f"{src}:{rows[1][0]}: GPU {m.group('idx')}: power draw ERR! (the power sensor did not answer; "
                "temperature and P-state read: the GPU answers)"
            )
        elif ERR in parts:
            errs.append("fan/temperature/power")
        if len(parts) >= 2 and parts[1] != ERR:
            g.set("temp_c", as_float(parts[1]), src)
        if len(parts) >= 3 and re.fullmatch(r"P\d{1,2}", parts[2]):
            g.set("pstate", parts[2], src)
        pw = _POWER.search(c2[0])
        if pw:
            g.set("power_w", as_float(pw.group("use")), src)
            g.set("power_limit_w", as_float(pw.group("cap")), src)
        if len(c2) > 2:
            util = c2[2].split()
            if util and util[0] != ERR:
                g.set("util_pct", as_float(util[0]), src)
            elif util:
                errs.append("utilisation")
    if errs:
        g.events.append(
            GpuEvent(
                "smi_error",
                f"nvidia-smi shows ERR! for {', '.join(errs)}: the GPU does not answer",
                source=src,
                line=first_no,
            )
        )
    g.sources.append(src)
    return g


def _processes(lines: list[str], report: GpuReport, used: set[int]) -> None:
    by_index = {g.index: g for g in report.gpus}
    start = next((i for i, ln in enumerate(lines) if "Processes:" in ln and _ROW.match(ln)), None)
    if start is None:
        return
    for j in range(start, len(lines)):
        ln = lines[j]
        if not (_ROW.match(ln) or _BORDER.match(ln)):
            break
        used.add(j)
        m = _PROC.match(ln.strip().strip("|"))
        if m:
            g = by_index.get(int(m.group("gpu")))
            if g is not None:
                g.processes.append((int(m.group("pid")), m.group("name").strip()))


def sniff_nvidia_smi_list(head: bytes) -> bool:
    """Whether ``head`` is ``nvidia-smi -L`` output (every line a GPU or MIG device line)."""
    text = head[:16384].decode("utf-8", errors="replace")
    lines = _list_lines(text)[:64]
    return (
        bool(lines)
        and bool(_LIST.match(lines[0]) or _LIST_ERR.match(lines[0]))
        and any(_LIST.match(ln) for ln in lines)
        and all(_LIST.match(ln) or _MIG_LIST.match(ln) or _LIST_ERR.match(ln) for ln in lines)
    )


def parse_nvidia_smi_list(data: bytes | str, path: str | None = None) -> GpuReport:
    """GPUs of ``nvidia-smi -L``: index, model and UUID. InputError when no GPU line is found."""
    src = path or "<nvidia-smi -L>"
    report = GpuReport(KIND_LIST, src)
    report.facts.add("identity")
    skipped = 0
    for line in _list_lines(decode(data, path)):
        m = _LIST.match(line)
        if m is None:
            e = _LIST_ERR.match(line)
            if e is not None and norm_bus_id(e.group("bus")):
                # the GPU NVML could not open: known by its bus id only (its error is a known message)
                g = GpuState(bus_id=norm_bus_id(e.group("bus")))
                g.sources.append(src)
                report.gpus.append(g)
            elif not _MIG_LIST.match(line):
                skipped += 1
            continue
        g = GpuState()
        g.set("index", int(m.group("idx")), src)
        g.set("model", m.group("name").strip(), src)
        g.set("uuid", m.group("uuid"), src)
        g.sources.append(src)
        report.gpus.append(g)
    if not report.gpus:
        raise InputError("no 'GPU n: <model> (UUID: GPU-…)' line: not nvidia-smi -L output", path)
    if skipped:
        report.warnings.append(f"{src}: {skipped} line(s) that are not nvidia-smi -L lines were skipped")
    return report
