"""Is a text a kernel or system log, by the shape of its lines alone?

Used by :mod:`clusterdoctor.observe.detect` as the last step before refusing an input: a ``dmesg`` excerpt
or a ``journalctl -u <unit>`` excerpt that holds no catalogued message (a driver's normal boot lines, a
service starting) is output of a program we read, so it is read -- and nothing in it is judged -- rather
than refused as "unrecognised input". A line counts when it starts the way the program writes its lines:

- ``dmesg``: ``[    5.376443] ...`` (seconds since boot), ``dmesg -T``: ``[Mon Mar  4 10:00:01 2024] ...``,
  ``dmesg -e``/``--reltime``: ``[Mar 4 10:00] ...`` / ``[  +0.000123] ...``;
- syslog / ``journalctl`` (short): ``Apr 23 03:18:36[.522337] host unit[pid]: ...``;
- ``journalctl -o short-iso``/rsyslog RFC 3339: ``2024-03-04T10:00:01[.123][+00:00] host unit[pid]: ...``.

Continuation lines (a wrapped message, a stack dump's indented lines) need not match: the text is a log
when most of its lines do (:data:`MIN_SHARE`).
"""

from __future__ import annotations

import re

__all__ = ["MIN_SHARE", "system_log_kind"]

MIN_SHARE = 0.6  # of the non-empty lines, at least this share in a log line format
MAX_LINES = 2000  # lines looked at (the head of a paste is enough to say what it is)

_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DMESG = re.compile(
    r"^\s{0,4}\[(?:\s{0,12}\+?\d{1,10}\.\d{1,9}|[A-Z][a-z]{2} "
    + _MON
    + r"\s{1,2}\d{1,2} \d\d:\d\d:\d\d \d{4}"
    r"|" + _MON + r"\s{0,2}\d{1,2} \d\d:\d\d)\]"
)
_SYSLOG = re.compile(
    r"^\s{0,4}(?:" + _MON + r" {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d{1,9})?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)"
    r" [\w.\-]{1,128} [\w.\-@/]{1,128}(?:\[\d{1,10}\])?: "
)


def system_log_kind(text: str) -> str | None:
    """``"kernel log"`` or ``"system log"`` when most lines of ``text`` are in one of those formats, else
    None (see the module docstring)."""
    lines = [ln for ln in text.splitlines()[:MAX_LINES] if ln.strip()]
    if not lines:
        return None
    kernel = system = 0
    for ln in lines:
        if _DMESG.match(ln):
            kernel += 1
        elif _SYSLOG.match(ln):
            system += 1
            if " kernel: " in ln[:200]:
                kernel += 1
    if kernel + system < max(1, MIN_SHARE * len(lines)) and not (kernel + system >= 1 and len(lines) <= 2):
        return None
    return "kernel log" if kernel >= system else "system log"
