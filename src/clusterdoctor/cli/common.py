"""What every command shares: turning errors into one line and an exit code, writing output.

Exit codes are a contract (README "Exit codes"): 0 success; 1 findings at or above ``--fail-on``
(diagnose, comm analyze); 2 bad input or usage — unless the command documents another code for it
(``numa check`` uses 2 for "not bound", so its bad input or usage is 4: :data:`ERROR_EXIT_CODES`).
Whatever goes wrong, the user sees one line on stderr, never a traceback (``CLUSTERDOCTOR_DEBUG=1``
shows the traceback of an internal error).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import typer

from clusterdoctor.errors import ClusterDoctorError, CollectError, InputError, UsageError

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70  # sysexits EX_SOFTWARE: a bug in clusterdoctor, not in the input

# Commands whose "bad input or usage" code is not 2, by command path below ``clusterdoctor``.
ERROR_EXIT_CODES: dict[str, int] = {"numa check": 4}


def error_exit_code(command_path: str) -> int:
    """The documented exit code for bad input or usage of ``command_path`` (e.g. ``"numa check"``)."""
    return ERROR_EXIT_CODES.get(command_path.strip(), EXIT_BAD_INPUT)


class CliExit(Exception):
    """Raised by commands to exit with a specific code after printing a message."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or "")
        self.code = code
        self.message = message


def _click():
    """The click that typer runs on (typer >= 0.2x vendors it as ``typer._click``)."""
    try:
        from typer import _click  # type: ignore[attr-defined]

        return _click
    except ImportError:  # pragma: no cover - older typer depends on click itself
        import click

        return click


COLOR_ENV = "CLUSTERDOCTOR_COLOR"  # auto | always | never (the root's --color sets it)
QUIET_ENV = "CLUSTERDOCTOR_QUIET"  # 1: no progress or notes on stderr (the root's --quiet sets it)


def color_enabled(stream: object) -> bool:
    """Whether output to ``stream`` is coloured: ``--color always|never`` decides; with ``auto`` (the
    default) a terminal gets colour unless ``NO_COLOR`` is set to anything (https://no-color.org)."""
    mode = os.environ.get(COLOR_ENV, "auto").strip().lower()
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False


def quiet() -> bool:
    """``--quiet``: no progress lines and no notes on stderr; errors and the report itself unchanged."""
    return os.environ.get(QUIET_ENV, "") not in ("", "0")


def help_wraps_whole_words() -> None:
    """Help text is wrapped at spaces only: an option or a file name in an example is never cut at
    its hyphen (``--etcd-`` / ``endpoints``), so what ``--help`` shows can be pasted as it is."""
    import importlib

    try:
        tw = importlib.import_module(f"{_click().__name__}._textwrap")
    except ImportError:  # pragma: no cover - a click without its own wrapper
        return
    base = getattr(tw, "TextWrapper", None)
    if base is None or getattr(base, "_cd_whole_words", False):
        return

    class WholeWords(base):  # type: ignore[misc, valid-type]
        _cd_whole_words = True

        def __init__(self, *a: object, **kw: object) -> None:
            kw["break_on_hyphens"] = False
            super().__init__(*a, **kw)

        def wrap(self, text: str) -> list[str]:
            """An example command too long for a line continues on the next with `` \\``, as a
            shell reads it, so that pasting the lines runs the command."""
            words = text.split()
            if not words or words[0] != "clusterdoctor":
                return super().wrap(text)
            lines: list[str] = []
            cur = self.initial_indent + words[0]
            for w in words[1:]:
                if len(cur) + 1 + len(w) + 2 > self.width:
                    lines.append(cur + " \\")
                    cur = self.subsequent_indent + "    " + w
                else:
                    cur += " " + w
            return [*lines, cur]

    tw.TextWrapper = WholeWords


STDIN_NAMES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")
# options whose value is written, never read: ``-o -`` is a file named "-"
OUTPUT_OPTIONS = ("-o", "--output", "--junit", "--archive")
# commands that read ``-`` themselves (a paste, shown as ``<stdin>`` in the report)
NATIVE_STDIN = ("diagnose", "gpu health")


def stdin_arguments(path: str, argv: list[str]) -> tuple[list[str], Path | None]:
    """``argv`` with standard input in place of ``-`` (and of ``/dev/stdin``, a pipe that readers
    refuse as a FIFO) wherever a file is read: stdin is read once, within the ``input`` limit, into a
    private temporary file named ``stdin`` whose path replaces each such argument. Returns the new
    argv and the temporary folder to remove (None when stdin was not asked for). Commands in
    :data:`NATIVE_STDIN` get ``-`` as it is."""
    wanted = [i for i, a in enumerate(argv) if a in STDIN_NAMES and not (i and argv[i - 1] in OUTPUT_OPTIONS)]
    if not wanted:
        return argv, None
    out = list(argv)
    if path in NATIVE_STDIN:
        for i in wanted:
            out[i] = "-"
        return out, None
    import tempfile

    from clusterdoctor.observe.limits import human_size, max_input_bytes

    if sys.stdin is None or sys.stdin.isatty():
        if sys.stdin is not None:
            print("clusterdoctor: reading standard input: end it with Ctrl-D", file=sys.stderr)
    cap = max_input_bytes()
    data = sys.stdin.buffer.read(cap + 1) if sys.stdin is not None else b""
    if len(data) > cap:
        raise InputError(f"more than the input limit of {human_size(cap)}", "<stdin>")
    if not data.strip():
        raise InputError("empty (nothing was piped to standard input)", "<stdin>")
    folder = Path(tempfile.mkdtemp(prefix="clusterdoctor-stdin-"))
    f = folder / "stdin"
    f.write_bytes(data)
    for i in wanted:
        out[i] = str(f)
    return out, folder


def command_path(cmd: object, args: Sequence[str]) -> str:
    """The sub-command path ``args`` selects in the Click command ``cmd`` (``"numa check"``; ``""`` for
    the root), without running it."""
    path: list[str] = []
    for a in args:
        sub = getattr(cmd, "commands", None)
        if not sub:
            break
        if a.startswith("-"):
            continue
        if a not in sub:
            break
        cmd = sub[a]
        path.append(a)
    return " ".join(path)


def _one_line(text: str) -> str:
    """An error message on one line (whitespace runs, newlines included, become one space); what it
    quotes of the input shown visibly (an escape sequence reads ``\\x1b``), URL credentials removed."""
    from clusterdoctor.escape import shown

    return shown(re.sub(r"\s+", " ", str(text)).strip())


def _err(msg: str) -> None:
    print(msg, file=sys.stderr)


def run_app(app: typer.Typer, args: Sequence[str] | None = None) -> int:
    """Run ``app`` on ``args`` (default ``sys.argv[1:]``) and map every error to one stderr line and an exit code.

    Usage errors (unknown option, bad value, missing argument) give the command's documented code
    (:func:`error_exit_code`) and one line naming the problem and where ``--help`` is; our errors
    (:class:`InputError` …) and OS errors (a missing directory, a refused port) the same code; a bug
    gives :data:`EXIT_INTERNAL` and one line (the traceback with ``CLUSTERDOCTOR_DEBUG=1``).
    """

    from clusterdoctor.escape import SafeStream

    # whatever is printed passes through SafeStream: a terminal escape or an undecodable byte in a
    # name that no report escaped is shown escaped, never obeyed (colours of our own output kept)
    saved = (sys.stdout, sys.stderr)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, SafeStream):
            setattr(sys, name, SafeStream(stream))
    try:
        return _run(app, args)
    finally:
        sys.stdout, sys.stderr = saved


def _run(app: typer.Typer, args: Sequence[str] | None) -> int:
    import typer.main

    argv = list(sys.argv[1:] if args is None else args)
    help_wraps_whole_words()
    root = typer.main.get_command(app)  # built once: the path lookup and the run share it
    path = command_path(root, argv)
    bad = error_exit_code(path)
    prog = f"clusterdoctor {path}".strip()
    exc = _click().exceptions
    no_args_is_help = getattr(exc, "NoArgsIsHelpError", ())  # click >= 8.2
    stdin_dir: Path | None = None
    try:
        argv, stdin_dir = stdin_arguments(path, argv)
        rv = root.main(args=argv, prog_name="clusterdoctor", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except SystemExit as e:
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except CliExit as e:
        if e.message:
            _err(f"clusterdoctor: {e.message}")
        return e.code
    except no_args_is_help as e:  # a group without a command: its help, as Click does
        e.show()
        return bad
    except exc.UsageError as e:
        where = e.ctx.command_path if e.ctx is not None else prog
        _err(f"{where}: error: {_one_line(e.format_message())} (see `{where} --help`)")
        return error_exit_code(where.removeprefix("clusterdoctor"))
    except typer.Abort:
        _err("clusterdoctor: aborted")
        return 1
    except exc.ClickException as e:
        _err(f"{prog}: error: {_one_line(e.format_message())}")
        return bad
    except InputError as e:
        _err(f"clusterdoctor: error: {_one_line(e.one_line())}")
        return bad
    except (UsageError, CollectError, ClusterDoctorError) as e:
        _err(f"clusterdoctor: error: {_one_line(str(e))}")
        return bad
    except KeyboardInterrupt:
        _err("clusterdoctor: interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:  # a path, a port or a device the environment refused
        what = f"{e.filename}: " if e.filename else ""
        _err(f"clusterdoctor: error: {what}{_one_line(e.strerror or str(e))}")
        return bad
    except Exception as e:  # a bug: one line, not a traceback, unless asked for
        if os.environ.get("CLUSTERDOCTOR_DEBUG"):
            import traceback

            traceback.print_exc()
        _err(
            f"clusterdoctor: internal error in `{prog}`: {type(e).__name__}: {_one_line(str(e))} "
            "(a bug: please report it; CLUSTERDOCTOR_DEBUG=1 shows the traceback)"
        )
        return EXIT_INTERNAL
    finally:
        if stdin_dir is not None:
            import shutil

            shutil.rmtree(stdin_dir, ignore_errors=True)


def check_writable(out: Path | None, what: str = "output") -> None:
    """Refuse early (one line, bad-input code) when ``out`` cannot be written: its folder is missing
    or is not a folder, or ``out`` is a folder — before a long run whose result would be lost."""
    if out is None:
        return
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise UsageError(f"{what} {out}: is a directory, expected a file name")
    if not parent.is_dir():
        raise UsageError(f"{what} {out}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{what} {out}: folder {parent} is not writable")


def write_output(text: str, out: Path | None) -> None:
    """Write ``text`` to ``out`` (atomically) or stdout."""
    if out is None:
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        return
    from clusterdoctor.escape import terminal_safe

    tmp = out.with_name(f".{out.name}.tmp")
    try:
        tmp.write_text(terminal_safe(text), encoding="utf-8")
        tmp.replace(out)
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from None
