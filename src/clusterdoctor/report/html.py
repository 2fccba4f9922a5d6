"""Self-contained HTML report: findings, skipped rules, the NUMA distance heatmap and the placement
table, with plots drawn as inline SVG (no scripts, no external assets — it opens offline)."""

from __future__ import annotations

from html import escape as _html_escape
from typing import Any

from clusterdoctor.model import Diagnosis, Severity
from clusterdoctor.report.text import raised_flags
from clusterdoctor.topology.cpuset import format_cpulist
from clusterdoctor.topology.model import Topology

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em} h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em} td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}
th{background:#f4f4f4} .critical{color:#b00020;font-weight:bold} .warning{color:#b26a00;font-weight:bold}
.info{color:#00638a} .finding{border-left:4px solid #ccc;padding:.3em .8em;margin:.8em 0}
.finding.critical{border-color:#b00020} .finding.warning{border-color:#e0a000} code{background:#f4f4f4;padding:0 .2em}
.muted{color:#777} svg text{font-family:sans-serif}
td.g-ok{background:#e3f4e3} td.g-critical{background:#f8d0d4} td.g-warning{background:#fde9c4}
td.g-info{background:#dcedf7} td.g-unknown{background:#eee;color:#777} td.g-na{color:#999}
"""


def escape(s: object, quote: bool = True) -> str:
    """HTML-escaped, after what the inputs hold is made visible and URL credentials are removed
    (:func:`clusterdoctor.escape.shown`): a lone surrogate or control character never reaches
    the file."""
    from clusterdoctor.escape import shown

    return _html_escape(shown(s), quote)


def _sev_class(sev: Severity) -> str:
    return str(sev)


def distance_heatmap_svg(topo: Topology, cell: int = 36) -> str:
    """The NUMA distance matrix as an SVG heatmap (10 = local, darker = farther)."""
    if not topo.distances:
        return '<p class="muted">The source does not state NUMA distances.</p>'
    ids = topo.node_ids
    n = len(ids)
    vals = [v for row in topo.distances for v in row]
    lo, hi = min(vals), max(vals)
    pad = 40
    size = pad + n * cell
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size + 10}" height="{size + 10}" role="img" '
        f'aria-label="NUMA distance heatmap">'
    ]
    for j, nid in enumerate(ids):
        out.append(
            f'<text x="{pad + j * cell + cell / 2}" y="{pad - 8}" font-size="11" text-anchor="middle">N{nid}</text>'
        )
        out.append(
            f'<text x="{pad - 6}" y="{pad + j * cell + cell / 2 + 4}" font-size="11" text-anchor="end">N{nid}</text>'
        )
    for i, row in enumerate(topo.distances):
        for j, v in enumerate(row):
            t = 0.0 if hi == lo else (v - lo) / (hi - lo)
            r = int(255 - 120 * t)
            g = int(245 - 170 * t)
            b = int(235 - 200 * t)
            fg = "#fff" if t > 0.6 else "#000"
            x, y = pad + j * cell, pad + i * cell
            out.append(
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="rgb({r},{g},{b})" stroke="#fff"/>'
            )
            out.append(
                f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" font-size="11" text-anchor="middle" fill="{fg}">{v}</text>'
            )
    out.append("</svg>")
    return "".join(out)


def topology_table(topo: Topology) -> str:
    rows = []
    for node in topo.nodes:
        gpus = ", ".join(g.name for g in topo.gpus if g.numa_node == node.id) or "-"
        nics = ", ".join(n.name for n in topo.nics if n.numa_node == node.id) or "-"
        mem = f"{node.memory_bytes / (1 << 30):.1f} GiB" if node.memory_bytes is not None else "unknown"
        rows.append(
            f"<tr><td>{node.id}</td><td>{escape(format_cpulist(node.cpus)) or '-'}</td><td>{mem}</td>"
            f"<td>{escape(gpus)}</td><td>{escape(nics)}</td></tr>"
        )
    unknown = [d.name for d in topo.devices() if d.kind in ("gpu", "nic") and d.numa_node is None]
    extra = f'<p class="warning">NUMA node unknown for: {escape(", ".join(unknown))}</p>' if unknown else ""
    return (
        "<table><tr><th>node</th><th>CPUs</th><th>memory</th><th>GPUs</th><th>NICs</th></tr>"
        + "".join(rows)
        + "</table>"
        + extra
    )


def placement_table(placement: list[dict[str, Any]]) -> str:
    if not placement:
        return '<p class="muted">No process was audited.</p>'
    head = (
        "<tr><th>pid</th><th>command</th><th>CPUs allowed</th><th>CPU nodes</th><th>memory by node</th>"
        "<th>remote memory</th><th>GPUs (node)</th><th>flags</th></tr>"
    )
    rows = []
    for p in placement:
        mem = p.get("memory_bytes_by_node") or {}
        mem_s = ", ".join(
            f"N{k}: {int(v) / (1 << 20):.0f} MiB" for k, v in sorted(mem.items(), key=lambda kv: str(kv[0]))
        )
        share = p.get("remote_memory_share")
        gpus = ", ".join(p.get("gpus") or [])
        gnodes = p.get("gpu_nodes")
        if gnodes:
            gpus += f" ({', '.join(str(n) for n in gnodes)})"
        flag_s = ", ".join(raised_flags(p))
        if p.get("error"):
            flag_s = f"error: {p['error']}"
        rows.append(
            "<tr>"
            f"<td>{escape(str(p.get('pid', '')))}</td><td>{escape(str(p.get('comm', '')))}</td>"
            f"<td>{escape(format_cpulist(p.get('cpus_allowed') or []))}</td>"
            f"<td>{escape(', '.join(str(n) for n in p.get('cpu_nodes') or []))}</td>"
            f"<td>{escape(mem_s) or '-'}</td>"
            f"<td>{f'{share * 100:.0f}%' if isinstance(share, (int, float)) else '-'}</td>"
            f"<td>{escape(gpus) or '-'}</td><td>{escape(flag_s) or '-'}</td>"
            "</tr>"
        )
    return "<table>" + head + "".join(rows) + "</table>"


def heatmap_svg(hm: dict[str, Any], width: int = 900, height: int = 260) -> str:
    """A latency heatmap: time on x, histogram bucket on y, colour = observations in that bucket/step."""
    times, bounds, counts = hm["times"], hm["bounds"], hm["counts"]
    if not times or not bounds:
        return ""
    left, top, bottom = 70, 10, 30
    cw = (width - left - 10) / len(times)
    ch = (height - top - bottom) / len(bounds)
    peak = max((c for row in counts for c in row), default=0) or 1
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(hm["title"])} heatmap">'
    ]
    for i, row in enumerate(counts):
        for j, c in enumerate(row):
            if c <= 0:
                continue
            t = min(1.0, (c / peak) ** 0.5)
            color = f"rgb({int(255 - 200 * t)},{int(240 - 180 * t)},{int(255 - 60 * t)})"
            y = top + (len(bounds) - 1 - j) * ch
            out.append(
                f'<rect x="{left + i * cw:.1f}" y="{y:.1f}" width="{cw + 0.5:.1f}" height="{ch + 0.5:.1f}" fill="{color}">'
                f"<title>{c:g} obs ≤ {bounds[j]:g} s</title></rect>"
            )
    for j, b in enumerate(bounds):
        if len(bounds) <= 12 or j % max(1, len(bounds) // 10) == 0:
            y = top + (len(bounds) - 1 - j) * ch + ch / 2 + 4
            label = "+Inf" if b == float("inf") else f"{b:g}s"
            out.append(f'<text x="{left - 4}" y="{y:.1f}" font-size="10" text-anchor="end">{label}</text>')
    import datetime as _dt

    for i in (0, len(times) - 1):
        label = _dt.datetime.fromtimestamp(times[i], _dt.timezone.utc).strftime("%H:%M:%S")
        out.append(f'<text x="{left + i * cw:.1f}" y="{height - 10}" font-size="10">{label}</text>')
    out.append("</svg>")
    return "".join(out)


def timeline_svg(events: list[Any], width: int = 900) -> str:
    """Correlated events on one time axis, one row per event kind."""
    if not events:
        return ""
    import datetime as _dt

    kinds = sorted({e.kind for e in events})
    t0, t1 = events[0].time, events[-1].time
    span = (t1 - t0) or 1.0
    left, row_h = 190, 18
    height = 30 + row_h * len(kinds)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="event timeline">'
    ]
    for k, kind in enumerate(kinds):
        y = 10 + k * row_h
        out.append(
            f'<text x="{left - 6}" y="{y + 12}" font-size="11" text-anchor="end">{escape(kind)}</text>'
        )
        out.append(f'<line x1="{left}" y1="{y + 9}" x2="{width - 10}" y2="{y + 9}" stroke="#eee"/>')
    for e in events:
        x = left + (e.time - t0) / span * (width - left - 20)
        y = 10 + kinds.index(e.kind) * row_h + 9
        when = _dt.datetime.fromtimestamp(e.time, _dt.timezone.utc).isoformat(timespec="milliseconds")
        out.append(
            f'<circle cx="{x:.1f}" cy="{y}" r="4" fill="#b00020" opacity="0.7"><title>{escape(when)} '
            f"{escape(e.message[:200])}</title></circle>"
        )
    for t, anchor, x in ((t0, "start", left), (t1, "end", width - 10)):
        label = _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        out.append(f'<text x="{x}" y="{height - 4}" font-size="10" text-anchor="{anchor}">{label} UTC</text>')
    out.append("</svg>")
    return "".join(out)


GRID_LABEL = {"ok": "ok", "critical": "CRIT", "warning": "WARN", "info": "info", "unknown": "?", "n/a": "n/a"}


def gpu_health_grid(rows: list[dict[str, Any]]) -> str:
    """GPUs x checks: each cell the worst finding's severity, ok, n/a, or ? (not exported), with the
    detail as a tooltip. Rows come from analyze.gpu_health.health_grid (the pipeline computed them)."""
    if not rows:
        return ""
    checks = list(rows[0]["checks"])
    head = (
        "<tr><th>node</th><th>GPU</th><th>bus id</th><th>UUID</th><th>model</th><th>NUMA</th><th>rank / pod</th>"
        + "".join(f"<th>{escape(c)}</th>" for c in checks)
        + "</tr>"
    )
    body = []
    for r in rows:
        cells = []
        for c in checks:
            st = r["checks"][c]["status"]
            cls = "g-na" if st == "n/a" else f"g-{st}"
            cells.append(
                f"<td class='{cls}' title='{escape(r['checks'][c].get('detail') or '')}'>{escape(GRID_LABEL.get(st, st))}</td>"
            )
        who = ", ".join(
            filter(None, [("rank " + ",".join(r["ranks"])) if r.get("ranks") else "", r.get("pod") or ""])
        )
        body.append(
            "<tr>"
            f"<td>{escape(r.get('node') or '-')}</td>"
            f"<td>{escape('' if r.get('index') is None else str(r['index']))}</td>"
            f"<td>{escape(r.get('bus_id') or '-')}</td><td>{escape(r.get('uuid') or '-')}</td>"
            f"<td>{escape(r.get('model') or '-')}</td>"
            f"<td>{escape('' if r.get('numa_node') is None else str(r['numa_node']))}</td>"
            f"<td>{escape(who or '-')}</td>" + "".join(cells) + "</tr>"
        )
    return (
        "<table class='gpu-grid'>"
        + head
        + "".join(body)
        + "</table><p class='muted'>? = the sources do not export what this check needs (not checked, not healthy); "
        "n/a = not applicable by design (e.g. no NVLink). Hover a cell for the detail.</p>"
    )


def render_html(diag: Diagnosis, *, title: str = "clusterdoctor diagnosis", extra_sections: str = "") -> str:
    """The whole report as one HTML document."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{escape(title)} — {escape(diag.host)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>host <b>{escape(diag.host)}</b> · generated {escape(diag.generated_at)} · "
        f"{len(diag.rules_run)} rules run · {len(diag.skipped)} skipped · {len(diag.findings)} findings</p>",
        "<h2>Findings</h2>",
    ]
    if not diag.findings:
        parts.append(
            "<p>No findings from the rules that ran. Skipped rules below were <b>not</b> checked.</p>"
        )
    for f in diag.findings:
        ev = "".join(
            "<li>"
            + escape(e.description)
            + (
                f" = <b>{escape(str(e.value))}</b>{(' ' + escape(e.unit)) if e.unit else ''}"
                if e.value is not None
                else ""
            )
            + (f" (threshold {escape(str(e.threshold))})" if e.threshold is not None else "")
            + (f" <span class='muted'>[{escape(e.source)}]</span>" if e.source else "")
            + "</li>"
            for e in f.evidence
        )
        verify = "".join(f"<li><code>{escape(v)}</code></li>" for v in f.verify)
        parts.append(
            f"<div class='finding {_sev_class(f.severity)}'>"
            f"<div class='{_sev_class(f.severity)}'>{escape(str(f.severity).upper())} · {escape(f.rule)} · "
            f"{escape(f.title)}{(' · ' + escape(f.subject)) if f.subject else ''}</div>"
            f"<p>{escape(f.summary)}</p><ul>{ev}</ul>"
            f"<p><b>Fix:</b> {escape(f.fix)}</p><p><b>Verify:</b></p><ul>{verify}</ul></div>"
        )
    if diag.gpu_grid:
        parts.append("<h2>GPU health</h2>")
        parts.append(gpu_health_grid(diag.gpu_grid))
    if diag.topology is not None:
        parts.append("<h2>NUMA topology</h2>")
        parts.append(
            f"<p class='muted'>source: {escape(diag.topology.source)} ({escape(diag.topology.source_kind)})</p>"
        )
        parts.append(topology_table(diag.topology))
        parts.append("<h3>Distance heatmap</h3>")
        parts.append(distance_heatmap_svg(diag.topology))
    if diag.timeline:
        parts.append("<h2>Timeline of correlated events</h2>")
        parts.append(timeline_svg(diag.timeline))
    for hm in diag.heatmaps:
        parts.append(f"<h2>{escape(hm['title'])} — heatmap</h2><p class='muted'>{escape(hm['metric'])}</p>")
        parts.append(heatmap_svg(hm))
    parts.append("<h2>Process placement</h2>")
    parts.append(placement_table(diag.placement))
    parts.append(extra_sections)
    parts.append("<h2>Skipped rules (not checked)</h2>")
    if diag.skipped:
        parts.append(
            "<table><tr><th>rule</th><th>missing input</th></tr>"
            + "".join(f"<tr><td>{escape(s.rule)}</td><td>{escape(s.reason)}</td></tr>" for s in diag.skipped)
            + "</table>"
        )
    else:
        parts.append("<p>None.</p>")
    if diag.warnings:
        parts.append(
            "<h2>Warnings</h2><ul>" + "".join(f"<li>{escape(w)}</li>" for w in diag.warnings) + "</ul>"
        )
    parts.append("</body></html>\n")
    return "".join(parts)
