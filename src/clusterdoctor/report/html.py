"""Self-contained HTML report: findings, skipped rules, the NUMA distance heatmap and the placement
table, with plots drawn as inline SVG (no scripts, no external assets — it opens offline)."""

from __future__ import annotations

from typing import Any

from clusterdoctor.model import Diagnosis, Severity
from clusterdoctor.report.html_common import CSS, badge, escape, step_time_svg
from clusterdoctor.report.text import common_folder, headline, raised_flags
from clusterdoctor.topology.cpuset import format_cpulist
from clusterdoctor.topology.model import Topology

__all__ = ["CSS", "escape", "render_html"]


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
    extra = f'<p class="note">NUMA node unknown for: {escape(", ".join(unknown))}</p>' if unknown else ""
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


LAYER_COLORS = {
    "etcd": "#b00020", "apiserver": "#e45756", "kube": "#e45756", "kubelet": "#f58518", "containerd": "#f58518",
    "scheduler": "#eeca3b", "rdma": "#54a24b", "nic": "#54a24b", "net": "#54a24b", "comm": "#4c78a8",
    "nccl": "#4c78a8", "gpu": "#b279a2", "numa": "#9d755d", "app": "#72b7b2", "flink": "#72b7b2",
    "kafka": "#72b7b2", "training": "#ff9da6",
}  # fmt: skip


def event_layer(kind: str) -> str:
    """The layer an event kind belongs to: its prefix (``etcd.heartbeat_slow`` -> ``etcd``)."""
    return kind.split(".", 1)[0].split(":", 1)[0].lower()


def _layer_color(layer: str) -> str:
    if layer in LAYER_COLORS:
        return LAYER_COLORS[layer]
    palette = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d", "#72b7b2")
    return palette[sum(map(ord, layer)) % len(palette)]


def _time_label(t: float, span: float) -> str:
    import datetime as _dt

    d = _dt.datetime.fromtimestamp(t, _dt.timezone.utc)
    if span < 10:
        return d.strftime("%H:%M:%S.%f")[:-3]
    return d.strftime("%H:%M:%S") if span < 86400 else d.strftime("%m-%d %H:%M")


def timeline_svg(events: list[Any], width: int = 1000) -> str:
    """Correlated events on one labelled time axis (UTC), one row per event kind, coloured by layer."""
    if not events:
        return ""
    import datetime as _dt

    from clusterdoctor.report.html_common import _nice_ticks

    kinds = sorted({e.kind for e in events}, key=lambda k: (event_layer(k), k))
    t0, t1 = events[0].time, events[-1].time
    span = (t1 - t0) or 1.0
    left, right, row_h, top = 210, 20, 20, 10
    pw = width - left - right
    height = top + row_h * len(kinds) + 58
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="event timeline">'
    ]
    for k, kind in enumerate(kinds):
        y = top + k * row_h
        out.append(
            f'<text x="{left - 8}" y="{y + 14}" font-size="11" text-anchor="end">{escape(kind)}</text>'
            f'<line x1="{left}" y1="{y + 10}" x2="{left + pw}" y2="{y + 10}" stroke="#eee"/>'
        )
    axis_y = top + row_h * len(kinds) + 4
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + pw}" y2="{axis_y}" stroke="#888"/>')
    for t in _nice_ticks(0.0, span, 6):
        x = left + t / span * pw
        out.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{axis_y + 4}" stroke="#f0f0f0"/>'
            f'<text x="{x:.1f}" y="{axis_y + 17}" font-size="10" text-anchor="middle">'
            f"{escape(_time_label(t0 + t, span))}</text>"
        )
    day = _dt.datetime.fromtimestamp(t0, _dt.timezone.utc).strftime("%Y-%m-%d")
    out.append(
        f'<text x="{left + pw / 2}" y="{axis_y + 36}" font-size="12" text-anchor="middle">'
        f"time (UTC, {day}; {span:.3g} s shown)</text>"
        f'<text x="{left - 8}" y="{axis_y + 36}" font-size="12" text-anchor="end">event kind</text>'
    )
    for e in events:
        x = left + (e.time - t0) / span * pw
        y = top + kinds.index(e.kind) * row_h + 10
        when = _dt.datetime.fromtimestamp(e.time, _dt.timezone.utc).isoformat(timespec="milliseconds")
        out.append(
            f'<circle cx="{x:.1f}" cy="{y}" r="4.5" fill="{_layer_color(event_layer(e.kind))}" opacity="0.8">'
            f"<title>{escape(when)} {escape(e.message[:200])}</title></circle>"
        )
    out.append("</svg>")
    layers = sorted({event_layer(e.kind) for e in events})
    legend = "".join(
        f"<span><i style='background:{_layer_color(la)}'></i>{escape(la)}</span>" for la in layers
    )
    return "".join(out) + f"<p class='legend'>layer: {legend}</p>"


GRID_LABEL = {"ok": "ok", "critical": "CRIT", "warning": "WARN", "info": "info", "unknown": "?", "n/a": "n/a"}


FLEET_COLORS = {
    "critical": "#b00020",
    "warning": "#e0a000",
    "info": "#6baed6",
    "ok": "#54a24b",
    "unknown": "#bbb",
}


def _gpu_worst(row: dict[str, Any]) -> str:
    order = ("critical", "warning", "info", "ok", "unknown")
    states = [c["status"] for c in row["checks"].values() if c["status"] != "n/a"]
    return next((s for s in order if s in states), "unknown")


def gpu_fleet_svg(rows: list[dict[str, Any]], cell: int = 34, per_row: int = 16) -> str:
    """The fleet at a glance: one square per GPU, one row of squares per node, coloured by the worst
    check (red critical, amber warning, blue info, green ok, grey not exported)."""
    if not rows:
        return ""
    nodes: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        nodes.setdefault(r.get("node") or "(no node name)", []).append(r)
    label_w = min(260, 12 + 7 * max(len(n) for n in nodes))
    lines = sum((len(g) + per_row - 1) // per_row for g in nodes.values())
    width, height = label_w + per_row * (cell + 4) + 10, 10 + lines * (cell + 6) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="GPU fleet health">'
    ]
    y = 10
    for node, gpus in nodes.items():
        out.append(f'<text x="{label_w - 8}" y="{y + cell / 2 + 4}" font-size="11" text-anchor="end">'
                   f"{escape(node[:36])}</text>")  # fmt: skip
        for i, r in enumerate(gpus):
            if i and i % per_row == 0:
                y += cell + 6
            x = label_w + (i % per_row) * (cell + 4)
            worst = _gpu_worst(r)
            idx = "" if r.get("index") is None else str(r["index"])
            bad = [c for c, v in r["checks"].items() if v["status"] in ("critical", "warning")]
            tip = f"GPU{idx} {r.get('bus_id') or ''} {worst}" + (f": {', '.join(bad)}" if bad else "")
            fg = "#fff" if worst in ("critical", "ok") else "#000"
            out.append(
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" rx="4" fill="{FLEET_COLORS[worst]}">'
                f"<title>{escape(tip)}</title></rect>"
                f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" font-size="11" text-anchor="middle" '
                f'fill="{fg}">{escape(idx)}</text>'
            )
        y += cell + 6
    out.append("</svg>")
    legend = "".join(
        f"<span><i style='background:{c}'></i>{escape(k if k != 'unknown' else 'not exported')}</span>"
        for k, c in FLEET_COLORS.items()
    )
    return "".join(out) + f"<p class='legend'>{legend}</p>"


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
    import os

    base = common_folder(s.location for s in diag.sources)
    prefix = (base.rstrip(os.sep) + os.sep) if base else None

    def rel(v: object) -> str:  # a path from the inputs, relative to their folder (as the text report)
        return str(v).replace(prefix, "") if prefix else str(v)

    where = (
        f"<p class='muted'>sources in {escape(base)}{escape(os.sep)} (paths below are relative to it)</p>"
        if base
        else ""
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{escape(title)} — {escape(diag.host)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>host <b>{escape(diag.host)}</b> · generated {escape(diag.generated_at)} · "
        f"{len(diag.rules_run)} rules run · {len(diag.skipped)} skipped · {len(diag.findings)} findings</p>",
        f"<p><b>{escape(rel(headline(diag)))}</b></p>",
        where,
    ]
    # the plots first: where a reader looks before reading the findings
    if diag.step_times:
        parts.append("<h2>Step time per rank</h2>")
        parts.append(step_time_svg(diag.step_times))
    if diag.timeline:
        parts.append("<h2>Timeline of correlated events</h2>")
        parts.append(timeline_svg(diag.timeline))
    if diag.gpu_grid:
        parts.append("<h2>GPU fleet</h2>")
        parts.append(gpu_fleet_svg(diag.gpu_grid))
    parts.append("<h2>Findings</h2>")
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
            + (f" <span class='muted'>[{escape(rel(e.source))}]</span>" if e.source else "")
            + "</li>"
            for e in f.evidence
        )
        verify = "".join(f"<li><code>{escape(v)}</code></li>" for v in f.verify)
        parts.append(
            f"<div class='finding {_sev_class(f.severity)}'>"
            f"<p class='finding-head'>{badge(f.severity)} <span class='rule'>{escape(f.rule)}</span> "
            f"{escape(f.title)}{(' · ' + escape(rel(f.subject))) if f.subject else ''}</p>"
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
            + "".join(
                f"<tr><td class='id'>{escape(s.rule)}</td><td>{escape(s.reason)}</td></tr>"
                for s in diag.skipped
            )
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
