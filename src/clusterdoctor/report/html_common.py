"""What every HTML report shares: the stylesheet, severity badges, escaping, and the plots more than
one report draws (per-rank step time with the fail-slow onsets). Inline SVG only: no scripts, no
external assets, so a report opens offline and in a mail client.

Readability rules the stylesheet keeps: the severity is a coloured badge, the body of a finding is
normal text; long paths, URLs and identifiers wrap instead of scrolling sideways (1280 px and up
show every report without a horizontal scrollbar); plots scale down with the page (``viewBox``).
"""

from __future__ import annotations

from html import escape as _html_escape
from typing import Any

SEVERITY_COLOR = {"critical": "#b00020", "warning": "#a85d00", "info": "#00638a"}

CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;padding:0 1.5em;
color:#222;max-width:1200px;line-height:1.45;overflow-wrap:anywhere}
h1{font-size:1.5em} h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em;max-width:100%}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f4f4f4}
code{background:#f4f4f4;padding:0 .2em;white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word}
.badge{display:inline-block;padding:.05em .55em;border-radius:.8em;font-size:.78em;font-weight:600;
color:#fff;letter-spacing:.04em;vertical-align:.1em;background:#666}
.badge.critical{background:#b00020} .badge.warning{background:#a85d00} .badge.info{background:#00638a}
.finding{border-left:4px solid #ccc;padding:.4em .9em;margin:.9em 0;background:#fafafa}
.finding.critical{border-left-color:#b00020} .finding.warning{border-left-color:#e0a000}
.finding.info{border-left-color:#00638a}
.finding-head{font-weight:600;margin:.2em 0} .finding-head .rule{font-family:monospace;font-weight:normal}
.finding ul{margin:.3em 0;padding-left:1.4em}
.muted{color:#666} .note{color:#a85d00}
svg{max-width:100%;height:auto} svg text{font-family:system-ui,sans-serif}
td.g-ok{background:#e3f4e3} td.g-critical{background:#f8d0d4} td.g-warning{background:#fde9c4}
td.g-info{background:#dcedf7} td.g-unknown{background:#eee;color:#666} td.g-na{color:#999}
td.num,th.num{text-align:right} td.id{white-space:nowrap;font-family:monospace}
.legend span{display:inline-block;margin-right:1em;font-size:.85em}
.legend i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:-.1em}
"""


def escape(s: object, quote: bool = True) -> str:
    """HTML-escaped, after what the inputs hold is made visible and URL credentials are removed
    (:func:`clusterdoctor.escape.shown`): a lone surrogate or control character never reaches
    the file."""
    from clusterdoctor.escape import shown

    return _html_escape(shown(s), quote)


def badge(severity: object) -> str:
    """The severity as a coloured badge (``<span class='badge critical'>CRITICAL</span>``)."""
    sev = str(severity).lower()
    cls = sev if sev in SEVERITY_COLOR else ""
    return f"<span class='badge {cls}'>{escape(sev.upper())}</span>"


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    import math

    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out, v = [], first
    while v <= hi + step * 1e-9:
        out.append(round(v, 10))
        v += step
    return out


LINE_COLORS = ("#4c78a8", "#72b7b2", "#54a24b", "#b279a2", "#9d755d", "#bab0ac", "#79706e", "#4c6e8a")
FLAG_COLOR = "#d62728"


def step_time_svg(plot: dict[str, Any], width: int = 1000, height: int = 320) -> str:
    """The job's step time (black) and how long the others waited for each rank (ms) per step, the ranks
    a fail-slow episode names in red, each episode's onset a dashed vertical line labelled with its
    rank and class. ``plot`` comes from
    :func:`clusterdoctor.analyze.step_plot.step_plot`."""
    steps = plot.get("steps") or []
    if len(steps) < 2:
        return ""
    series = [ln["ms"] for ln in plot.get("lines", [])] + [plot.get("job_ms") or []]
    band = plot.get("band")
    if band:
        series += [band["min"], band["max"]]
    vals = [v for s in series for v in s if v is not None]
    if not vals:
        return ""
    left, right, top, bottom = 64, 250, 16, 46
    pw, ph = width - left - right, height - top - bottom
    x0, x1 = steps[0], steps[-1]
    ymax = max(vals) * 1.05 or 1.0

    def X(s: float) -> float:
        return left + (s - x0) / ((x1 - x0) or 1) * pw

    def Y(v: float) -> float:
        return top + ph - v / ymax * ph

    unit = "sample" if plot.get("unit") == "sample" else "step"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="step time per rank">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fcfcfc" stroke="#ccc"/>',
    ]
    for t in _nice_ticks(0, ymax):
        y = Y(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{t:g}</text>')
    for t in _nice_ticks(x0, x1, 8):
        x = X(t)
        out.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 4}" stroke="#888"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 17}" font-size="11" text-anchor="middle">{t:g}</text>')
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 6}" font-size="12" text-anchor="middle">{unit}</text>'
        f'<text x="14" y="{top + ph / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + ph / 2})">ms per {unit}</text>'
    )

    def path(vs: list[float | None]) -> str:
        pts, pen = [], "M"
        for s, v in zip(steps, vs):
            if v is None:
                pen = "M"
                continue
            pts.append(f"{pen}{X(s):.1f},{Y(v):.1f}")
            pen = "L"
        return " ".join(pts)

    legend: list[tuple[str, str, str]] = []
    waited = plot.get("series") == "waited for"
    if band:
        lo, hi = band["min"], band["max"]
        upper = [(s, v) for s, v in zip(steps, hi) if v is not None]
        lower = [(s, v) for s, v in zip(steps, lo) if v is not None][::-1]
        if upper and lower:
            poly = " ".join(f"{X(s):.1f},{Y(v):.1f}" for s, v in upper + lower)
            out.append(f'<polygon points="{poly}" fill="#4c78a8" opacity="0.18"/>')
        out.append(f'<path d="{path(band["median"])}" fill="none" stroke="#4c78a8" stroke-width="1.5"/>')
        legend.append(("#4c78a8", "band", f"{band['ranks']} others: range, median"))
    k = 0
    for ln in sorted(plot.get("lines", []), key=lambda ln: ln["flagged"]):  # flagged ranks on top
        color = FLAG_COLOR if ln["flagged"] else LINE_COLORS[k % len(LINE_COLORS)]
        k += 0 if ln["flagged"] else 1
        w = 2.2 if ln["flagged"] else 1.2
        out.append(
            f'<path d="{path(ln["ms"])}" fill="none" stroke="{color}" stroke-width="{w}">'
            f"<title>rank {ln['rank']}</title></path>"
        )
        name = f"others waited for rank {ln['rank']}" if waited else f"rank {ln['rank']} step time"
        legend.append((color, "line", name + (" (flagged)" if ln["flagged"] else "")))
    if plot.get("job_ms"):
        out.append(f'<path d="{path(plot["job_ms"])}" fill="none" stroke="#222" stroke-width="2.4"/>')
        legend.insert(0, ("#222", "line", "job step time"))
    for i, on in enumerate(plot.get("onsets", [])[:8]):
        if not x0 <= on["step"] <= x1:
            continue
        x = X(on["step"])
        who = "job" if on["rank"] is None else f"rank {on['rank']}"
        out.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#222" stroke-dasharray="5,4"/>'
            f'<text x="{x + 4:.1f}" y="{top + 13 + 14 * i}" font-size="11">onset: {escape(who)}, '
            f"{escape(on['kind'])} ({unit} {on['step']})</text>"
        )
    ly = top + 4
    for color, kind, label in legend[:18]:
        lx = left + pw + 12
        if kind == "band":
            out.append(f'<rect x="{lx}" y="{ly}" width="14" height="10" fill="{color}" opacity="0.35"/>')
        else:
            out.append(
                f'<line x1="{lx}" y1="{ly + 5}" x2="{lx + 14}" y2="{ly + 5}" stroke="{color}" stroke-width="2"/>'
            )
        out.append(f'<text x="{lx + 19}" y="{ly + 10}" font-size="11">{escape(label)}</text>')
        ly += 16
    out.append("</svg>")
    return "".join(out)
