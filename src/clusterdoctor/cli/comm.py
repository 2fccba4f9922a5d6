"""``clusterdoctor comm analyze``: communication diagnosis from NCCL logs, nccl-tests output,
PyTorch profiler traces, Flight Recorder dumps and ncu CSV (files or directories, many ranks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from clusterdoctor.cli.common import EXIT_FINDINGS, EXIT_OK, CliExit

app = typer.Typer(help="Communication: exposed time, bandwidth, transports and hangs.", no_args_is_help=True)

SCHEMA = "clusterdoctor.comm/1"


@app.command("analyze")
def analyze(
    paths: list[Path] = typer.Argument(
        ...,
        help="Files or directories: traces (.json/.json.gz), NCCL logs, "
        "nccl-tests output, Flight Recorder dumps, ncu --csv output.",
    ),
    fmt: str = typer.Option("text", "--format", "-f", help="text | json | html"),
    output: Path = typer.Option(None, "--output", "-o", help="Write the report here instead of stdout."),
    link: str = typer.Option(
        None,
        "--link",
        help="Link class nccl-tests should run over: nvswitch, nvlink, pcie, pcie_sys, efa, ib, socket.",
    ),
    fail_on: str = typer.Option(
        "critical", "--fail-on", help="Exit 1 at or above: info | warning | critical."
    ),
) -> None:
    """Break each rank's time into compute, communication, exposed communication and idle; match
    collectives across ranks; check transports, bandwidth and hangs.

    Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it; 2 bad input or usage,
    or an input that was empty or truncated (the report is printed and its warnings say which).

    Examples:

      clusterdoctor comm analyze traces/ --format html -o comm.html

      clusterdoctor comm analyze all_reduce_perf.log --link nvswitch --format json
    """
    from clusterdoctor.model import Severity
    from clusterdoctor.observe.comm.sources import load_comm_observations
    from clusterdoctor.rules.comm import LINK_CLASSES, comm_analysis, run_comm_rules
    from clusterdoctor.rules.registry import Observations

    if fmt not in ("text", "json", "html"):
        raise CliExit(2, f"error: unknown format {fmt!r}; choose text, json or html")
    if link is not None and link not in LINK_CLASSES:
        raise CliExit(2, f"error: --link {link!r}: choose one of {', '.join(LINK_CLASSES)}")
    try:
        threshold = Severity.parse(fail_on)
    except ValueError as e:
        raise CliExit(2, f"error: --fail-on: {e}") from None
    data = load_comm_observations(paths)
    obs = Observations(dict(data))
    if link:
        obs.put("comm_link_class", link)
    findings, skipped = run_comm_rules(obs)
    analysis = comm_analysis(obs)
    report = build_report(data, analysis, findings, skipped)
    if fmt == "json":
        import json

        text = json.dumps(report, indent=2, default=str)
    elif fmt == "html":
        from clusterdoctor.report.comm_html import render_comm_html

        text = render_comm_html(report, [r.timeline for r in analysis.ranks])
    else:
        text = render_text(report)
    from clusterdoctor.cli.common import write_output

    write_output(text, output)
    if data.get("incomplete_inputs"):  # the report's warnings say which input was cut or empty
        raise typer.Exit(2)
    worst = max((f.severity for f in findings), default=None)
    raise typer.Exit(EXIT_FINDINGS if worst is not None and worst >= threshold else EXIT_OK)


def build_report(
    data: dict[str, Any], analysis: Any, findings: list[Any], skipped: list[Any]
) -> dict[str, Any]:
    """The JSON document: ranks, collectives, nccl-tests runs, hangs, findings (diagnosis format)."""
    doc = {"schema": SCHEMA, "sources": list(data.get("comm", []))}
    doc.update(analysis.as_dict())
    doc["nccl_tests"] = [
        {
            "path": run.path,
            "collective": run.collective,
            "peak_busbw_gbs": run.peak_busbw(),
            "avg_busbw_gbs": run.avg_busbw_gbs,
            "rows": [
                {
                    "size": r.size_bytes,
                    "time_us": r.out_of_place.time_us,
                    "algbw_gbs": r.out_of_place.algbw_gbs,
                    "busbw_gbs": r.out_of_place.busbw_gbs,
                    "in_place_busbw_gbs": r.in_place.busbw_gbs,
                }
                for r in run.rows
            ],
        }
        for run in data.get("nccl_tests", [])
    ]
    doc["traces"] = [
        {
            "path": t.path,
            "rank": t.rank,
            "events": t.events_read,
            "skipped": t.skipped_summary(),
            "truncated": t.truncated,
        }
        for t in data.get("kineto", [])
    ]
    doc["findings"] = [f.as_dict() for f in findings]
    doc["skipped"] = [s.as_dict() for s in skipped]
    doc["warnings"] = list(data.get("warnings", [])) + list(analysis.warnings)
    return doc


def render_text(report: dict[str, Any]) -> str:
    """A plain-text report (no colour): rank table, collectives, findings."""
    lines = [f"clusterdoctor comm analyze — {len(report['sources'])} source(s)"]
    for t in report["traces"]:
        cut = " (truncated)" if t["truncated"] else ""
        lines.append(f"trace {t['path']}: rank {t['rank']}, {t['events']} events{cut}; {t['skipped']}")
    if report["ranks"]:
        lines.append("")
        lines.append(
            f"{'rank':>6} {'span ms':>10} {'compute %':>10} {'comm ms':>10} {'exposed %':>10} {'overlap %':>10} {'idle %':>8}"
        )
        for r in report["ranks"]:
            tb = r["temporal_breakdown_pct"]
            lines.append(
                f"{r['rank']!s:>6} {r['span_us'] / 1000:>10.1f} {tb['compute']:>10.2f} {r['comm_time_us'] / 1000:>10.1f} "
                f"{tb['exposed_comm']:>10.2f} {r['comm_comp_overlap_pct']:>10.2f} {tb['idle']:>8.2f}"
            )
    if report["collectives"]:
        lines.append("")
        lines.append(
            f"{'collective':<16} {'bytes':>12} {'count':>6} {'true µs':>10} {'skew µs':>10} {'busbw GB/s':>11}"
        )
        for c in report["collectives"][:40]:
            bus = f"{c['busbw_gbs']:.3f}" if c["busbw_gbs"] is not None else "-"
            lines.append(
                f"{c['op']:<16} {c['nbytes'] if c['nbytes'] is not None else '-':>12} {c['count']:>6} "
                f"{c['true_us_mean']:>10.1f} {c['skew_us_mean']:>10.1f} {bus:>11}"
            )
    for run in report["nccl_tests"]:
        peak = run["peak_busbw_gbs"]
        lines.append("")
        lines.append(
            f"nccl-tests {run['path']}: {run['collective']}, bandwidth-bound busbw "
            f"{peak if peak is None else round(peak, 2)} GB/s (printed average {run['avg_busbw_gbs']})"
        )
    lines.append("")
    if report["findings"]:
        for f in report["findings"]:
            lines.append(f"[{f['severity'].upper()}] {f['rule']} {f['title']}")
            lines.append(f"  {f['summary']}")
            for ev in f["evidence"][:4]:
                val = f" = {ev['value']}" if "value" in ev else ""
                thr = f" (threshold {ev['threshold']})" if "threshold" in ev else ""
                lines.append(f"    - {ev['description']}{val}{thr}")
            if f["fix"]:
                lines.append(f"  fix: {f['fix']}")
            for v in f["verify"]:
                lines.append(f"  verify: {v}")
    else:
        lines.append("No communication finding.")
    if report["skipped"]:
        lines.append("")
        lines.append("Not checked:")
        for s in report["skipped"]:
            lines.append(f"  {s['rule']}: {s['reason']}")
    for w in report["warnings"]:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"
