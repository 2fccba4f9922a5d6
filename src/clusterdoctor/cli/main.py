"""The ``clusterdoctor`` entry point.

Each command group lives in its own module (``cli/numa.py``, ``cli/diagnose.py`` …); they import the
library lazily inside commands so that ``clusterdoctor --help`` stays fast.
"""

from __future__ import annotations

import importlib
import sys

import typer

from clusterdoctor import __version__

app = typer.Typer(
    name="clusterdoctor",
    help=(
        "Find out why a GPU training cluster got slow, prove it with evidence, and fix it.\n\n"
        "Start with `clusterdoctor diagnose` on a node; `clusterdoctor rules` lists what is checked.\n\n"
        "Exit codes: 0 success; 1 findings at or above --fail-on (diagnose, comm analyze, gpu health, "
        "watch) or nothing could be checked (gpu health, numa audit/probe/check); 2 bad input "
        "or usage, in one line on stderr; numa check has its own (4 for bad usage: see its --help); "
        "70 an internal error (a bug; CLUSTERDOCTOR_DEBUG=1 shows the traceback). "
        "Where a command reads a file, `-` reads standard input."
    ),
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# (module, attribute, group name or None for top-level commands registered by the module)
GROUPS: tuple[tuple[str, str | None], ...] = (
    ("clusterdoctor.cli.diagnose", None),
    ("clusterdoctor.cli.rules", None),
    ("clusterdoctor.cli.numa", "numa"),
    ("clusterdoctor.cli.collect", None),
    ("clusterdoctor.cli.comm", "comm"),
    ("clusterdoctor.cli.qat", "qat"),
    ("clusterdoctor.cli.sim", "sim"),
    ("clusterdoctor.cli.serve", "serve"),
    ("clusterdoctor.cli.watch", None),
    ("clusterdoctor.cli.gpu", "gpu"),
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"clusterdoctor {__version__}")
        raise typer.Exit()


def _limits(values: list[str] | None) -> list[str] | None:
    from clusterdoctor.observe.limits import set_limit

    for v in values or []:
        try:
            set_limit(v)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    return values


COLOR_MODES = ("auto", "always", "never")


def _color(value: str | None) -> str | None:
    import os

    from clusterdoctor.cli.common import COLOR_ENV

    if value is None:
        return None
    if value not in COLOR_MODES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(COLOR_MODES)}")
    os.environ[COLOR_ENV] = value
    from clusterdoctor.cli.common import color_enabled

    for stream in (sys.stdout, sys.stderr):  # the output filter keeps colour only where it is wanted
        if hasattr(stream, "keep_sgr"):
            stream.keep_sgr = color_enabled(getattr(stream, "inner", stream))
    return value


def _quiet(value: bool) -> bool:
    import os

    from clusterdoctor.cli.common import QUIET_ENV

    if value:
        os.environ[QUIET_ENV] = "1"
    return value


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
    limit: list[str] = typer.Option(
        None,
        "--limit",
        callback=_limits,
        metavar="NAME=VALUE",
        help="Raise or lower an input budget for this run (repeatable): input, inflated, archive, members, "
        "nesting, depth, records, seconds; e.g. --limit inflated=16G. Defaults and environment variables: "
        "docs/limits.md.",
    ),
    color: str = typer.Option(
        None,
        "--color",
        callback=_color,
        metavar="WHEN",
        help="Colour in text output: auto (a terminal, unless NO_COLOR is set), always or never.",
    ),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        callback=_quiet,
        help="No progress lines or notes on stderr; errors still print.",
    ),
) -> None:
    """Root options."""


def _register() -> None:
    for mod_name, group in GROUPS:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name == mod_name:
                continue  # group not built yet
            raise
        if group is None:
            mod.register(app)
        else:
            app.add_typer(mod.app, name=group)


_register()


def main() -> None:
    """Console-script entry: run the app; errors become one line and exit code 2."""
    from clusterdoctor.cli.common import run_app

    sys.exit(run_app(app))


if __name__ == "__main__":
    main()
