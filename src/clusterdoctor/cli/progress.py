"""Progress of long work on stderr (never on stdout, never in a report).

On a terminal one line is rewritten in place (``reading 12/340 etcd-m0.log``) and cleared at the
end. Elsewhere (a CI log, a pipe, a script capturing stderr) nothing is printed at all: what such a
reader gets on stderr is the one-line error, if there is one, and nothing before it — also when the
machine is slow.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from clusterdoctor.escape import visible, write_trusted


class Progress:
    """A ``progress(done, total, what)`` callback for :func:`clusterdoctor.diagnosis.load_sources`."""

    def __init__(
        self,
        verb: str,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.verb = verb
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.last = -1e9
        from clusterdoctor.cli.common import quiet

        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) and not quiet()
        self.drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __call__(self, done: int, total: int, what: str) -> None:
        now = self.clock()
        if self.tty:
            if now - self.last < 0.1 and done < total:
                return
            width = _columns()
            name = visible(os.path.basename(what)) if what else ""
            line = f"{self.verb} {done}/{total} {name}"[: max(10, width - 1)]
            write_trusted(self.stream, "\r" + line.ljust(max(10, width - 1)))  # its \r is ours
            self.stream.flush()
            self.drawn = True
            self.last = now
            return
        # not a terminal: no progress (see the module docstring)

    def close(self) -> None:
        if self.tty and self.drawn:
            write_trusted(self.stream, "\r" + " " * max(10, _columns() - 1) + "\r")
            self.stream.flush()
            self.drawn = False


def _columns() -> int:
    try:
        return int(os.environ.get("COLUMNS", "")) or os.get_terminal_size(2).columns
    except (ValueError, OSError):
        return 80
