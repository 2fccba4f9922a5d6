"""``dcgmi diag -r 1/2/3``, ``dcgmi discovery -l`` and ``dcgmi health -c`` tables -> GPU events / identities.

All three print ASCII tables (``+---+---+`` borders, ``| name | value |`` rows). Long values wrap
onto continuation rows whose first cell is empty. ``dcgmi diag`` cuts its text at a fixed width, in
the middle of words and numbers (``cudaDeviceGetByPCI`` / ``BusId``, ``00000`` / ``000:1B:00.0``);
``dcgmi health`` wraps at word boundaries. Both are rejoined by taking each continuation chunk at
the table's chunk width, then collapsing blanks.

- diag: sections (``-----  Deployment  ---``), one row per test with ``Pass``/``Fail``/``Skip``/
  ``Warn`` and ``- All`` or ``- GPU: 0`` / ``- GPUs: 1, 2``; a test may span rows (``Pass - GPUs: 1-7``
  then ``Fail - GPU: 0``); ``Warning``/``Error``/``Info`` rows explain the row above. A failure
  becomes a ``diag`` event on each GPU named (``All`` = every GPU; the text's ``GPU n`` when
  present).
- discovery: ``| 0 | Name: NVIDIA H800 |`` with ``PCI Bus ID`` and ``Device UUID`` rows; ``N NvSwitches found.``
- health: ``Health Monitor Report``, ``Overall Health``, per entity ``-> 0 | Warning`` (or
  ``GPU ID: 0``) and per system ``-> PCIe system | Warning`` with the incident text; ``-j`` JSON: the
  overall verdict.
"""

from __future__ import annotations

import re

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import decode, norm_bus_id, unquote_lines
from clusterdoctor.topology.gpu import GpuEvent, GpuReport, GpuState

__all__ = ["parse_dcgmi", "sniff_dcgmi"]

_RESULT = re.compile(
    r"^(?P<res>Pass|Fail|Skip|Warn|Not Run|FAIL|PASS|SKIP|WARN)\b(?:\s*-\s*(?P<who>.*))?$", re.I
)
_GPU_IN_TEXT = re.compile(r"\bGPU:?\s*(\d+)\b")


_OVERALL_ROW = re.compile(r"^\|\s*Overall Health\s*\|\s*(?:Healthy|Warning|Failure|Incompatible)\b", re.M)
_ENTITY_ROW = re.compile(r"^\|\s*-> ", re.M)


def sniff_dcgmi(head: bytes) -> bool:
    text = head[:32768].decode("utf-8", errors="replace")
    if "| Diagnostic" in text and "| Result" in text:
        return True
    if re.search(r"^\s*\d+ GPUs? found\.", text, re.M) and "Device Information" in text:
        return True
    if "Health Monitor Report" in text and ("|" in text or '"Overall Health"' in text):
        return True
    # an excerpt of `dcgmi health -c` from its "Overall Health" row on (the banner left out)
    return _OVERALL_ROW.search(text) is not None and _ENTITY_ROW.search(text) is not None


# the name up to the first spaces followed by "--" (a lazy name over spaces rescanned them: quadratic)
_SECTION_LINE = re.compile(r"^\s*+[|+]-{3,}+\s++(?P<name>[A-Za-z](?>[A-Za-z/]+| +(?!\s*-{2}))*)\s+-{2,}")


def _rows(lines: list[str]) -> list[tuple[int, list[str]]]:
    """Table rows as raw cells (text between ``|``), without border lines; a section banner
    (``+-----  Hardware  ---+``) is returned as the single cell ``-- Hardware``."""
    out = []
    for lineno, ln in enumerate(lines, 1):
        s = ln.rstrip()
        sm = _SECTION_LINE.match(s)
        if sm:
            out.append((lineno, ["-- " + sm.group("name").strip()]))
            continue
        if not s.lstrip().startswith("|"):
            continue
        inner = s.strip()
        if re.fullmatch(r"[|+=\-\s]*", inner) and "  " not in inner.strip("|+=- "):
            continue
        cells = inner.split("|")
        if cells and cells[0] == "":
            cells = cells[1:]
        if cells and cells[-1] == "":
            cells = cells[:-1]
        out.append((lineno, cells))
    return out


def _join(chunks: list[str]) -> str:
    """Rejoin a wrapped cell. ``dcgmi diag`` cuts at a fixed width (the cell's width less its margin),
    mid-word: its full chunks are concatenated as they are. ``dcgmi health`` wraps at words and pads:
    its chunks are joined with a blank. Blanks are collapsed at the end."""
    raw = [c[1:] if c.startswith(" ") else c for c in chunks]
    if len(raw) < 2:
        return " ".join("".join(raw).split())
    cell = max(len(c) for c in raw)
    longest = max(len(c.rstrip()) for c in raw)
    if longest >= cell - 2:  # fixed-width cut: full chunks fill the cell up to its margin
        text = "".join(c[:longest].ljust(longest) for c in raw[:-1]) + raw[-1]
    else:
        text = " ".join(c.strip() for c in raw)
    return " ".join(text.split())


def _gpu_ids(who: str | None, text: str = "") -> list[int] | None:
    """GPU ids a result names: ``All`` -> None (every GPU); ``GPU: 0`` / ``GPUs: 1, 2, 3``."""
    if who is None or who.strip().lower().startswith("all"):
        return None
    ids = [int(x) for x in re.findall(r"\d+", who.split(":", 1)[1] if ":" in who else who)]
    return ids


def _parse_diag(lines: list[str], src: str, report: GpuReport) -> None:
    rows = _rows(lines)
    section = ""
    gpus: dict[int, GpuState] = {}
    results: list[dict] = []
    i = 0
    while i < len(rows):
        lineno, cells = rows[i]
        first = cells[0] if cells else ""
        if len(cells) == 1 and first.startswith("-- "):
            section = first[3:]
            i += 1
            continue
        if len(cells) < 2:
            i += 1
            continue
        name, value = cells[0].strip(), cells[1]
        # gather continuation rows (empty first cell)
        conts = [value]
        j = i + 1
        while j < len(rows) and len(rows[j][1]) >= 2 and not rows[j][1][0].strip():
            conts.append(rows[j][1][1])
            j += 1
        i = j
        if name in ("Diagnostic",) or section == "Metadata":
            if section == "Metadata":
                report.attrs.setdefault("metadata", {})[name] = _join(conts)
            continue
        if name.lower() in ("warning", "error", "info"):
            text = _join(conts)
            if results and name.lower() != "info":
                results[-1]["messages"].append((name, text, lineno))
            elif name.lower() == "error" and section:
                # an Error row with no test above (the Deployment fragment): a failure of the section
                results.append(
                    {
                        "test": section,
                        "section": section,
                        "result": "Fail",
                        "who": None,
                        "line": lineno,
                        "messages": [(name, text, lineno)],
                    }
                )
            continue
        # a test row: every chunk that starts with a result word is its own result
        started = False
        for chunk in conts:
            rm = _RESULT.match(chunk.strip())
            if rm:
                results.append(
                    {
                        "test": name,
                        "section": section,
                        "result": rm.group("res").title(),
                        "who": rm.group("who"),
                        "line": lineno,
                        "messages": [],
                    }
                )
                started = True
        if not started:
            report.warnings.append(f"{src}:{lineno}: test {name!r} has no Pass/Fail/Skip result")
    report.attrs["diag_results"] = [
        {k: v for k, v in r.items() if k != "messages"} | {"messages": [m[1] for m in r["messages"]]}
        for r in results
    ]
    ids_text = (report.attrs.get("metadata") or {}).get("GPU Device IDs Detected", "")
    n_gpus = len([x for x in ids_text.split(",") if x.strip()])
    for r in results:
        if r["result"] not in ("Fail", "Warn"):
            continue
        ids = _gpu_ids(r["who"])
        text = " ".join(m[1] for m in r["messages"])
        if ids is None and r["who"] is None:
            # no "- All"/"- GPU: n" part (a published fragment): the GPUs its text names
            ids = sorted({int(x) for x in _GPU_IN_TEXT.findall(text)}) or None
        elif ids is None:
            ids = list(range(n_gpus)) if n_gpus else None
        bus = (
            norm_bus_id(re.search(r"bus ID = (\S+)", text).group(1))
            if re.search(r"bus ID = (\S+)", text)
            else None
        )
        msg = f"dcgmi diag {r['section'] + ': ' if r['section'] else ''}{r['test']}: {r['result']}" + (
            f" — {text}" if text else ""
        )
        ev_attrs = {
            "test": r["test"],
            "section": r["section"],
            "result": r["result"],
            "applies_to": r["who"] or "All",
        }
        if ids is None:
            report.events.append(GpuEvent("diag", msg, source=src, line=r["line"], attrs=ev_attrs))
            continue
        for gid in ids:
            g = gpus.get(gid)
            if g is None:
                g = gpus[gid] = GpuState(index=gid)
                g.sources.append(src)
            named_bus = re.search(rf"GPU {gid}, bus ID = (\S+)", text)
            if named_bus:
                g.bus_id = norm_bus_id(named_bus.group(1))
            elif bus and len(ids) == 1:
                g.bus_id = bus
            g.events.append(GpuEvent("diag", msg, source=src, line=r["line"], attrs=dict(ev_attrs)))
    report.gpus = [gpus[k] for k in sorted(gpus)]
    report.facts.add("diag")


def _parse_discovery(lines: list[str], src: str, report: GpuReport) -> None:
    cur: GpuState | None = None
    for _lineno, cells in _rows(lines):
        if len(cells) < 2:
            continue
        idc, info = cells[0].strip(), cells[1].strip()
        if idc.isdigit():
            cur = GpuState(index=int(idc))
            cur.sources.append(src)
            report.gpus.append(cur)
        if cur is None:
            continue
        k, _, v = info.partition(":")
        v = v.strip()
        if k == "Name":
            cur.model = v
        elif k == "PCI Bus ID":
            cur.bus_id = norm_bus_id(v)
        elif k == "Device UUID":
            cur.uuid = v
    for ln in lines:
        m = re.match(r"^\s*(\d+) NvSwitch(?:es)? found", ln)
        if m:
            report.attrs["nvswitches"] = int(m.group(1))
    report.facts.add("identity")


def _parse_health(lines: list[str], src: str, report: GpuReport) -> None:
    gpus: dict[int, GpuState] = {}
    rows = _rows(lines)
    cur: GpuState | None = None
    system: str | None = None
    health: str | None = None
    chunks: list[str] = []
    group = "GPU"
    sys_line = 0  # the line of the current system's row

    def flush(lineno: int) -> None:
        nonlocal chunks
        if cur is not None and system and health and health != "Healthy":
            text = _join(chunks) if chunks else ""
            cur.events.append(
                GpuEvent(
                    "health",
                    f"dcgmi health {system}: {health}" + (f" — {text}" if text else ""),
                    source=src,
                    line=sys_line or lineno,
                    attrs={"system": system, "health": health, "detail": text},
                )
            )
        chunks = []

    for lineno, cells in rows:
        if len(cells) < 2:
            continue
        left, right = cells[0].strip(), cells[1]
        if left.startswith("Overall Health"):
            report.attrs["overall_health"] = right.strip() or left.split(":", 1)[-1].strip()
            continue
        if left in ("GPU", "NvSwitch", "Switch", "CPU", "ConnectX", "CX"):
            group = left
            continue
        em = re.match(r"^(?:->\s*|GPU ID:\s*)(\d+)$", left)
        if em and (group == "GPU" or left.startswith("GPU ID")):
            flush(lineno)
            system = None
            gid = int(em.group(1))
            cur = gpus.get(gid)
            if cur is None:
                cur = gpus[gid] = GpuState(index=gid)
                cur.sources.append(src)
            continue
        sm = re.match(r"^->\s*(.+)$", left)
        if sm and cur is not None and sm.group(1) != "Errors":
            flush(lineno)
            system, sys_line = sm.group(1).strip(), lineno
            health = right.strip().split()[0] if right.strip() else None
            continue
        if not left and system:
            chunks.append(right)
    flush(0)
    report.gpus = [gpus[k] for k in sorted(gpus)]
    report.facts.add("health")


def _parse_health_json(text: str, src: str, report: GpuReport) -> None:
    """``dcgmi health -c -j``: ``{"body": {"Overall Health": {"value": "Healthy"}, ...}, "header":
    ["Health Monitor Report"]}``. The overall verdict is read; a verdict other than Healthy is a health
    event (on the GPU the report names when it names one entity, else on a GPU not named)."""
    import json

    start, end = text.find("{"), text.rfind("}")
    try:
        doc = json.loads(text[start : end + 1]) if 0 <= start < end else None
    except ValueError:
        doc = None
    body = doc.get("body") if isinstance(doc, dict) else None
    overall = body.get("Overall Health") if isinstance(body, dict) else None
    value = overall.get("value") if isinstance(overall, dict) else None
    if not isinstance(value, str):
        raise InputError("dcgmi health JSON without an Overall Health value", src)
    report.facts.add("dcgm_health")
    report.attrs["dcgm_overall_health"] = value
    if value.strip().lower() == "healthy":
        return
    g = GpuState()
    g.sources.append(src)
    g.events.append(
        GpuEvent("health", f"DCGM overall health {value}", source=src, attrs={"health": value.strip()})
    )
    report.gpus.append(g)


def parse_dcgmi(data: bytes | str, path: str | None = None) -> GpuReport:
    """Parse ``dcgmi diag``, ``dcgmi discovery -l`` or ``dcgmi health -c`` output (detected by content)."""
    src = path or "<dcgmi>"
    text = decode(data, path)
    lines = unquote_lines(text)
    if "Health Monitor Report" in text and '"Overall Health"' in text:
        report = GpuReport("dcgmi health -j", src)
        _parse_health_json(text, src, report)
    elif "Health Monitor Report" in text or (_OVERALL_ROW.search(text) and _ENTITY_ROW.search(text)):
        report = GpuReport("dcgmi health", src)
        _parse_health(lines, src, report)
    elif re.search(r"GPUs? found\.", text) and "Device Information" in text:
        report = GpuReport("dcgmi discovery", src)
        _parse_discovery(lines, src, report)
    elif "Diagnostic" in text and "|" in text:
        report = GpuReport("dcgmi diag", src)
        _parse_diag(lines, src, report)
        if not report.attrs.get("diag_results"):
            raise InputError("dcgmi diag table without any test result row", path)
    else:
        raise InputError("not dcgmi diag, discovery or health output", path)
    return report
