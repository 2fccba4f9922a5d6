"""``clusterdoctor comm analyze``: communication diagnosis from NCCL logs, nccl-tests output,
PyTorch profiler traces, Flight Recorder dumps and ncu CSV (files or directories, many ranks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from clusterdoctor.cli.common import EXIT_FINDINGS, EXIT_OK, CliExit, check_writable

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
    workers: int = typer.Option(
        0, "--workers", help="Read the inputs in this many local processes (each file once)."
    ),
    ray: bool = typer.Option(
        False, "--ray", help="Read the inputs on a Ray cluster (extra `sim`); never chosen implicitly."
    ),
    ray_address: str = typer.Option(
        None,
        "--ray-address",
        help="With --ray: the cluster (default: a local one); the files' bytes are shipped to it.",
    ),
) -> None:
    """Break each rank's time into compute, communication, exposed communication and idle; match
    collectives across ranks; check transports, bandwidth and hangs.

    Exit codes: 0 nothing at or above --fail-on; 1 findings at or above it; 2 bad input or usage,
    or an input that was empty or truncated (the report is printed and its warnings say which).

    Examples:

      clusterdoctor comm analyze traces/ --format html -o comm.html

      clusterdoctor comm analyze all_reduce_perf.log --link nvswitch --format json

      clusterdoctor comm analyze traces/ --workers 8      (fail-slow: straggler rank, class, onset)

      clusterdoctor comm analyze traces/ --ray --ray-address ray://head:10001
    """
    from clusterdoctor.model import Severity
    from clusterdoctor.observe.comm.sources import load_comm_observations
    from clusterdoctor.rules.comm import LINK_CLASSES, comm_analysis, run_comm_rules
    from clusterdoctor.rules.registry import Observations

    check_writable(output, "--output")
    if fmt not in ("text", "json", "html"):
        raise CliExit(2, f"error: unknown format {fmt!r}; choose text, json or html")
    if link is not None and link not in LINK_CLASSES:
        raise CliExit(2, f"error: --link {link!r}: choose one of {', '.join(LINK_CLASSES)}")
    try:
        threshold = Severity.parse(fail_on)
    except ValueError as e:
        raise CliExit(2, f"error: --fail-on: {e}") from None
    use_ray = ray or ray_address is not None
    fs_results = None
    if use_ray or workers > 1:  # each file read once, by the workers (observe/comm/parallel.py)
        from clusterdoctor.observe.comm.parallel import load_comm_parallel

        data, fs_results = load_comm_parallel(paths, workers or None, use_ray, ray_address)
    else:
        data = load_comm_observations(paths)
    obs = Observations(dict(data))
    if link:
        obs.put("comm_link_class", link)
    findings, skipped = run_comm_rules(obs)
    analysis = comm_analysis(obs)
    from clusterdoctor.cli.comm_failslow import failslow_report

    # the parallel load already made the step summaries (fs_results): no second read of the files
    fs_findings, fs_section = failslow_report(data, paths, results=fs_results)
    from clusterdoctor.rules.registry import fold_symptoms

    # the waiting ranks' findings (COMM006, COMM007) are symptoms of the straggler: folded into it
    findings = sorted(
        fold_symptoms([*findings, *fs_findings]), key=lambda f: (-f.score, f.rule, f.subject or "")
    )
    report = build_report(data, analysis, findings, skipped, obs)
    report["inputs"] = [str(p) for p in paths]
    report["failslow"] = fs_section
    if fmt == "json":
        import json

        text = json.dumps(report, indent=2, default=str)
    elif fmt == "html":
        from clusterdoctor.report.comm_html import render_comm_html

        text = render_comm_html(report, [r.timeline for r in analysis.ranks])
    else:
        from clusterdoctor.report.comm_text import render_text

        text = render_text(report, inputs=report["inputs"])
    from clusterdoctor.cli.common import write_output

    write_output(text, output)
    if data.get("incomplete_inputs"):  # the report's warnings say which input was cut or empty
        raise typer.Exit(2)
    worst = max((f.severity for f in findings), default=None)
    raise typer.Exit(EXIT_FINDINGS if worst is not None and worst >= threshold else EXIT_OK)


TABLES_LISTED = 100


def nccl_tests_tables(run: Any) -> dict[str, Any]:
    """A run's rows for the report: the table itself when there is one; for a log of repeated runs,
    each size's median over the tables, how many tables, and each table's bandwidth (the first
    TABLES_LISTED): the report grows with the sizes tested, not with the repetitions."""
    tables = run.tables() if hasattr(run, "tables") else [run.rows]
    fields = ("time_us", "algbw_gbs", "busbw_gbs", "in_place_busbw_gbs")

    def values(r: Any) -> tuple[Any, ...]:
        o = r.out_of_place
        return (o.time_us, o.algbw_gbs, o.busbw_gbs, r.in_place.busbw_gbs)

    summary = getattr(run, "summary", None) or {}
    n_tables = max(len(tables), getattr(run, "n_tables", 0))
    if n_tables <= 1 and not summary:
        return {
            "tables": len(tables),
            "rows": [dict(zip(("size", *fields), (r.size_bytes, *values(r)))) for r in run.rows],
        }
    from collections import Counter

    from clusterdoctor.observe.comm.nccl_tests import counter_median

    # each size's values as value -> count: the kept rows and those summarised past MAX_ROWS
    by_size: dict[int, list[Counter[float]]] = {}
    n_size: Counter[int] = Counter()
    for r in run.rows:
        cols = by_size.setdefault(r.size_bytes, [Counter() for _ in fields])
        n_size[r.size_bytes] += 1
        for c, v in zip(cols, values(r)):
            if v is not None:
                c[v] += 1
    for size, sm in summary.items():
        cols = by_size.setdefault(size, [Counter() for _ in fields])
        n_size[size] += sm.rows
        for c, name in zip(cols, fields):
            c.update(sm.values[name])
    rows = []
    for size, cols in sorted(by_size.items()):
        row: dict[str, Any] = {"size": size, "tables": n_size[size]}
        for c, name in zip(cols, fields):
            row[name] = counter_median(c)
        rows.append(row)
    return {
        "tables": n_tables,
        "rows_are": "median over the tables",
        "rows": rows,
        "per_table": [
            {"first_line": t[0].line, "rows": len(t), "peak_busbw_gbs": _peak(t)}
            for t in tables[:TABLES_LISTED]
        ],
        "per_table_omitted": max(0, n_tables - min(len(tables), TABLES_LISTED)),
    }


def _peak(rows: list[Any]) -> float | None:
    from statistics import median

    big = [r for r in rows if r.size_bytes >= 1 << 28] or sorted(rows, key=lambda r: r.size_bytes)[
        len(rows) * 3 // 4 :
    ]
    vals = [
        v for r in big for v in (r.out_of_place.busbw_gbs, r.in_place.busbw_gbs) if v is not None and v > 0
    ]
    return median(vals) if vals else None


def build_report(
    data: dict[str, Any], analysis: Any, findings: list[Any], skipped: list[Any], obs: Any = None
) -> dict[str, Any]:
    """The JSON document: ranks, collectives, nccl-tests runs (and the link class they match), hangs,
    jobs, findings (diagnosis format), the files skipped and why."""
    from clusterdoctor.rules.comm import nccl_tests_link
    from clusterdoctor.rules.registry import Observations

    obs = obs if obs is not None else Observations(dict(data))
    doc: dict[str, Any] = {"schema": SCHEMA, "sources": list(data.get("comm", []))}
    doc["read_counts"] = {
        k: len(data.get(k, [])) for k in ("kineto", "nccl_log", "nccl_tests", "flight_recorder", "ncu")
    }
    doc["unrecognised"] = [{"path": p, "reason": r} for p, r in data.get("unrecognised", [])]
    doc.update(analysis.as_dict())
    doc["nccl_tests"] = [
        {
            "path": run.path,
            "collective": run.collective,
            "peak_busbw_gbs": run.peak_busbw(),
            "avg_busbw_gbs": run.avg_busbw_gbs,
            "hosts": sorted(run.hosts),
            "gpu_models": sorted(run.gpu_models),
            "link": nccl_tests_link(obs, run).as_dict() if run.collective in (None, "all_reduce") else None,
            **nccl_tests_tables(run),
        }
        for run in data.get("nccl_tests", [])
    ]
    jobs = {t.path: (j.label, r) for j in analysis.jobs for r, t in j.ranks.items()}
    unmatched = {t.path: j.label for j in analysis.jobs for t in j.unmatched}
    copies = {c: kept for j in analysis.jobs for c, kept in j.copies.items()}
    doc["traces"] = [
        {
            "path": t.path,
            "rank": t.rank,
            "events": t.events_read,
            "skipped": t.skipped_summary(),
            "truncated": t.truncated,
            "job": jobs[t.path][0] if t.path in jobs else unmatched.get(t.path),
            "compared": t.path in jobs,
            "copy_of": copies.get(t.path),
        }
        for t in data.get("kineto", [])
    ]
    doc["findings"] = [f.as_dict() for f in findings]
    doc["skipped"] = [s.as_dict() for s in skipped]
    doc["warnings"] = list(data.get("warnings", [])) + list(analysis.warnings)
    return doc
