"""The path a storage message is about when its entry's pattern does not name one.

``ls: cannot access /mnt/dataset/: Stale file handle``, ``cp: cannot create regular file '/ckpt/x.pt':
No space left on device``: the program that hit the error prints the path just before the message,
``<path>: <error>`` (coreutils, Python's ``OSError`` ``[Errno N] <error>: '<path>'`` puts it after).
That path, not the host or the rank that printed the line, is the instance a storage finding is about
(the mount to check). Registered for the ``storage`` family (:func:`register_subject_resolver`).
"""

from __future__ import annotations

import re
from typing import Any

from clusterdoctor.rules.catalog import Message
from clusterdoctor.rules.messages import register_subject_resolver
from clusterdoctor.rules.registry import Observations

__all__ = ["error_path", "storage_path_subject"]

# an absolute path, quoted or not, followed by ": " (coreutils: "<prog>: cannot access '<path>': <error>")
_BEFORE = re.compile(r"['\"]?(/[^\s'\":]{1,400})['\"]?: ")
# Python's OSError: "[Errno 116] Stale file handle: '/mnt/x'"
_AFTER = re.compile(r"\[Errno -?\d{1,5}\] [^:\n]{1,80}: '(/[^'\n]{1,400})'")


def error_path(text: str, at: int) -> str | None:
    """The path printed for the error that starts at ``at`` in ``text``, or None."""
    m = _AFTER.search(text, max(0, at - 40))
    if m is not None and m.start() <= at:
        return m.group(1)
    best = None
    for m in _BEFORE.finditer(text, 0, at + 2):  # the last path printed before the message
        best = m.group(1)
    return best


def storage_path_subject(obs: Observations, m: Message, hits: list[Any], subject: str | None) -> str | None:
    """The one path the hits' lines print before their message; else ``subject`` unchanged."""
    if subject is not None:
        return subject
    paths: set[str] = set()
    for h in hits:
        # where the message starts: its trigger, a literal every matching line holds
        at = min((i for t in m.all_triggers if (i := h.text.find(t)) >= 0), default=-1)
        found = error_path(h.text, at) if at >= 0 else None
        if found is None:
            return subject
        paths.add(found.rstrip("/") or "/")
    return paths.pop() if len(paths) == 1 else subject


register_subject_resolver("storage", storage_path_subject)
