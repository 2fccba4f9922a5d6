"""``nvidia-smi nvlink -s`` / ``--status`` / ``-e`` -> per-GPU NVLink states and error counters.

Per GPU a header ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)`` is followed by one of:

- ``Link N: 26.562 GB/s`` (``-s``; an up link at its speed) or ``Link N: <inactive>`` (a link that is down);
- ``Link N: Replay Errors: 0`` / ``Recovery Errors`` / ``CRC Errors`` (``-e``);
- ``NVML: Unable to retrieve NVLink information as all links are inActive`` (the GPU has NVLinks, none
  is up: no bridge fitted, or all down) — not the same as
- ``Device does not have or support Nvlink`` (no NVLink by design; never a finding).

Indentation is spaces or a tab plus a space; publishers' elisions (``[...]``, ``...``, ``......``) are
skipped (an elided file states fewer links than the GPU has: the count is then only a lower bound,
which ``GpuReport.attrs["elided"]`` records), and so is the command line above the output.
"""

from __future__ import annotations

import re

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import decode, unquote_lines
from clusterdoctor.topology.gpu import GpuReport, GpuState, NvLinkState

__all__ = ["parse_nvlink", "sniff_nvlink"]

KIND = "nvidia-smi nvlink"
# the model never ends in a space, so a lazy step inside a run of spaces fails at once (linear)
_HDR = re.compile(r"^GPU (?P<idx>\d+): (?P<model>(?:|.*?(?<!\s)))\s*+\(UUID: (?P<uuid>[^)]*+)\)\s*$")
_LINK = re.compile(r"^Link (?P<n>\d+): (?P<rest>.*)$")
_COUNTER = re.compile(r"^(?P<name>Replay|Recovery|CRC) Errors:\s*(?P<v>\d+)", re.I)
_SPEED = re.compile(r"^(?P<v>\d+(?:\.\d+)?)\s*GB/s", re.I)


_ELISION = re.compile(r"^[\[\](). …]{3,}$")  # "...", "......", "[...]", "(…)", ". . ."
_COMMAND = re.compile(r"^(?:\S{0,80}[$#>] )?(?:sudo )?nvidia-smi\b")  # the command line above the output


def sniff_nvlink(head: bytes) -> bool:
    text = head[:16384].decode("utf-8", errors="replace")
    lines = [ln.strip() for ln in unquote_lines(text) if ln.strip()]
    while lines and (_COMMAND.match(lines[0]) or _ELISION.match(lines[0])) and not _HDR.match(lines[0]):
        lines = lines[1:]  # the command line (or a cut) above the first GPU header
    if not lines or not _HDR.match(lines[0]):
        return False
    rest = " ".join(lines[1:6])
    return bool(
        re.search(r"Link \d+: ", rest) or "inActive" in rest or "inactive" in rest or "support Nvlink" in rest
    )


def parse_nvlink(data: bytes | str, path: str | None = None) -> GpuReport:
    """Parse ``nvidia-smi nvlink`` output (status or error counters). InputError when no GPU header."""
    src = path or "<nvidia-smi nvlink>"
    report = GpuReport(KIND, src)
    cur: GpuState | None = None
    links: dict[int, NvLinkState] = {}
    pending = ""

    def close() -> None:
        if cur is not None:
            cur.nvlinks = [links[k] for k in sorted(links)]
            if links and cur.nvlink_support is None:
                cur.nvlink_support = "links"

    for lineno, raw in enumerate(unquote_lines(decode(data, path)), 1):
        body = raw.strip()
        if not body:
            continue
        if _ELISION.match(body):
            report.attrs["elided"] = True
            continue
        m = _HDR.match(body)
        if m:
            close()
            cur = GpuState(index=int(m.group("idx")), model=m.group("model").strip() or None)
            uuid = m.group("uuid").strip()
            cur.uuid = uuid or None
            cur.sources.append(src)
            report.gpus.append(cur)
            links = {}
            pending = ""
            continue
        if cur is None:
            if not _COMMAND.match(body):
                report.warnings.append(f"{src}:{lineno}: line before the first GPU header skipped")
            continue
        text = f"{pending} {body}".strip() if pending else body
        low = text.lower()
        if "all links are inactive" in low:
            cur.nvlink_support = "inactive"
            pending = ""
            continue
        if "does not have or support nvlink" in low:
            cur.nvlink_support = "none"
            pending = ""
            continue
        if low.startswith("nvml: unable to retrieve") and "inactive" not in low:
            pending = text  # wrapped message: the rest follows on the next line
            continue
        pending = ""
        lm = _LINK.match(body)
        if not lm:
            report.warnings.append(f"{src}:{lineno}: unrecognised line {body[:60]!r}")
            continue
        n = int(lm.group("n"))
        rest = lm.group("rest").strip()
        st = links.setdefault(n, NvLinkState(n, source=src))
        cm = _COUNTER.match(rest)
        if cm:
            name = cm.group("name").lower()
            setattr(
                st,
                {"replay": "replay_errors", "recovery": "recovery_errors", "crc": "crc_errors"}[name],
                int(cm.group("v")),
            )
            continue
        sm = _SPEED.match(rest)
        if sm:
            st.active = True
            st.speed_gbs = float(sm.group("v"))
        elif "inactive" in rest.lower() or "down" in rest.lower():
            st.active = False
        else:
            report.warnings.append(f"{src}:{lineno}: unrecognised link value {rest[:40]!r}")
    close()
    if not report.gpus:
        raise InputError("no 'GPU n: <model> (UUID: …)' header: not nvidia-smi nvlink output", path)
    report.facts.add("nvlink")
    if any(
        st.replay_errors is not None or st.crc_errors is not None for g in report.gpus for st in g.nvlinks
    ):
        report.facts.add("nvlink_errors")
    return report
