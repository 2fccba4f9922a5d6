"""Errors that cross module boundaries.

Parsers raise :class:`InputError` for anything wrong with their input (truncated, garbage, wrong
format, unreadable); the CLI turns it into one line naming the file and exits 2. Nothing else may
escape a parser.
"""

from __future__ import annotations


class ClusterDoctorError(Exception):
    """Base class of every error clusterdoctor raises on purpose."""


class InputError(ClusterDoctorError):
    """Bad input: a file or text that cannot be read as the format it claims to be.

    ``path`` names the file (or a description such as ``"<stdin>"``), ``line`` the 1-based line
    where the problem was found when known, and ``reason`` says what was wrong in words a user can
    act on.
    """

    def __init__(self, reason: str, path: str | None = None, line: int | None = None) -> None:
        self.reason = reason
        self.path = path
        self.line = line
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.reason}"

    def with_path(self, path: str) -> InputError:
        """The same error, naming ``path`` when the parser did not know the file name."""
        if self.path is None:
            return InputError(self.reason, path, self.line)
        return self


class UsageError(ClusterDoctorError):
    """The command was asked for something it cannot do (bad option combination, impossible plan)."""


class CollectError(ClusterDoctorError):
    """A live source could not be read (permission, vanished process, timeout)."""
