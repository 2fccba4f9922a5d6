"""Python package listings that users paste per node to compare versions: ``pip freeze`` and ``pip list``.

The formats are pip's own (``pip/_internal/commands/freeze.py`` and ``list.py``):

* ``pip freeze``: one requirement per line, ``name==version``, ``name @ url`` for a direct reference,
  ``-e`` for an editable install, ``#`` comments; what users paste is often ``pip freeze | grep nccl``
  (any subset of the lines);
* ``pip list``: a ``Package  Version`` header (``Location``, ``Editable project location``, ``Installer``
  columns may follow), a rule of dashes, then ``name  version`` rows.

A listing is one file per node (or environment); the rules compare the versions of the same package
across listings (:mod:`clusterdoctor.rules.comm_versions`). Names are compared normalised as pip does
(PEP 503: case folded, runs of ``-_.`` as one ``-``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError

__all__ = ["PackageList", "load_packages", "normalise", "parse_packages", "sniff_packages"]

MAX_LINES = 20_000
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,100}[A-Za-z0-9])?"
_FREEZE = re.compile(
    rf"^(?P<name>{_NAME})(?:\[[^\]\n]{{0,100}}\])? {{0,4}}===? {{0,4}}(?P<ver>[0-9][\w.+!-]{{0,60}})\s*$"
)
_AT = re.compile(rf"^(?P<name>{_NAME}) @ \S{{1,2000}}$")
_LIST_HDR = re.compile(r"^Package +Version(?: +(?:Location|Editable project location|Installer))* *$")
_LIST_RULE = re.compile(r"^-{3,} +-{3,}")
_LIST_ROW = re.compile(rf"^(?P<name>{_NAME}) +(?P<ver>[0-9][\w.+!-]{{0,60}})(?: +\S[^\n]{{0,2000}})?$")
_SKIP = re.compile(r"^(?:#|-e |--editable |-i |--index-url |--extra-index-url )")


@dataclass
class PackageList:
    """One ``pip freeze`` / ``pip list`` output: normalised name -> version (and its line)."""

    path: str
    packages: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    program: str = "pip freeze"


def normalise(name: str) -> str:
    """PEP 503 normalised name: ``NVIDIA_NCCL.cu12`` -> ``nvidia-nccl-cu12``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _lines(text: str) -> list[tuple[int, str]]:
    return [(n, ln.strip()) for n, ln in enumerate(text.splitlines()[:MAX_LINES], 1) if ln.strip()]


def parse_packages(text: str, path: str = "<pip>") -> PackageList:
    """The packages of a ``pip freeze`` or ``pip list`` output; InputError when it is neither (every
    line of a freeze must be a requirement; a list needs its header)."""
    out = PackageList(path)
    lines = _lines(text)
    hdr = next((i for i, (_, ln) in enumerate(lines) if _LIST_HDR.match(ln)), None)
    if hdr is not None:
        out.program = "pip list"
        for n, ln in lines[hdr + 1 :]:
            if _LIST_RULE.match(ln):
                continue
            m = _LIST_ROW.match(ln)
            if m is None:
                break  # the table ended (pip's upgrade notice, the next command)
            out.packages[normalise(m.group("name"))] = m.group("ver")
            out.lines[normalise(m.group("name"))] = n
    else:
        for n, ln in lines:
            if _SKIP.match(ln) or _AT.match(ln):
                continue
            m = _FREEZE.match(ln)
            if m is None:
                raise InputError(
                    f"line {n} is not a requirement (name==version): not pip freeze output", path, n
                )
            out.packages[normalise(m.group("name"))] = m.group("ver")
            out.lines[normalise(m.group("name"))] = n
    if not out.packages:
        raise InputError("no package with a version (not pip freeze or pip list output)", path)
    return out


def sniff_packages(head: bytes) -> bool:
    """``pip list`` (its header and rule), or text whose every line is a ``pip freeze`` requirement."""
    if b"\x00" in head[:4096]:
        return False
    text = head[:16384].decode("utf-8", "replace")
    if len(head) > 16384:
        text = text[: text.rfind("\n") + 1]
    lines = [ln for _, ln in _lines(text)]
    if not lines:
        return False
    for i, ln in enumerate(lines[:50]):
        if _LIST_HDR.match(ln):
            return i + 1 < len(lines) and bool(_LIST_RULE.match(lines[i + 1]))
    reqs = [ln for ln in lines if not _SKIP.match(ln)]
    return (
        bool(reqs)
        and all(_FREEZE.match(ln) or _AT.match(ln) for ln in reqs)
        and any(_FREEZE.match(ln) for ln in reqs)
    )


def load_packages(path: str | Path) -> PackageList:
    from clusterdoctor.observe.limits import read_text

    p = Path(path)
    return parse_packages(read_text(p), str(p))
