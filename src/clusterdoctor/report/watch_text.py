"""The terminal report of ``clusterdoctor watch``: one block per job, findings first, 80 columns
by default (``$COLUMNS`` honoured). Plain text: it refreshes in place on a terminal."""

from __future__ import annotations

import os
import shutil
import textwrap
from typing import Any

from clusterdoctor.escape import shown


def _width() -> int:
    try:
        w = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        w = 0
    return max(40, w or shutil.get_terminal_size((80, 24)).columns)


def render_watch_text(report: dict[str, Any], width: int | None = None) -> str:
    """The report as wrapped plain text."""
    w = width or _width()
    out: list[str] = []

    def para(text: str, indent: str = "", sub: str | None = None) -> None:
        out.extend(
            textwrap.wrap(
                shown(text),
                w,
                initial_indent=indent,
                subsequent_indent=sub if sub is not None else indent + "  ",
                break_long_words=False,  # a path or rank list stays whole, as in report.text.wrap
                break_on_hyphens=False,  # "fail-slow", "data-loader" are not split at the hyphen
            )
            or [indent]
        )

    para(f"clusterdoctor watch — {report['source']}")
    for j in report["jobs"]:
        base = j.get("baseline_step_s")
        base_s = f", baseline step {base * 1000:.1f} ms" if base else ""
        last = j.get("last_step")
        unit = "steps" if j["unit"] == "step" else "samples"
        para(f"job {j['job']}: {j['ranks']} ranks, {j['columns']} {unit}, last step {last}{base_s}")
    out.append("")
    findings = report["findings"]
    if not findings:
        para("No fail-slow: no straggler, slow link, slow data loader or silent rank in the data read.")
    for i, f in enumerate(findings, 1):
        subj = f" [{f['subject']}]" if f.get("subject") else ""
        para(
            f"{i}. {f['severity'].upper()} {f['rule']} {f['title']}{subj} (confidence {f['confidence']:.2f})"
        )
        para(f["summary"], "   ", "   ")
        for e in f["evidence"]:
            val = f" = {e['value']}" if "value" in e else ""
            unit = f" {e['unit']}" if e.get("unit") else ""
            thr = f" (threshold {e['threshold']})" if "threshold" in e else ""
            para(f"- {e['description']}{val}{unit}{thr}", "   ", "     ")
        if f.get("fix"):
            para(f"fix: {f['fix']}", "   ", "     ")
        for v in f.get("verify") or []:
            para(f"verify: {v}", "   ", "     ")
        out.append("")
    for s in report.get("skipped") or []:
        para(f"not checked: {s['rule']}: {s['reason']}")
    for warn in report.get("warnings") or []:
        para(f"warning: {warn}")
    return "\n".join(out).rstrip() + "\n"
