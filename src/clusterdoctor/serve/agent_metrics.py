"""The agent's exposition, by Prometheus practice (text format 0.0.4; ``promtool check metrics`` clean).

- bounded labels only: a finding's ``subject`` has pids removed (``pid 4242`` changes at every
  restart: series churn) and is cut at 160 characters; no free-text message labels;
- counters for counts (``…_total``), never rates: ``rate()`` belongs in PromQL (an exporter's own
  rate is wrong behind an HA pair of Prometheus servers scraping at different moments);
- ``clusterdoctor_build_info`` and the standard ``process_*`` metrics (from ``/proc/self``).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

__all__ = [
    "Exposition",
    "bounded_subject",
    "build_info_lines",
    "escape_label",
    "process_lines",
]

MAX_SUBJECT = 160
_PID = re.compile(r"\s*\bpids?[ =:]+\d+(?:\s*,\s*\d+)*,?")


def escape_label(v: str) -> str:
    """Escape a label value for the text exposition format (any str: a non-UTF-8 file name's
    surrogates are written as ``\\xNN``, never an encoding error)."""
    try:  # os.fsdecode's surrogates back to the file name's bytes, shown as \xNN
        v = v.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        v = v.encode("utf-8", "backslashreplace").decode("utf-8")
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def bounded_subject(subject: str | None) -> str:
    """A finding's subject as a label value: no pid, at most ``MAX_SUBJECT`` characters."""
    s = _PID.sub("", subject or "")
    s = re.sub(r"\(\s*,?\s*", "(", s)
    s = re.sub(r"\s*\(\)", "", s).strip()
    return s if len(s) <= MAX_SUBJECT else s[: MAX_SUBJECT - 1] + "…"


class Exposition:
    """Metric families in order, each HELP and TYPE once."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_: str, samples: list[tuple[dict[str, str], float]]) -> None:
        """One metric family; an empty sample list still declares it (so "none" reads as 0, not absent)."""
        self.lines.append(f"# HELP {name} {help_}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lab = ",".join(f'{k}="{escape_label(str(v))}"' for k, v in labels.items())
            self.lines.append(f"{name}{{{lab}}} {_num(value)}" if lab else f"{name} {_num(value)}")

    def raw(self, lines: list[str]) -> None:
        self.lines.extend(lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _num(v: float) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return f"{v:.17g}" if abs(v) >= 1e15 else f"{v:.9g}"


def build_info_lines() -> list[str]:
    from clusterdoctor import __version__

    py = ".".join(map(str, sys.version_info[:3]))
    e = Exposition()
    e.family(
        "clusterdoctor_build_info",
        "gauge",
        "Always 1; the agent's version and Python in labels.",
        [({"version": __version__, "python_version": py}, 1)],
    )
    return e.lines


def _proc_stat() -> dict[str, Any] | None:
    try:
        with open("/proc/self/stat", "rb") as f:
            raw = f.read().decode()
        fields = raw[raw.rindex(")") + 2 :].split()
        with open("/proc/stat", "rb") as f:
            btime = next(
                float(ln.split()[1]) for ln in f.read().decode().splitlines() if ln.startswith("btime ")
            )
    except (OSError, ValueError, StopIteration):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    return {
        "cpu": (int(fields[11]) + int(fields[12])) / tick,  # utime + stime
        "start": btime + int(fields[19]) / tick,
        "vsize": int(fields[20]),
        "rss": int(fields[21]) * page,
    }


def process_lines() -> list[str]:
    """``process_*`` as the Prometheus client libraries export them (Linux); empty elsewhere."""
    st = _proc_stat()
    if st is None:
        return []
    e = Exposition()
    e.family(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        [({}, st["cpu"])],
    )
    e.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", [({}, st["rss"])])
    e.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", [({}, st["vsize"])])
    e.family(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        [({}, st["start"])],
    )
    try:
        fds = len(os.listdir("/proc/self/fd"))
        e.family("process_open_fds", "gauge", "Number of open file descriptors.", [({}, fds)])
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != resource.RLIM_INFINITY:
            e.family("process_max_fds", "gauge", "Maximum number of open file descriptors.", [({}, soft)])
    except OSError:
        pass
    return e.lines
