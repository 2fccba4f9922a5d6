"""Glue for ``numa check``: load, audit, decide, and write the JUnit/archive side outputs."""

from __future__ import annotations

import json
from pathlib import Path

from clusterdoctor.cli.common import check_writable, write_output


def run_check(
    *,
    pids,
    match,
    expect_nodes,
    junit: Path | None,
    archive: Path | None,
    from_file,
    sysfs_root,
    proc_root,
    as_json,
) -> tuple[int, str]:
    from clusterdoctor import diagnosis
    from clusterdoctor.cli.numa import check_proc_root
    from clusterdoctor.topology import check
    from clusterdoctor.topology.build import load_any

    check_proc_root(proc_root)
    check_writable(junit, "--junit")
    if archive is not None and archive.exists() and not archive.is_dir():
        from clusterdoctor.errors import UsageError

        raise UsageError(f"--archive {archive}: exists and is not a directory")
    topo = load_any(from_file, sysfs_root)
    placements = []
    if topo.nodes:
        placements = diagnosis.audit_processes(
            topo, pids=pids, match=match, proc_root=proc_root, sysfs_root=sysfs_root or "/"
        )
    if pids:
        selection = "--pid " + " ".join(str(p) for p in pids)
    elif match:
        selection = f"--match {match!r} matched nothing"
    else:
        selection = "no process uses a GPU or RDMA NIC"
    result = check.decide(topo, placements, expect_nodes, selection)
    if result.code != check.OK and archive is not None:
        result.archived_to = check.archive_evidence(result, archive, sysfs_root or "/", from_file=from_file)
    if junit is not None:
        from clusterdoctor.report.junit import render_junit_cases

        cases = [("numa-information", None if result.numa_ok else result.message, result.message)]
        if result.numa_ok:  # "nothing checked" fails the gate: its own testcase says so
            cases.append(
                (
                    "processes-checked",
                    None if result.checked else result.message,
                    f"{result.checked} process(es) checked",
                )
            )
        cases += [
            (f"pid-{v.pid}-{v.comm}", v.reason if v.code != check.OK else None, v.reason)
            for v in result.verdicts
        ]
        write_output(render_junit_cases("clusterdoctor.numa-check", cases), junit)
    if as_json:
        return result.code, json.dumps(result.as_dict(), indent=2)
    from clusterdoctor.report.text import terminal_width, wrap

    width = terminal_width()
    lines = wrap(
        f"numa check: {'OK' if result.code == 0 else 'FAIL'} (exit {result.code}) — {result.message}",
        width,
        rest="  ",
    )
    for v in result.verdicts:
        lines += wrap(f"pid {v.pid} ({v.comm}): {v.reason}", width, first="  ", rest="    ")
    if result.archived_to:
        lines += wrap(f"evidence saved to {result.archived_to}", width, first="  ", rest="    ")
    return result.code, "\n".join(lines)
