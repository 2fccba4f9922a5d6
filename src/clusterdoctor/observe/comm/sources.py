"""Communication inputs by content: NCCL logs, nccl-tests output, Kineto traces, Flight Recorder, ncu CSV.

:func:`sniff_comm` tells ``clusterdoctor diagnose`` (via :mod:`clusterdoctor.observe.detect`) whether a
file is one of them; :func:`load_comm_observations` loads files or directories into observation
kinds, each a list so that many files (one per rank) accumulate:

``kineto`` (:class:`~clusterdoctor.observe.comm.kineto.KinetoTrace`), ``nccl_log``
(:class:`~clusterdoctor.observe.comm.nccl_log.NcclLog`), ``nccl_tests``
(:class:`~clusterdoctor.observe.comm.nccl_tests.NcclTestsRun`), ``flight_recorder`` (dumps and
``torchfrtrace`` reports), ``ncu`` (:class:`~clusterdoctor.observe.comm.ncu.NcuReport`), ``comm`` (the
paths read) and ``warnings``. A file may yield two kinds: an nccl-tests run with ``NCCL_DEBUG=INFO``
is both an NCCL log and an nccl-tests result.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from clusterdoctor.errors import InputError

HEAD_BYTES = 64 << 10


def classify(head: bytes, name: str) -> list[str]:
    """Which comm kinds a file holds, judged from its first bytes and name (empty: none).

    Each parser module is imported only when the file may be of its kind.
    """
    if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        from clusterdoctor.observe.comm.kineto import sniff_kineto

        if sniff_kineto(head):
            return ["kineto"]
        from clusterdoctor.observe.comm.flight_recorder import sniff_flight_recorder

        return ["flight_recorder"] if sniff_flight_recorder(head, name) else []
    if head[:1] == b"\x80":
        from clusterdoctor.observe.comm.flight_recorder import sniff_flight_recorder

        return ["flight_recorder"] if sniff_flight_recorder(head, name) else []
    from clusterdoctor.observe.comm.flight_recorder import sniff_flight_recorder
    from clusterdoctor.observe.comm.nccl_log import sniff_nccl_log
    from clusterdoctor.observe.comm.nccl_tests import sniff_nccl_tests
    from clusterdoctor.observe.comm.ncu import sniff_ncu

    if sniff_ncu(head):
        return ["ncu"]
    if sniff_flight_recorder(head, name):
        return ["flight_recorder"]
    kinds = []
    if sniff_nccl_log(head):
        kinds.append("nccl_log")
    if sniff_nccl_tests(head):
        kinds.append("nccl_tests")
    return kinds


def sniff_comm(head: bytes, name: str = "") -> bool:
    """Whether a file is a communication input this module can load."""
    return bool(classify(head, name))


def _load_file(p: str, kinds: list[str], out: dict[str, list[Any]]) -> None:
    for kind in kinds:
        if kind == "kineto":
            from clusterdoctor.observe.comm.kineto import load_kineto

            t = load_kineto(p)
            out["kineto"].append(t)
            out["warnings"].extend(t.warnings)
            if t.truncated or t.events_read == 0:  # analysed, but the CLI exit code says it was cut/empty
                why = "truncated" if t.truncated else "holds no events"
                out.setdefault("incomplete_inputs", []).append(f"{p}: {why}")
        elif kind == "nccl_log":
            from clusterdoctor.observe.comm.nccl_log import load_nccl_log

            log = load_nccl_log(p)
            out["nccl_log"].append(log)
            out["warnings"].extend(log.warnings)
        elif kind == "nccl_tests":
            from clusterdoctor.observe.comm.nccl_tests import load_nccl_tests

            try:
                run = load_nccl_tests(p)
            except InputError:
                if "nccl_log" in kinds:
                    continue  # a log that mentions nccl-tests headers but holds no rows
                raise
            out["nccl_tests"].append(run)
            out["warnings"].extend(run.warnings)
        elif kind == "flight_recorder":
            from clusterdoctor.observe.comm.flight_recorder import load_flight_recorder

            fr = load_flight_recorder(p)
            out["flight_recorder"].append(fr)
            out["warnings"].extend(getattr(fr, "warnings", []))
        elif kind == "ncu":
            from clusterdoctor.observe.comm.ncu import load_ncu_csv

            rep = load_ncu_csv(p)
            out["ncu"].append(rep)
            out["warnings"].extend(rep.warnings)
    out["comm"].append(p)


def _head(p: str) -> bytes:
    from clusterdoctor.observe.limits import read_head

    return read_head(p, HEAD_BYTES)


def _files_under(d: str) -> list[str]:
    """Every file under directory ``d``, recursively, in path order (pathlib is not imported: the
    whole-process cost of a small analysis is mostly imports)."""
    found = []
    for root, dirs, files in os.walk(d):
        dirs.sort()
        paths = (os.path.join(root, f) for f in files)
        found.extend(f for f in paths if os.path.isfile(f))
    return sorted(found, key=lambda f: f.split(os.sep))


def load_comm_observations(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> dict[str, Any]:
    """Load files and directories (searched recursively) of communication inputs, by content.

    A file given by name that is none of the formats raises InputError; files inside a directory
    that are not recognised are skipped and listed in ``warnings``.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: dict[str, list[Any]] = {
        k: [] for k in ("kineto", "nccl_log", "nccl_tests", "flight_recorder", "ncu", "comm", "warnings")
    }
    for path in paths:
        p = os.fspath(path)
        if not os.path.exists(p):
            raise InputError("no such file or directory", p)
        if os.path.isdir(p):
            files = _files_under(p)
            found = 0
            for f in files:
                kinds = classify(_head(f), os.path.basename(f))
                if kinds:
                    _load_file(f, kinds, out)
                    found += 1
                else:
                    out["warnings"].append(f"{f}: not a communication input; skipped")
            if not found:
                raise InputError(
                    "no NCCL log, nccl-tests output, trace, Flight Recorder dump or ncu CSV in directory",
                    p,
                )
            continue
        kinds = classify(_head(p), os.path.basename(p))
        if not kinds:
            raise InputError(
                "not an NCCL log, nccl-tests output, Kineto trace, Flight Recorder dump or ncu CSV", p
            )
        _load_file(p, kinds, out)
    return {k: v for k, v in out.items() if v}
