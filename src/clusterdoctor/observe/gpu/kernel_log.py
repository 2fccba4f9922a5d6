"""Kernel logs with NVIDIA driver messages -> GPU events (Xid, SXid, fallen off the bus, probe failures).

Accepted line forms (as users save them): ``dmesg`` (``[ 4254.197816] …`` seconds since boot),
``dmesg -T`` (``[Sun Feb 23 16:24:18 2025] …``), ``dmesg --time-format iso`` and ``--decode``
(``kern  :warn  : 2025-01-21T04:41:44,283302+00:00 …``), ``dmesg -H`` (``[Nov18 10:51]`` then
``[  +0.000040]``), syslog / ``journalctl -k`` (``Nov 18 10:51:02 host kernel: …``) and
``journalctl -o short-iso`` (``2024-11-15T12:02:03+0000 host kernel: …``), Markdown-quoted copies of
any of them. A line that starts with blanks and no timestamp continues the message before it (the
driver prints "fallen off the bus" and crash-dump notices over several lines).

Times: ISO forms carry their zone; ``dmesg -T`` and syslog print the machine's local time without a
zone and are read as UTC (recorded in the event); uptime stamps and year-less forms give no time.

What is recognised (NVIDIA driver messages, open-gpu-kernel-modules ``nv.c`` / ``osapi.c`` wording):

- ``NVRM: Xid (PCI:0000:19:00): 48, pid=…, name=…, <text>`` (older drivers print ``pid=…, Ch …`` without
  ``name=``; and the older ``Xid (0000:01:00): 3, …``; a bus id elided as ``PCI:...`` is one GPU not
  named in the input);
- ``nvidia-nvswitch3: SXid (PCI:0000:0b:00.0): 12028, …`` (NVSwitch errors; node-level events);
- ``NVRM: GPU at PCI:0000:5d:00: GPU-<uuid>`` (bus id -> UUID);
- "GPU has fallen off the bus" in its one-line and multi-line forms;
- ``This PCI I/O region assigned to your NVIDIA device is invalid: BARn is 0M …``;
- ``nvidia: probe of <bdf> failed``, ``RmInitAdapter failed`` / ``rm_init_adapter failed`` (with or without
  the GPU's address), "None of the NVIDIA devices were initialized";
- "The NVIDIA GPU <bdf> (PCI ID: …) installed in this system is not supported by …" and "… has fallen off
  the bus": messages the driver prints over several ``NVRM:`` lines, which ``dmesg`` prefixes one by
  one; the lines after the first are joined onto it;
- ``Rate limiting GSP RPC error prints for GPU at PCI:… The GPU likely needs to be reset``.
"""

from __future__ import annotations

import datetime as _dt
import re

from clusterdoctor.errors import InputError
from clusterdoctor.observe.gpu.common import decode, norm_bus_id, unquote_lines
from clusterdoctor.topology.gpu import GpuEvent, GpuReport, GpuState

__all__ = ["parse_kernel_log", "sniff_kernel_log"]

KIND = "kernel log"

_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
# prefixes, tried in order; each yields (time text, host) and the rest of the line
_P_DECODE = re.compile(
    r"^\s*[a-z]+\s*:[a-z]+\s*:\s*(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+"
)
_P_ISO = re.compile(
    r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+(?:(?P<host>\S+)\s+kernel:\s+)?"
)
_P_CTIME = re.compile(rf"^\[(?P<ctime>[A-Z][a-z]{{2}} (?:{_MONTHS})\s+\d+ \d\d:\d\d:\d\d \d{{4}})\]\s?")
_P_UPTIME = re.compile(r"^\[\s*(?P<up>\d+\.\d+)\]\s?")
# an uptime stamp whose "[" the poster's selection cut off ("38.773115] NVRM: ..."): digits, a dot,
# at least three decimals and "] " (a message never starts so)
_P_CUT_UPTIME = re.compile(r"^\s*(?P<up>\d{1,9}\.\d{3,9})\]\s")
# what is left of a syslog or journal prefix whose start the selection cut: "c  2 11:49:53 host kernel: [...]"
# (part of the month), "kernel: [ 1097.650222] ", "kernel: ", or only the "] " of the stamp
_P_CUT_SYSLOG = re.compile(
    r"^[A-Za-z]{0,2}\s{1,2}\d{1,2} \d\d:\d\d:\d\d\s+(?P<host>[\w.-]{1,64})\s+kernel:\s+"
    r"(?:\[\s*(?P<up>\d{1,9}\.\d{1,9})\]\s?)?"
)
_P_CUT_TAG = re.compile(
    r"^\s{0,4}(?:kernel:\s+)(?:\[\s*(?P<up>\d{1,9}\.\d{1,9})\]\s?)?|^\s{0,4}\]\s(?=NVRM|nvidia)"
)
_P_HUMAN = re.compile(rf"^\[(?:(?:{_MONTHS})\d+ \d\d:\d\d|\s*\+\d+\.\d+)\]\s?")
_P_SYSLOG = re.compile(
    rf"^(?P<sys>(?:{_MONTHS})\s+\d+ \d\d:\d\d:\d\d)\s+(?P<host>\S+)\s+kernel:\s+(?:\[\s*\d+\.\d+\]\s*)?"
)

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?:(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)|\.{2,6}|…)\): "
    r"(?P<code>\d+)"
    r"(?:, pid=(?P<pid>'?<?[^,']{0,64}>?'?)(?:, name=(?P<name>[^,]{0,256}))?)?,?\s*(?P<msg>.*)$"
)
_SXID = re.compile(
    r"(?P<dev>nvidia-nvswitch\d*): SXid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)\): "
    r"(?P<code>\d+),\s*(?P<msg>.*)$"
)
_GPU_AT = re.compile(r"NVRM: GPU at PCI:(?P<bus>[0-9a-fA-F:.]+): (?P<uuid>GPU-[0-9a-fA-F-]+)")
_FELL = re.compile(
    r"(?:NVRM: GPU (?P<b1>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d): GPU has fallen off the bus"
    r"|NVRM: GPU at (?:PCI:)?(?P<b2>[0-9a-fA-F:.]+) has fallen off the bus"
    r"|The NVIDIA GPU (?P<b3>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d).*fallen off the bus)"
)
_BAR = re.compile(
    r"region assigned to your NVIDIA device is invalid:(?:(?!region assigned to your)[^\n])*?(?P<bar>BAR\d+) is (?P<size>\S+) @ \S+ \(PCI:(?P<bus>[0-9a-fA-F:.]+)\)"
)
_PROBE = re.compile(r"nvidia(?:\s+\S+)?: probe of (?P<bus>[0-9a-fA-F:.]+) failed with error (?P<err>-?\d+)")
_RMINIT = re.compile(
    r"NVRM: GPU (?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d): (?:RmInitAdapter failed!?|rm_init_adapter failed)"
    r"\s*(?P<msg>.*)"
)
# without the GPU's address (older drivers): a node-level probe failure
_RMINIT_NODE = re.compile(
    r"NVRM: (?:RmInitAdapter failed!? \(0x[0-9a-fA-F]{1,8}:0x[0-9a-fA-F]{1,8}:\d{1,6}\)"
    r"|rm_init_adapter failed(?:,| for) device (?:bearing )?minor number \d{1,4})"
)
# the first line of a message the driver prints over several "NVRM:" lines, each with its own prefix in
# dmesg (nv_printf with embedded newlines): the lines that follow are joined onto it
_MULTI_START = re.compile(
    r"NVRM: The NVIDIA (?:v?GPU|GPU) [0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d\s*(?:\(PCI ID: [0-9a-fA-F:]{9}\))?\s*$"
)
_UNSUPPORTED = re.compile(
    r"The NVIDIA (?:v?GPU|GPU) (?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d).{0,80}?"
    r"installed in this system is not supported by"
)
MAX_JOINED = 8  # continuation lines joined onto one multi-line NVRM message
_RESET = re.compile(
    r"Rate limiting GSP RPC error prints for GPU at PCI:(?P<bus>[0-9a-fA-F:.]+).*needs to be reset"
)
_NODE_FAIL = re.compile(
    r"NVRM: (?:None of the NVIDIA devices were initialized|The NVIDIA probe routine failed for \d+ device)"
)


def sniff_kernel_log(head: bytes) -> bool:
    """Whether ``head`` holds NVIDIA kernel-driver messages (NVRM / SXid lines)."""
    h = head[:65536]
    return b"NVRM: " in h or (b"SXid (" in h and b"nvswitch" in h)


def _iso_time(text: str) -> float | None:
    t = text.replace(",", ".")
    t = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", t)
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    try:
        d = _dt.datetime.fromisoformat(t)
    except ValueError:
        return None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return d.timestamp()


def _ctime(text: str) -> float | None:
    try:
        d = _dt.datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None
    return d.replace(tzinfo=_dt.timezone.utc).timestamp()


def _split(line: str) -> tuple[str | None, float | None, str | None, str, bool]:
    """(time text, epoch or None, host, message, has_prefix)."""
    for rx in (_P_DECODE, _P_ISO):
        m = rx.match(line)
        if m:
            return m.group("iso"), _iso_time(m.group("iso")), m.groupdict().get("host"), line[m.end() :], True
    m = _P_CTIME.match(line)
    if m:
        return m.group("ctime"), _ctime(m.group("ctime")), None, line[m.end() :], True
    m = _P_SYSLOG.match(line)
    if m:
        return m.group("sys"), None, m.group("host"), line[m.end() :], True
    m = _P_UPTIME.match(line)
    if m:
        return f"uptime {m.group('up')} s", None, None, line[m.end() :], True
    m = _P_HUMAN.match(line)
    if m:
        return None, None, None, line[m.end() :], True
    m = _P_CUT_UPTIME.match(line)
    if m:
        return f"uptime {m.group('up')} s", None, None, line[m.end() :], True
    m = _P_CUT_SYSLOG.match(line)
    if m:
        up = m.group("up")
        return (f"uptime {up} s" if up else None), None, m.group("host"), line[m.end() :], True
    m = _P_CUT_TAG.match(line)
    if m:
        up = m.group("up")
        return (f"uptime {up} s" if up else None), None, None, line[m.end() :], True
    return None, None, None, line, False


def parse_kernel_log(data: bytes | str, path: str | None = None) -> GpuReport:
    """Events of NVIDIA driver messages in a kernel log. InputError when it holds none at all."""
    src = path or "<kernel log>"
    lines = unquote_lines(decode(data, path))
    # 1. join continuation lines onto their message
    msgs: list[tuple[int, str | None, float | None, str | None, str]] = []
    joining = 0  # continuation lines still joined onto a multi-line NVRM message
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        ttext, t, host, msg, has_prefix = _split(line)
        if not has_prefix and msgs and line[:1] in (" ", "\t"):
            cont = msg.strip()
            cont = cont[6:] if cont.startswith("NVRM: ") else cont
            ln, tt, tv, h, prev = msgs[-1]
            msgs[-1] = (ln, tt, tv, h, f"{prev} {cont}")
            continue
        body = msg.strip()
        if (
            joining
            and msgs
            and body.startswith("NVRM: ")
            and not body.startswith(("NVRM: Xid", "NVRM: GPU at", "NVRM: The NVIDIA"))
        ):
            ln, tt, tv, h, prev = msgs[-1]
            msgs[-1] = (ln, tt, tv, h, f"{prev} {body[6:]}")
            joining -= 1
            continue
        joining = MAX_JOINED if _MULTI_START.search(body) else 0
        msgs.append((lineno, ttext, t, host, body))
    report = GpuReport(KIND, src)
    report.facts.add("kernel_log")
    gpus: dict[str, GpuState] = {}
    hosts: set[str] = set()
    seen_nvidia = False

    def gpu(bus_text: str) -> GpuState | None:
        bus = norm_bus_id(bus_text)
        if bus is None:
            return None
        g = gpus.get(bus)
        if g is None:
            g = gpus[bus] = GpuState(bus_id=bus)
            g.sources.append(src)
        return g

    def unnamed() -> GpuState:
        g = gpus.get("")
        if g is None:
            g = gpus[""] = GpuState()
            g.sources.append(src)
        return g

    for lineno, ttext, t, host, msg in msgs:
        if host:
            hosts.add(host)
        if "NVRM" in msg or "nvidia" in msg:
            seen_nvidia = True
        zone = (
            {"zone": "not printed; read as UTC"} if ttext and t is not None and "T" not in ttext[:11] else {}
        )

        def ev(
            kind: str,
            message: str,
            *,
            t: float | None = t,
            ttext: str | None = ttext,
            lineno: int = lineno,
            zone: dict[str, str] = zone,
            **kw: object,
        ) -> GpuEvent:
            e = GpuEvent(kind, message, time=t, time_text=ttext, source=src, line=lineno, attrs=dict(zone))
            for k, v in kw.items():
                setattr(e, k, v)
            return e

        m = _XID.search(msg)
        if m:
            # a bus id the user elided ("Xid (PCI:...): 145"): one GPU not named in the input
            g = gpu(m.group("bus")) if m.group("bus") else unnamed()
            pid_s = (m.group("pid") or "").strip("'")
            pid = int(pid_s) if pid_s.isdigit() else None
            name = (m.group("name") or "").strip()
            e = ev(
                "xid",
                m.group("msg").strip(),
                code=int(m.group("code")),
                pid=pid,
                process=None if not name or name == "<unknown>" else name,
            )
            if g is not None:
                g.events.append(e)
            continue
        m = _SXID.search(msg)
        if m:
            e = ev("sxid", m.group("msg").strip(), code=int(m.group("code")))
            e.attrs["nvswitch"] = m.group("dev")
            e.attrs["nvswitch_bus"] = norm_bus_id(m.group("bus"))
            lk = re.search(r"\bLink (\d+)", m.group("msg"))
            if lk:
                e.attrs["switch_link"] = int(lk.group(1))
            report.events.append(e)
            continue
        m = _GPU_AT.search(msg)
        if m:
            g = gpu(m.group("bus"))
            if g is not None:
                g.set("uuid", m.group("uuid"), src)
            continue
        m = _FELL.search(msg)
        if m:
            g = gpu(m.group("b1") or m.group("b2") or m.group("b3") or "")
            e = ev("fell_off_bus", msg.removeprefix("NVRM: "))
            if g is not None:
                g.events.append(e)
            else:
                report.events.append(e)
            continue
        m = _BAR.search(msg)
        if m:
            g = gpu(m.group("bus"))
            e = ev(
                "bar_invalid",
                f"{m.group('bar')} is {m.group('size')} (PCI I/O region assigned to the GPU is invalid)",
            )
            if g is not None:
                g.events.append(e)
            continue
        m = _PROBE.search(msg) or _RMINIT.search(msg)
        if m:
            g = gpu(m.group("bus"))
            e = ev("probe_failed", msg.removeprefix("NVRM: "))
            if g is not None:
                g.events.append(e)
            continue
        m = _UNSUPPORTED.search(msg)
        if m:
            g = gpu(m.group("bus"))
            e = ev("unsupported", msg.removeprefix("NVRM: ")[:300])
            if g is not None:
                g.events.append(e)
            continue
        if _RMINIT_NODE.search(msg):
            report.events.append(ev("probe_failed", msg.removeprefix("NVRM: ")))
            continue
        m = _RESET.search(msg)
        if m:
            g = gpu(m.group("bus"))
            if g is not None:
                g.events.append(ev("reset_advised", msg.removeprefix("NVRM: ")))
            continue
        if _NODE_FAIL.search(msg):
            report.events.append(ev("probe_failed", msg.removeprefix("NVRM: ")))
    if not seen_nvidia:
        raise InputError("no NVIDIA driver (NVRM) or NVSwitch message in this log", path)
    if len(hosts) == 1:
        report.node = next(iter(hosts))
        for g in gpus.values():
            g.node = report.node
    elif len(hosts) > 1:
        report.warnings.append(f"{src}: messages from {len(hosts)} hosts; GPUs are not tied to one node")
    report.gpus = sorted(gpus.values(), key=lambda g: g.bus_id or "")
    times = [e.time for g in report.gpus for e in g.events if e.time is not None]
    report.time = max(times) if times else None
    return report
