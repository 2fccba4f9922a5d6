"""``clusterdoctor qat``: render a saved QAT drift-monitor state."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="QAT health: per-layer drift of quantizer inputs.", no_args_is_help=True)


@app.command("report")
def report(
    state_file: Path = typer.Argument(..., help="State written by DriftMonitor.save()."),
    json_out: bool = typer.Option(False, "--json", help="Print the state as JSON."),
    html_out: bool = typer.Option(
        False, "--html", help="Print a self-contained HTML page (inline SVG histograms)."
    ),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
) -> None:
    """Per-layer drift table (score, KL, Δkurtosis, thresholds, action, reason) of a saved state."""
    from clusterdoctor.cli.common import EXIT_BAD_INPUT, CliExit, check_writable, write_output
    from clusterdoctor.errors import InputError
    from clusterdoctor.training.qat import render
    from clusterdoctor.training.qat.state import load_state

    if json_out and html_out:
        raise CliExit(EXIT_BAD_INPUT, "error: choose one of --json and --html")
    check_writable(output, "--output")
    try:
        state = load_state(state_file)
    except InputError as e:
        raise CliExit(EXIT_BAD_INPUT, f"error: {e.one_line()}") from None
    if json_out:
        text = render.render_json(state)
    elif html_out:
        text = render.render_html(state)
    else:
        from clusterdoctor.report.text import terminal_width

        text = render.render_text(state, width=terminal_width() if output is None else 80)
    write_output(text, output)
