"""The fail-slow probe's records and its JSON-lines files: format, parser and incremental reader.

The probe (:mod:`clusterdoctor.training.watch`) appends one file per rank
(``watch-rank<R>.jsonl``). Each run of a rank starts with a header line; step and link lines
follow, one JSON object a line::

    {"kind": "start", "v": 1, "job": "llm", "rank": 3, "local_rank": 3, "world_size": 8,
     "host": "gpu-a12", "gpu": "0", "nic": "eth0", "run": "4711-1718000000.1", "t": 1718000000.1}
    {"kind": "step", "step": 17, "t": 1718000012.52, "wall": 0.051, "own": 0.031,
     "coll": 0.016, "wait": 0.004, "data": 0.001, "stall": 0.0, "io": 0}
    {"kind": "link", "src": 2, "dst": 3, "bytes": 65536, "s": 0.0007, "t": 1718000013.0}

``t`` is the wall clock (seconds since the epoch) at the end of the step; the durations are
seconds: ``wall`` the whole step, ``own`` from the step's start until the rank entered its first
collective (its own work, data wait included), ``coll`` from then until its last collective
completed, ``wait`` from its last collective's start until it completed (waiting for the others).
When the probe times collectives through ``torch.distributed`` calls (FSDP, plain loops), whose
collectives are spread through the step, ``own`` is the step's time outside collectives and
``coll`` = ``wait`` the time inside them (the union of their spans);
``data`` time blocked in the wrapped data loader, ``stall`` time the process did not run when it
should have (a heartbeat thread woke late: frozen or CPU-throttled), ``io`` (optional) bytes the process
read from or wrote to storage in the step (/proc/self/io ``read_bytes`` + ``write_bytes``). A ``link`` line is a timed transfer of ``bytes``
from rank ``src`` received by ``dst`` (the probe's link test).

:func:`parse_watch_lines` is pure (text in, records and warnings out) and never raises for bad
lines: a truncated or garbled line is skipped with a warning naming the file and line.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FORMAT_VERSION",
    "LinkRecord",
    "RankIdentity",
    "StepRecord",
    "WatchFileReader",
    "WatchFiles",
    "load_watch_observations",
    "parse_watch_lines",
    "sniff_watch",
    "sniff_watch_file",
]

FORMAT_VERSION = 1
FILE_RE = re.compile(r"watch-rank(\d+)(?:\.\d+)?\.jsonl$")


@dataclass(frozen=True)
class RankIdentity:
    """Who wrote a stream: the job, the rank and where it ran."""

    job: str
    rank: int
    local_rank: int | None = None
    world_size: int | None = None
    host: str | None = None
    gpu: str | None = None
    nic: str | None = None
    run: str | None = None  # one id per process start: a new id means the rank restarted
    t: float | None = None


@dataclass(frozen=True)
class StepRecord:
    """One step of one rank (durations in seconds; ``t`` the wall-clock end of the step)."""

    rank: int
    step: int
    t: float
    wall: float
    own: float
    coll: float = 0.0
    wait: float = 0.0
    data: float = 0.0
    stall: float = 0.0
    run: str | None = None
    io: float | None = None  # storage bytes read + written in the step (None: not recorded)


@dataclass(frozen=True)
class LinkRecord:
    """A timed transfer of ``nbytes`` from rank ``src`` to rank ``dst`` (measured by ``dst``)."""

    src: int
    dst: int
    nbytes: int
    seconds: float
    t: float | None = None
    run: str | None = None  # the run of the rank that measured it (its file's header in force)


@dataclass
class WatchFiles:
    """Everything read from probe files: identities by rank, step and link records, warnings."""

    identities: dict[int, list[RankIdentity]] = field(default_factory=dict)
    steps: list[StepRecord] = field(default_factory=list)
    links: list[LinkRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def identity(self, rank: int) -> RankIdentity | None:
        """The latest identity of ``rank`` (its current run)."""
        ids = self.identities.get(rank)
        return ids[-1] if ids else None

    def extend(self, other: WatchFiles) -> None:
        for r, ids in other.identities.items():
            mine = self.identities.setdefault(r, [])
            mine.extend(i for i in ids if i not in mine)
        self.steps.extend(other.steps)
        self.links.extend(other.links)
        self.warnings.extend(other.warnings)
        self.paths.extend(p for p in other.paths if p not in self.paths)

    def by_job(self) -> dict[str, WatchFiles]:
        """The records split by the job named in the headers (a folder of several jobs' probe files is
        several jobs, not one job whose ranks restarted). Records whose run no header names go to
        their rank's latest job; warnings stay with the first job."""
        job_of_run = {i.run: i.job for ids in self.identities.values() for i in ids}
        jobs = sorted({i.job for ids in self.identities.values() for i in ids})
        if len(jobs) <= 1:
            return {jobs[0] if jobs else "job": self}
        out = {j: WatchFiles(paths=self.paths) for j in jobs}
        out[jobs[0]].warnings = list(self.warnings)
        for r, ids in self.identities.items():
            for i in ids:
                out[i.job].identities.setdefault(r, []).append(i)

        def job(run: str | None, rank: int | None) -> str:
            if run in job_of_run:
                return job_of_run[run]
            latest = self.identity(rank) if rank is not None else None
            return latest.job if latest is not None else jobs[0]

        for st in self.steps:
            out[job(st.run, st.rank)].steps.append(st)
        for ln in self.links:
            out[job(ln.run, ln.dst)].links.append(ln)
        return {j: wf for j, wf in out.items() if wf.steps}


def _num(obj: dict[str, Any], key: str, default: float | None = None) -> float | None:
    v = obj.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{key!r} is not a number")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{key!r} is not finite")
    return v


def _rank_from_name(name: str) -> int | None:
    m = FILE_RE.search(os.path.basename(name))
    return int(m.group(1)) if m else None


def parse_watch_lines(
    lines: Iterable[str], path: str = "<input>", first_line: int = 1, identity: RankIdentity | None = None
) -> tuple[WatchFiles, RankIdentity | None]:
    """Records from probe JSON lines; returns them and the identity in force at the end.

    ``identity`` carries the header of a file read in pieces (``--follow``). Lines before any
    header take the rank from the file name (``watch-rank<R>.jsonl``) with a warning.
    """
    out = WatchFiles(paths=[path])
    cur = identity
    bad = 0
    first_bad: str | None = None
    for i, raw in enumerate(lines, start=first_line):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("[rank") and "]:" in line[:16]:  # launcher prefix (torchrun --tee)
            line = line.split("]:", 1)[1].strip()
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            kind = obj.get("kind")
            if kind == "start":
                rank = obj.get("rank")
                if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
                    raise ValueError("header without a rank")
                cur = RankIdentity(
                    job=str(obj.get("job") or "job"),
                    rank=rank,
                    local_rank=obj.get("local_rank") if isinstance(obj.get("local_rank"), int) else None,
                    world_size=obj.get("world_size") if isinstance(obj.get("world_size"), int) else None,
                    host=str(obj["host"]) if obj.get("host") is not None else None,
                    gpu=str(obj["gpu"]) if obj.get("gpu") is not None else None,
                    nic=str(obj["nic"]) if obj.get("nic") is not None else None,
                    run=str(obj["run"]) if obj.get("run") is not None else None,
                    t=_num(obj, "t"),
                )
                out.identities.setdefault(rank, []).append(cur)
            elif kind == "step":
                if cur is None:
                    r = _rank_from_name(path)
                    if r is None:
                        raise ValueError("step line before any header, and the file name has no rank")
                    cur = RankIdentity(job="job", rank=r)
                    out.identities.setdefault(r, []).append(cur)
                    out.warnings.append(f"{path}:{i}: no header line; rank {r} taken from the file name")
                step = obj.get("step")
                if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                    raise ValueError("step is not a non-negative integer")
                wall = _num(obj, "wall")
                t = _num(obj, "t")
                if wall is None or t is None or wall < 0:
                    raise ValueError("step line without t or wall")
                own = _num(obj, "own", wall)
                vals = [_num(obj, k, 0.0) for k in ("coll", "wait", "data", "stall")]
                if own is None or own < 0 or any(v is None or v < 0 for v in vals):
                    raise ValueError("negative duration")
                io = _num(obj, "io")
                if io is not None and io < 0:
                    raise ValueError("negative io")
                out.steps.append(StepRecord(cur.rank, step, t, wall, own, *vals, run=cur.run, io=io))  # type: ignore[arg-type]
            elif kind == "link":
                src, dst, nb = obj.get("src"), obj.get("dst"), obj.get("bytes")
                if not all(isinstance(x, int) and not isinstance(x, bool) for x in (src, dst, nb)):
                    raise ValueError("link line without integer src, dst and bytes")
                s = _num(obj, "s")
                if s is None or s < 0:
                    raise ValueError("link line without seconds")
                out.links.append(LinkRecord(src, dst, nb, s, _num(obj, "t"), run=cur.run if cur else None))
            else:
                continue  # other kinds (future versions): ignored
        except (ValueError, TypeError, KeyError, RecursionError) as e:
            bad += 1  # RecursionError: a line nested deeper than the JSON decoder follows
            if first_bad is None:
                first_bad = f"{path}:{i}: " + ("nested too deep" if isinstance(e, RecursionError) else str(e))
    if bad:
        more = f" (and {bad - 1} more)" if bad > 1 else ""
        out.warnings.append(f"{first_bad}; line skipped{more}")
    return out, cur


def sniff_watch(head: bytes, name: str = "") -> bool:
    """Whether a file is a probe JSON-lines file (its first non-empty line is a probe record)."""
    for raw in head.splitlines()[:5]:
        line = raw.strip()
        if not line:
            continue
        if line.startswith(b"[rank") and b"]:" in line[:16]:
            line = line.split(b"]:", 1)[1].strip()
        return line.startswith(b"{") and b'"kind"' in line and (b'"start"' in line or b'"step"' in line)
    return bool(FILE_RE.search(os.path.basename(name)))


def sniff_watch_file(head: bytes, name: str = "") -> bool:
    """Strictly a probe file (for ``diagnose``, which sees every kind of file): its first non-empty line
    is a JSON object whose ``kind`` is ``start`` or ``step``."""
    for raw in head.splitlines()[:5]:
        line = raw.strip()
        if not line:
            continue
        if line.startswith(b"[rank") and b"]:" in line[:16]:
            line = line.split(b"]:", 1)[1].strip()
        if not line.startswith(b'{"kind":'):
            return False
        try:
            obj = json.loads(line)
        except ValueError:
            return False
        return isinstance(obj, dict) and obj.get("kind") in ("start", "step")
    return False


def load_watch_observations(path: Any) -> dict[str, Any]:
    """``diagnose``'s loader: one probe file as ``{"watch_files": [WatchFiles]}`` (the rules join the
    ranks' files into one step table)."""
    got = load_watch_dir(os.fspath(path))
    ranks = sorted({s.rank for s in got.steps})
    who = f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks"
    out: dict[str, Any] = {"watch_files": [got], "described_as": f"fail-slow probe file ({who})"}
    if got.warnings:
        out["warnings"] = list(got.warnings)
    return out


class WatchFileReader:
    """Reads a directory of probe files incrementally: each :meth:`poll` returns only what was
    appended since the last one (a partial last line waits for the next poll). Files that shrink
    (rotated or rewritten) are read again from the start, with a warning."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._offsets: dict[str, int] = {}
        self._ids: dict[str, RankIdentity | None] = {}
        self._lines: dict[str, int] = {}

    def files(self) -> list[str]:
        found = []
        for root, dirs, names in os.walk(self.directory):
            dirs.sort()
            for n in names:
                if n.endswith(".jsonl"):
                    found.append(os.path.join(root, n))
        # rotated pieces (watch-rank3.1.jsonl) before the current file
        return sorted(found, key=lambda p: (os.path.dirname(p), _rank_from_name(p) or -1, _rotation(p)))

    def poll(self, final: bool = False) -> WatchFiles:
        """New records since the last poll. ``final``: also parse a last line without newline."""
        out = WatchFiles()
        for p in self.files():
            try:
                size = os.path.getsize(p)
                off = self._offsets.get(p, 0)
                if size < off:
                    out.warnings.append(
                        f"{p}: file shrank ({off} -> {size} bytes); read again from the start"
                    )
                    off, self._lines[p], self._ids[p] = 0, 0, None
                if size == off:
                    if p not in out.paths:
                        out.paths.append(p)
                    continue
                with open(p, "rb") as f:
                    f.seek(off)
                    chunk = f.read(size - off)
            except OSError as e:
                out.warnings.append(f"{p}: cannot read: {e.strerror or e}")
                continue
            end = chunk.rfind(b"\n") + 1
            tail = chunk[end:]
            body = chunk[:end]
            if final and tail.strip():
                body = chunk
                out.warnings.append(f"{p}: last line has no newline (file truncated or still being written)")
                end = len(chunk)
            text = body.decode("utf-8", errors="replace")
            first = self._lines.get(p, 0) + 1
            got, ident = parse_watch_lines(text.splitlines(), p, first, self._ids.get(p))
            self._ids[p] = ident
            self._lines[p] = first - 1 + text.count("\n")
            self._offsets[p] = off + end
            out.extend(got)
        return out


def _rotation(p: str) -> int:
    m = re.search(r"\.(\d+)\.jsonl$", p)
    return -int(m.group(1)) if m else 0


def load_watch_dir(directory: str) -> WatchFiles:
    """Every probe record under ``directory`` (one read); raises InputError when there is none."""
    from clusterdoctor.errors import InputError

    if not os.path.exists(directory):
        raise InputError("no such file or directory", directory)
    if os.path.isfile(directory):
        with open(directory, encoding="utf-8", errors="replace") as f:
            got, _ = parse_watch_lines(f.read().splitlines(), directory)
        if not got.steps:
            raise InputError("no fail-slow probe step record in file", directory)
        return got
    reader = WatchFileReader(directory)
    got = reader.poll(final=True)
    if not got.steps:
        raise InputError(
            "no fail-slow probe file (watch-rank<N>.jsonl) with step records in directory", directory
        )
    return got
