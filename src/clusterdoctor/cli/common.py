"""What every command shares: turning errors into one line and an exit code, writing output."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from clusterdoctor.errors import ClusterDoctorError, CollectError, InputError, UsageError

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2


class CliExit(Exception):
    """Raised by commands to exit with a specific code after printing a message."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or "")
        self.code = code
        self.message = message


def run_app(app: typer.Typer) -> int:
    """Run ``app`` and map our errors to one stderr line and an exit code.

    Typer (standalone mode) already turns usage errors into a message and exit code 2.
    """
    try:
        app(prog_name="clusterdoctor")
        return 0
    except SystemExit as e:
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except CliExit as e:
        if e.message:
            print(f"clusterdoctor: {e.message}", file=sys.stderr)
        return e.code
    except InputError as e:
        print(f"clusterdoctor: error: {e.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (UsageError, CollectError, ClusterDoctorError) as e:
        print(f"clusterdoctor: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("clusterdoctor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def write_output(text: str, out: Path | None) -> None:
    """Write ``text`` to ``out`` (atomically) or stdout."""
    if out is None:
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        return
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError as e:
        raise CliExit(EXIT_BAD_INPUT, f"error: cannot write {out}: {e.strerror or e}") from None
