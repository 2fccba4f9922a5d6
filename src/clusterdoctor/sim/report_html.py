"""Self-contained HTML reports for simulator runs: inline SVG line charts, no scripts, no network."""

from __future__ import annotations

import html
from collections.abc import Sequence

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")


def svg_lines(series: dict[str, Sequence[tuple[float, float]]], title: str, xlabel: str, ylabel: str,
              width: int = 640, height: int = 360, y_range: tuple[float, float] | None = None) -> str:  # fmt: skip
    """An SVG line chart of named (x, y) series."""
    pts = [p for s in series.values() for p in s]
    if not pts:
        return f"<p>{html.escape(title)}: no data</p>"
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = y_range or (min(p[1] for p in pts), max(p[1] for p in pts))
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1
    ml, mr, mt, mb = 60, 150, 30, 45
    pw, ph = width - ml - mr, height - mt - mb

    def sx(x: float) -> float:
        return ml + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return mt + ph - (min(max(y, y0), y1) - y0) / (y1 - y0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{html.escape(title)}" style="font:12px sans-serif">',
        f'<text x="{ml}" y="18" font-weight="bold">{html.escape(title)}</text>',
        f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
    ]
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        xv = x0 + (x1 - x0) * i / 4
        out.append(f'<text x="{ml - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{yv:.4g}</text>')
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{sy(yv):.1f}" y2="{sy(yv):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{sx(xv):.1f}" y="{mt + ph + 16}" text-anchor="middle">{xv:.4g}</text>')
    out.append(f'<text x="{ml + pw / 2}" y="{height - 8}" text-anchor="middle">{html.escape(xlabel)}</text>')
    out.append(
        f'<text x="14" y="{mt + ph / 2}" text-anchor="middle" transform="rotate(-90 14 {mt + ph / 2})">'
        f"{html.escape(ylabel)}</text>"
    )
    for k, (name, s) in enumerate(series.items()):
        color = _COLORS[k % len(_COLORS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{path}"/>')
        ly = mt + 14 + 16 * k
        out.append(
            f'<line x1="{ml + pw + 10}" x2="{ml + pw + 30}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"/>'
        )
        out.append(f'<text x="{ml + pw + 34}" y="{ly + 4}">{html.escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def page(title: str, sections: list[tuple[str, str]], notes: list[str] | None = None) -> str:
    """A complete HTML page: ``sections`` are (heading, html body) pairs."""
    body = [f"<h1>{html.escape(title)}</h1>"]
    if notes:
        body.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    for head, content in sections:
        body.append(f"<h2>{html.escape(head)}</h2>\n{content}")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;max-width:980px;margin:2em auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in header)
    r = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{h}</tr>{r}</table>"


def protocol_report(results: list, title: str = "clusterdoctor sim: FGD protocol") -> str:
    """HTML for one or more :class:`~clusterdoctor.sim.engine.ProtocolResult`."""
    alloc = {f"{r.policy} s{r.seed}": sorted(r.allocation_curve.items()) for r in results}
    frag = {f"{r.policy} s{r.seed}": sorted(r.frag_curve.items()) for r in results}

    def _e(e: dict[str, float], key: str, digits: int) -> str:
        v = e.get(key)
        return f"{v:.{digits}f}" if v is not None and v == v else "-"

    rows = []
    for r in results:
        e = r.energy_summary()
        rows.append(
            (r.policy, r.seed, r.pods_arrived, r.pods_failed, f"{r.final_allocation:.2f}",
             _e(e, "mean_kw_all_on", 1), _e(e, "mean_kw_sleep", 1), _e(e, "j_per_tflop_all_on", 2))
        )  # fmt: skip
    notes = sorted({n for r in results for n in r.notes})
    return page(
        title,
        [
            (
                "Summary",
                table(
                    [
                        "policy",
                        "seed",
                        "pods arrived",
                        "failed",
                        "allocated % at 130 % load",
                        "mean kW (all on)",
                        "mean kW (empty nodes asleep)",
                        "J per useful TFLOP",
                    ],
                    rows,
                ),  # fmt: skip
            ),
            (
                "GPU allocation vs arriving load",
                svg_lines(
                    alloc,
                    "GPU allocation",
                    "arrived GPU requests (% of capacity)",
                    "allocated GPUs (% of capacity)",
                ),
            ),
            (
                "Fragmentation vs arriving load",
                svg_lines(
                    frag,
                    "FGD fragmentation",
                    "arrived GPU requests (% of capacity)",
                    "fragmented GPUs (% of capacity)",
                ),
            ),
        ],  # fmt: skip
        notes,
    )


def timed_report(results: list, title: str = "clusterdoctor sim: timed run") -> str:
    """HTML for one or more :class:`~clusterdoctor.sim.engine.TimedResult`: allocation over time and CDFs."""
    from clusterdoctor.sim.metrics import cdf_points

    alloc = {}
    for r in results:
        d = r.as_dict()
        alloc[r.policy] = [(t / 3600.0, a) for t, a in d["allocation_timeline"]]
    qd = {r.policy: [(x / 60.0, y) for x, y in cdf_points(r.queue_delay_s)] for r in results}
    jct = {r.policy: [(x / 3600.0, y) for x, y in cdf_points(r.jct_s)] for r in results}
    rows = []
    for r in results:
        d = r.as_dict()
        rows.append((r.policy, r.jobs, f"{d['mean_allocation_pct']:.2f}", f"{(d['queue_delay_s']['p99'] or 0):.0f}",
                     f"{(d['jct_s']['p50'] or 0):.0f}", f"{(d['jct_s']['p99'] or 0):.0f}", f"{r.makespan_s / 3600:.1f}",
                     f"{r.gpu_hours:.0f}", f"{r.energy_kwh:.0f}", f"{r.cost_usd_fleet + r.cost_usd_energy:,.0f}"))  # fmt: skip
    notes = sorted({n for r in results for n in r.notes})
    return page(
        title,
        [
            (
                "Summary",
                table(
                    [
                        "policy",
                        "jobs",
                        "mean alloc %",
                        "queue p99 s",
                        "JCT p50 s",
                        "JCT p99 s",
                        "makespan h",
                        "GPU-hours",
                        "energy kWh",
                        "cost $",
                    ],
                    rows,
                ),
            ),  # fmt: skip
            (
                "Allocation over time",
                svg_lines(alloc, "Allocated GPUs", "hours", "% of GPUs", y_range=(0, 100)),
            ),
            (
                "Queueing delay CDF",
                svg_lines(qd, "Queueing delay", "minutes", "fraction of jobs", y_range=(0, 1)),
            ),
            ("JCT CDF", svg_lines(jct, "Job completion time", "hours", "fraction of jobs", y_range=(0, 1))),
        ],
        notes,
    )
