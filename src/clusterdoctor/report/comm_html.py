"""Self-contained HTML for ``clusterdoctor comm analyze``: per-rank compute/communication timelines
(inline SVG), the exposed-communication table, the collective size/bandwidth table, nccl-tests
results and the findings. No scripts and no external assets: the file opens offline."""

from __future__ import annotations

from typing import Any

from clusterdoctor.report.html_common import CSS, badge, escape, step_time_svg

COMM_CSS = CSS + "td,th{text-align:right} td.l,th.l{text-align:left}"

COMPUTE_COLOR = "#4c78a8"
COMM_COLOR = "#e45756"


def _fmt(v: Any, nd: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return escape(str(v))


def timeline_svg(
    ranks: list[dict[str, Any]], timelines: list[dict[str, list[tuple[float, float]]]], width: int = 1000
) -> str:
    """One row per rank: compute (upper half) and communication (lower half) intervals on a shared µs axis."""
    spans = [r.get("span_us") or 0.0 for r in ranks]
    total = max(spans, default=0.0)
    if total <= 0:
        return '<p class="muted">No timeline: no activity in the traces.</p>'
    left, row_h, top = 90, 28, 20
    height = top + row_h * len(ranks) + 30
    plot_w = width - left - 10
    scale = plot_w / total
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        'aria-label="per-rank timeline of compute and communication">'
    ]
    out.append(
        f'<rect x="{left}" y="4" width="10" height="10" fill="{COMPUTE_COLOR}"/><text x="{left + 14}" y="13">compute</text>'
        f'<rect x="{left + 80}" y="4" width="10" height="10" fill="{COMM_COLOR}"/>'
        f'<text x="{left + 94}" y="13">communication</text>'
    )
    for i, (r, tl) in enumerate(zip(ranks, timelines)):
        y = top + i * row_h
        out.append(f'<text x="4" y="{y + row_h / 2 + 4}">rank {escape(str(r.get("rank")))}</text>')
        out.append(f'<rect x="{left}" y="{y + 2}" width="{plot_w}" height="{row_h - 4}" fill="#f7f7f7"/>')
        for kind, color, dy in (("compute", COMPUTE_COLOR, 2), ("comm", COMM_COLOR, row_h / 2)):
            for s, e in tl.get(kind, []):
                w = max((e - s) * scale, 0.5)
                out.append(
                    f'<rect x="{left + s * scale:.2f}" y="{y + dy:.1f}" width="{w:.2f}" height="{row_h / 2 - 2:.1f}" '
                    f'fill="{color}"/>'
                )
    ay = top + row_h * len(ranks) + 14
    for k in range(6):
        x = left + plot_w * k / 5
        out.append(f'<text x="{x:.1f}" y="{ay}" text-anchor="middle">{total * k / 5 / 1000:.1f} ms</text>')
    out.append("</svg>")
    return "".join(out)


def render_comm_html(report: dict[str, Any], timelines: list[dict[str, list[tuple[float, float]]]]) -> str:
    """Render the ``comm analyze`` report dict (the JSON document) plus per-rank timelines as HTML."""
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>clusterdoctor comm analyze</title>",
        f"<style>{COMM_CSS}</style></head><body><h1>Communication analysis</h1>",
        f"<p class='muted'>Sources: {escape(', '.join(report.get('sources', [])))}</p>",
    ]
    plot = (report.get("failslow") or {}).get("plot")
    if plot:  # the straggler's story first: where a reader looks
        parts.append("<h2>Step time per rank</h2>")
        parts.append(step_time_svg(plot))
    findings = report.get("findings", [])
    parts.append(f"<h2>Findings ({len(findings)})</h2>")
    if not findings:
        parts.append("<p>No communication finding. Skipped checks are listed at the end.</p>")
    for f in findings:
        sev = escape(f.get("severity", "info"))
        parts.append(
            f"<div class='finding {sev}'><p class='finding-head'>{badge(f.get('severity', 'info'))} "
            f"<span class='rule'>{escape(f.get('rule', ''))}</span> {escape(f.get('title', ''))}</p>"
            f"<p>{escape(f.get('summary', ''))}</p><ul>"
        )
        for ev in f.get("evidence", []):
            bits = [escape(str(ev.get("description", "")))]
            if "value" in ev:
                bits.append(f": <b>{escape(str(ev['value']))}</b>")
            if "unit" in ev:
                bits.append(f" {escape(str(ev['unit']))}")
            if "threshold" in ev:
                bits.append(f" (threshold {escape(str(ev['threshold']))})")
            if "source" in ev:
                bits.append(f" <span class='muted'>[{escape(str(ev['source']))}]</span>")
            parts.append(f"<li>{''.join(bits)}</li>")
        parts.append("</ul>")
        if f.get("fix"):
            parts.append(f"<p><b>Fix:</b> {escape(f['fix'])}</p>")
        if f.get("verify"):
            parts.append(
                "<p><b>Verify:</b> " + " ; ".join(f"<code>{escape(v)}</code>" for v in f["verify"]) + "</p>"
            )
        parts.append("</div>")
    ranks = report.get("ranks", [])
    if ranks:
        parts.append("<h2>Per-rank timeline</h2>")
        parts.append(timeline_svg(ranks, timelines))
        parts.append("<h2>Exposed communication</h2><table><tr><th class='l'>rank</th><th>span (ms)</th>")
        parts.append(
            "<th>compute (ms)</th><th>communication (ms)</th><th>exposed comm (ms)</th><th>exposed %</th>"
            "<th>overlap % of comm</th><th>idle %</th></tr>"
        )
        for r in ranks:
            tb = r.get("temporal_breakdown_pct", {})
            parts.append(
                f"<tr><td class='l'>{_fmt(r.get('rank'))}</td><td>{_fmt(r['span_us'] / 1000)}</td>"
                f"<td>{_fmt(r['compute_time_us'] / 1000)}</td><td>{_fmt(r['comm_time_us'] / 1000)}</td>"
                f"<td>{_fmt(r['exposed_comm_time_us'] / 1000)}</td><td>{_fmt(tb.get('exposed_comm'))}</td>"
                f"<td>{_fmt(r.get('comm_comp_overlap_pct'))}</td><td>{_fmt(tb.get('idle'))}</td></tr>"
            )
        parts.append("</table>")
    colls = report.get("collectives", [])
    if colls:
        parts.append(
            "<h2>Collectives by size</h2><table><tr><th class='l'>collective</th><th>bytes</th><th class='l'>dtype</th>"
            "<th>count</th><th>ranks</th><th>true time (µs)</th><th>max time (µs)</th><th>mean skew (µs)</th>"
            "<th>algbw (GB/s)</th><th>busbw (GB/s)</th></tr>"
        )
        for c in colls:
            parts.append(
                f"<tr><td class='l'>{_fmt(c['op'])}</td><td>{_fmt(c['nbytes'])}</td><td class='l'>{_fmt(c['dtype'])}</td>"
                f"<td>{c['count']}</td><td>{c['ranks']}</td><td>{_fmt(c['true_us_mean'])}</td>"
                f"<td>{_fmt(c['max_us_mean'])}</td><td>{_fmt(c['skew_us_mean'])}</td>"
                f"<td>{_fmt(c['algbw_gbs'], 3)}</td><td>{_fmt(c['busbw_gbs'], 3)}</td></tr>"
            )
        parts.append(
            "</table><p class='muted'>true time = shortest duration among ranks (time all ranks "
            "spent communicating); skew = latest − earliest start.</p>"
        )
    for run in report.get("nccl_tests", []):
        parts.append(
            f"<h2>nccl-tests: {escape(run['path'])}</h2><p>collective {escape(str(run.get('collective')))}, "
            f"bandwidth-bound busbw {_fmt(run.get('peak_busbw_gbs'))} GB/s, printed average "
            f"{_fmt(run.get('avg_busbw_gbs'))} GB/s</p>"
        )
        link = run.get("link")
        if link:
            expected = (
                f"{escape(link['expected'])} ({escape(link['expected_why'])})"
                if link.get("expected")
                else "unknown (pass --link to compare)"
            )
            parts.append(
                f"<p>matches: {escape(link.get('matches_name') or 'no reference class within a factor of 2')}"
                + (" — <b>a degraded path</b>" if link.get("degraded") else "")
                + f" <span class='muted'>[{escape(link['scope'])}: {escape(link['scope_why'])}]</span>"
                + f"; expected: {expected}</p>"
            )
        parts.append(
            "<table><tr><th>size (B)</th><th>time (µs)</th><th>algbw</th><th>busbw</th><th>in-place busbw</th></tr>"
        )
        for row in run.get("rows", []):
            parts.append(
                f"<tr><td>{row['size']}</td><td>{_fmt(row['time_us'])}</td><td>{_fmt(row['algbw_gbs'])}</td>"
                f"<td>{_fmt(row['busbw_gbs'])}</td><td>{_fmt(row['in_place_busbw_gbs'])}</td></tr>"
            )
        parts.append("</table>")
    hangs = report.get("hangs", [])
    if hangs:
        parts.append("<h2>Hangs and mismatches</h2><ul>")
        for h in hangs:
            parts.append(
                f"<li><b>{escape(h['kind'])}</b> culprit {escape(str(h['culprit_ranks']))}: {escape(h['detail'])}</li>"
            )
        parts.append("</ul>")
    skipped = report.get("skipped", [])
    if skipped:
        parts.append("<h2>Not checked</h2><ul>")
        for s in skipped:
            parts.append(f"<li><code>{escape(s['rule'])}</code>: {escape(s['reason'])}</li>")
        parts.append("</ul>")
    unrec = report.get("unrecognised", [])
    if unrec:
        parts.append(
            f"<h2>Skipped files ({len(unrec)})</h2><ul>"
            + "".join(f"<li><code>{escape(u['path'])}</code>: {escape(u['reason'])}</li>" for u in unrec)
            + "</ul>"
        )
    warnings = [w for w in report.get("warnings", []) if not (unrec and w.endswith("; skipped"))]
    if warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{escape(w)}</li>" for w in warnings) + "</ul>")
    parts.append("</body></html>")
    return "".join(parts)
