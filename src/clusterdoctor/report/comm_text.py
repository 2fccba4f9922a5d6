"""``clusterdoctor comm analyze`` as text: fits the terminal (``COLUMNS``, else 80 when not a terminal),
paths shown relative to the folder the inputs have in common. JSON and HTML carry the full detail."""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from clusterdoctor.escape import shown

DEFAULT_WIDTH = 80
MIN_WIDTH = 60  # the two tables need 59 columns
MAX_LISTED = 20  # unrecognised files and warnings listed before "… and N more"

_KIND_NAMES = {
    "kineto": ("Kineto trace", "Kineto traces"),
    "nccl_log": ("NCCL/PyTorch log", "NCCL/PyTorch logs"),
    "nccl_tests": ("nccl-tests run", "nccl-tests runs"),
    "flight_recorder": ("Flight Recorder dump/report", "Flight Recorder dumps/reports"),
    "ncu": ("ncu CSV", "ncu CSVs"),
}


def terminal_width(stream: Any = None) -> int:
    """``COLUMNS`` when set to a number; else the terminal's width when writing to one; else 80."""
    env = os.environ.get("COLUMNS", "")
    if env.strip().isdigit():
        return max(MIN_WIDTH, int(env))
    stream = stream if stream is not None else sys.stdout
    try:
        if stream.isatty():
            return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    except (AttributeError, ValueError, OSError):
        pass
    return DEFAULT_WIDTH


def common_folder(paths: Iterable[str]) -> str | None:
    """The deepest folder holding every input (a folder given counts as itself, a file as its folder)."""
    dirs = []
    for p in paths:
        ap = os.path.abspath(p)
        dirs.append(ap if os.path.isdir(ap) else os.path.dirname(ap))
    if not dirs:
        return None
    try:
        return os.path.commonpath(dirs)
    except ValueError:  # different drives
        return None


class _Paths:
    """Shortens every path under the inputs' common folder, as written in the report (absolute or as given)."""

    def __init__(self, base: str | None) -> None:
        self.base = base
        forms = set()
        if base and base != os.sep:
            forms.add(base.rstrip(os.sep) + os.sep)
            rel = os.path.relpath(base)
            if rel != "." and not rel.startswith(".." + os.sep) and rel != "..":
                forms.add(rel.rstrip(os.sep) + os.sep)
                forms.add("." + os.sep + rel.rstrip(os.sep) + os.sep)
        self.forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: Any) -> str:
        s = str(text)
        for f in self.forms:
            s = s.replace(f, "")
        return shown(_DOT_SLASH.sub("", s))  # a name from the inputs, shown safely


_DOT_SLASH = re.compile(r"(?<![\w./])\./(?=[\w.])")


def _fill(text: str, width: int, first: str, rest: str | None = None) -> list[str]:
    """Wrap at spaces only: paths, URLs and commands are never broken (a token wider than the line
    stands alone on its line)."""
    return textwrap.wrap(
        shown(text),
        width=width,
        initial_indent=first,
        subsequent_indent=rest if rest is not None else " " * len(first),
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _rst(text: str) -> str:
    return text.replace("``", "`")


def _count(kinds: dict[str, int]) -> str:
    parts = []
    for k, n in kinds.items():
        if n:
            one, many = _KIND_NAMES.get(k, (k, k))
            parts.append(f"{n} {one if n == 1 else many}")
    return ", ".join(parts) or "nothing"


def render_text(report: dict[str, Any], width: int | None = None, inputs: Sequence[str] = ()) -> str:
    """The text report of a ``comm analyze`` JSON document, wrapped to ``width`` columns."""
    w = width or terminal_width()
    short = _Paths(common_folder(inputs) if inputs else None)
    lines: list[str] = []
    add = lines.extend

    head = "clusterdoctor comm analyze"
    if short.base:
        add(_fill(f"{head} — inputs under {short.base}", w, ""))
    else:
        lines.append(head)
    kinds = {
        k: len(report.get(k, [])) for k in ("traces", "nccl_log", "nccl_tests", "flight_recorder", "ncu")
    }
    kinds["kineto"] = kinds.pop("traces")
    read = report.get("read_counts") or kinds
    skipped = len(report.get("unrecognised", []))
    add(
        _fill(
            f"read: {_count(read)}" + (f"; {skipped} file(s) skipped (see below)" if skipped else ""), w, ""
        )
    )

    if report.get("traces"):
        lines.append("")
        lines.append("Traces")
        for t in report["traces"]:
            cut = f", truncated after {t['events']} events (partial input)" if t["truncated"] else ""
            rank = f"rank {t['rank']}" if t["rank"] is not None else "rank unknown"
            job = f"; {t['job']}" if t.get("job") else ""
            alone = "; not compared with other ranks" if t.get("compared") is False else ""
            add(_fill(f"{short(t['path'])}: {rank}, {t['events']} events{cut}{job}{alone}", w, "  ", "    "))
            add(_fill(t["skipped"], w, "    "))
    if report.get("ranks"):
        lines.append("")
        lines.append(
            f"{'rank':>5} {'span ms':>8} {'compute%':>8} {'comm ms':>8} {'exposed%':>8} {'overlap%':>8} {'idle%':>6}"
        )
        for r in report["ranks"]:
            tb = r["temporal_breakdown_pct"]
            rank = str(r["rank"]) if r["rank"] is not None else "?"
            lines.append(
                f"{rank:>5} {r['span_us'] / 1000:>8.1f} {tb['compute']:>8.2f} {r['comm_time_us'] / 1000:>8.1f} "
                f"{tb['exposed_comm']:>8.2f} {r['comm_comp_overlap_pct']:>8.2f} {tb['idle']:>6.2f}"
            )
    if report.get("collectives"):
        lines.append("")
        lines.append(
            f"{'collective':<12} {'bytes':>10} {'count':>5} {'true µs':>9} {'skew µs':>9} {'bus GB/s':>9}"
        )
        for c in report["collectives"][:40]:
            bus = f"{c['busbw_gbs']:.3f}" if c["busbw_gbs"] is not None else "-"
            nb = c["nbytes"] if c["nbytes"] is not None else "-"
            lines.append(
                f"{c['op'][:12]:<12} {nb:>10} {c['count']:>5} {c['true_us_mean']:>9.1f} {c['skew_us_mean']:>9.1f} {bus:>9}"
            )
        if len(report["collectives"]) > 40:
            lines.append(f"  … and {len(report['collectives']) - 40} more (--format json lists all)")
    for run in report.get("nccl_tests", []):
        lines.append("")
        peak = run["peak_busbw_gbs"]
        add(
            _fill(
                f"nccl-tests {short(run['path'])}: {run['collective']}, busbw "
                f"{'-' if peak is None else f'{peak:.2f}'} GB/s at bandwidth-bound sizes (printed average "
                f"{run['avg_busbw_gbs']})",
                w,
                "",
                "  ",
            )
        )
        link = run.get("link")
        if link:
            what = link.get("matches_name") or "no reference class within a factor of 2"
            amb = f" (or {link['ambiguous_with']})" if link.get("ambiguous_with") else ""
            deg = " — a degraded path" if link.get("degraded") else ""
            add(_fill(f"matches: {what}{amb}{deg} [{link['scope']}: {link['scope_why']}]", w, "  ", "    "))
            if link["expected"]:
                add(_fill(f"expected: {link['expected']} ({link['expected_why']})", w, "  ", "    "))
            else:
                add(_fill("expected: unknown (pass --link to compare)", w, "  ", "    "))

    lines.append("")
    if report["findings"]:
        lines.append(f"Findings ({len(report['findings'])})")
        for f in report["findings"]:
            lines.append("")
            add(_fill(f"[{f['severity'].upper()}] {f['rule']} {f['title']}", w, ""))
            if f.get("subject"):
                add(_fill(f"about: {short(f['subject'])}", w, "  ", "    "))
            add(_fill(short(_rst(f["summary"])), w, "  "))
            for ev in f["evidence"][:8]:
                val = f" = {ev['value']}" if "value" in ev else ""
                unit = f" {ev['unit']}" if "unit" in ev and "value" in ev else ""
                thr = f" (threshold {ev['threshold']})" if "threshold" in ev else ""
                src = f" [{short(ev['source'])}]" if "source" in ev else ""
                add(_fill(f"- {ev['description']}{val}{unit}{thr}{src}", w, "    ", "      "))
            if len(f["evidence"]) > 8:
                lines.append(f"    … {len(f['evidence']) - 8} more (--format json)")
            if f["fix"]:
                add(_fill(f"fix: {short(_rst(f['fix']))}", w, "  ", "    "))
            for v in f["verify"]:
                add(_fill(f"verify: {short(_rst(v))}", w, "  ", "    "))
    else:
        lines.append("No communication finding.")
    if report["skipped"]:
        lines.append("")
        lines.append("Not checked:")
        for s in report["skipped"]:
            add(_fill(f"{s['rule']}: {s['reason']}", w, "  ", "    "))
    unrec = report.get("unrecognised", [])
    if unrec:
        lines.append("")
        lines.append(f"Skipped files ({len(unrec)}):")
        for u in unrec[:MAX_LISTED]:
            add(_fill(f"{short(u['path'])}: {u['reason']}", w, "  ", "    "))
        if len(unrec) > MAX_LISTED:
            lines.append(f"  … and {len(unrec) - MAX_LISTED} more (--format json lists all)")
    shown = [x for x in report["warnings"] if not _is_skip_warning(x, unrec)]
    if shown:
        lines.append("")
        lines.append("Warnings:")
        for x in shown[:MAX_LISTED]:
            add(_fill(short(x), w, "  ", "    "))
        if len(shown) > MAX_LISTED:
            lines.append(f"  … and {len(shown) - MAX_LISTED} more (--format json lists all)")
    return "\n".join(lines) + "\n"


_SKIP = re.compile(r"; skipped$")


def _is_skip_warning(text: str, unrec: list[dict[str, str]]) -> bool:
    """The "<file>: <reason>; skipped" warnings are shown once, in the skipped-files list."""
    return bool(unrec) and _SKIP.search(text) is not None
