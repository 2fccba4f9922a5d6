"""Text clusterdoctor did not write (file and member names, log lines, host names, URLs), shown safely.

Inputs come from machines that misbehave and from people who craft them: a member name may hold
``ESC[2J`` (clears the terminal), an OSC sequence (sets the window title), a raw newline (forges a
report line), a right-to-left override, or bytes that are not UTF-8 (Python carries them as lone
surrogates, which no UTF-8 file can hold). Two layers keep reports honest:

- :func:`shown` for a field a report prints on one line: control characters, line and paragraph
  separators, bidirectional overrides and lone surrogates become visible escapes (``\\x1b``, ``\\n``,
  ``\\u202e``; a byte that was not UTF-8 reads ``\\xff``), and credentials are removed from URLs
  (:func:`clusterdoctor.redact.redact_urls`);
- :class:`SafeStream` around ``sys.stdout``/``sys.stderr`` (installed by the CLI): whatever still
  carries such a character on its way out is escaped there (``\\u001b``, valid in JSON strings too),
  keeping newlines and tabs, and the colours of our own output on a terminal (SGR sequences only).

XML 1.0 (JUnit) cannot hold most control characters at all: the escaped text is what it holds.
"""

from __future__ import annotations

import io
import re
from typing import Any, TextIO

__all__ = ["SafeStream", "shown", "terminal_safe", "visible", "write_trusted"]

# C0 and C1 controls, DEL, line/paragraph separators, bidi embeddings/overrides/isolates, BOM,
# non-characters U+FFFE/U+FFFF, and surrogates (undecodable bytes under surrogateescape)
_OTHER = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ufffe\uffff\ud800-\udfff"
_FIELD = re.compile("[\x00-\x1f" + _OTHER + "]")
_STREAM = re.compile("[\x00-\x08\x0b-\x1f" + _OTHER + "]")  # a stream keeps its tabs and newlines
_SGR = re.compile(r"\x1b\[[0-9;]{0,32}m")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _field_escape(m: re.Match[str]) -> str:
    c = m.group(0)
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"  # the byte surrogateescape carried
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def visible(text: Any) -> str:
    """``text`` on one line with every unsafe character as a visible escape (see the module doc)."""
    s = str(text)
    return _FIELD.sub(_field_escape, s) if _FIELD.search(s) else s


def shown(text: Any) -> str:
    """What a report prints of a value it did not write: :func:`visible`, URL credentials removed."""
    from clusterdoctor.redact import redact_urls

    s = str(text)
    if "://" in s or "=" in s:
        s = redact_urls(s)
    return visible(s)


def _stream_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def terminal_safe(text: str, keep_sgr: bool = False) -> str:
    """``text`` with unsafe characters escaped as ``\\uXXXX``, newlines and tabs kept; ``keep_sgr``
    keeps colour sequences (``ESC[...m``), and only those, for a terminal."""
    if not _STREAM.search(text):
        return text
    if not keep_sgr:
        return _STREAM.sub(_stream_escape, text)
    out, pos = [], 0
    for m in _SGR.finditer(text):
        out.append(_STREAM.sub(_stream_escape, text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_STREAM.sub(_stream_escape, text[pos:]))
    return "".join(out)


class SafeStream(io.TextIOBase):
    """A text stream that passes everything written through :func:`terminal_safe` to ``inner``.
    It reports ``inner``'s encoding and errors (so that Click writes to it as it is) and accepts
    text only."""

    def __init__(self, inner: TextIO, keep_sgr: bool | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.keep_sgr = _isatty(inner) if keep_sgr is None else keep_sgr

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", "strict")

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:  # type: ignore[override]
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.inner.write(terminal_safe(s, self.keep_sgr))
        return len(s)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return _isatty(self.inner)

    def fileno(self) -> int:
        return self.inner.fileno()


def write_trusted(stream: Any, text: str) -> None:
    """Write control output of our own (a progress line's ``\\r``, the screen clear of a refreshing
    report) past :class:`SafeStream`'s filter; ``text`` must hold nothing from the inputs unescaped."""
    (stream.inner if isinstance(stream, SafeStream) else stream).write(text)


def _isatty(f: Any) -> bool:
    try:
        return bool(f.isatty())
    except (AttributeError, ValueError, OSError):
        return False
