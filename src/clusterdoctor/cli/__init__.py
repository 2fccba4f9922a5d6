"""Command line: a Typer app with one module per command group. Thin: no logic here."""
