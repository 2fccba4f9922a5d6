"""Choosing and writing a report format for a Diagnosis (shared by diagnose and numa commands)."""

from __future__ import annotations

import sys
from pathlib import Path

from clusterdoctor.cli.common import CliExit, check_writable, write_output
from clusterdoctor.model import Diagnosis

FORMATS = ("text", "json", "html", "junit")


def check_choice(fmt: str, out: Path | None) -> None:
    """Refuse a bad ``--format`` or an unwritable ``-o`` before the (possibly long) diagnosis runs."""
    if fmt not in FORMATS:
        raise CliExit(2, f"error: --format {fmt!r}: choose one of {', '.join(FORMATS)}")
    check_writable(out, "--output")


def emit(diag: Diagnosis, fmt: str, out: Path | None, *, verbose: bool = False) -> None:
    """Render ``diag`` as ``fmt`` to ``out`` (or stdout)."""
    if fmt == "json":
        from clusterdoctor.report.json import render_json

        text = render_json(diag)
    elif fmt == "html":
        from clusterdoctor.report.html import render_html

        text = render_html(diag)
    elif fmt == "junit":
        from clusterdoctor.report.junit import render_junit

        text = render_junit(diag)
    elif fmt == "text":
        from clusterdoctor.cli.common import color_enabled
        from clusterdoctor.report.text import render_text

        color = out is None and color_enabled(sys.stdout)
        text = render_text(diag, color=color, verbose=verbose)
    else:
        raise CliExit(2, f"error: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    write_output(text, out)
