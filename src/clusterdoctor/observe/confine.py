"""Trees from another machine, read without following their links out of them.

A sysfs snapshot or an incident folder's ``sys/`` is full of symbolic links; a crafted one links
``proc/sys/kernel/hostname`` to ``/proc/self/environ`` and the reader's environment ends up in the
report. While :func:`confined` is open, :func:`check` (called by every file opener of
:mod:`clusterdoctor.observe.limits`) refuses a path whose real location lies outside the tree's root,
and the refusal is kept for the caller to report as a warning.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

from clusterdoctor.errors import InputError

__all__ = ["check", "confined"]

_CONFINED: contextvars.ContextVar[tuple[str, list[str]] | None] = contextvars.ContextVar(
    "cd_confined", default=None
)


@contextlib.contextmanager
def confined(root: str | os.PathLike[str]) -> Iterator[list[str]]:
    """Read a tree from another machine (a sysfs snapshot, an incident folder's ``sys/``): while the
    context is open, ``limits.open_regular``, ``limits.read_bounded`` and the readers built on them refuse
    a file whose real path (links followed) lies outside ``root`` — a crafted tree's link to
    ``/proc/self/environ`` or ``/etc/shadow`` is never read. Yields the list of warnings naming each
    refused link, for the caller to report. ``root`` of ``/`` (this machine) confines nothing."""
    real = os.path.realpath(root)
    found: list[str] = []
    if real == os.sep:
        yield found
        return
    token = _CONFINED.set((real, found))
    try:
        yield found
    finally:
        _CONFINED.reset(token)


def check(p: str) -> None:
    """InputError when a confinement is open and ``p`` (links followed) lies outside its root."""
    c = _CONFINED.get()
    if c is None:
        return
    root, found = c
    real = os.path.realpath(p)
    if real == root or real.startswith(root + os.sep):
        return
    why = f"a link out of the tree it belongs to (to {real[:200]}); not read"
    if len(found) < 100 and why not in found:
        found.append(f"{p}: {why}")
    raise InputError(why, p)
