"""PyTorch NCCL Flight Recorder dumps (pickle, JSON or the printed dict) and ``torchfrtrace`` reports.

A dump (``TORCH_NCCL_TRACE_BUFFER_SIZE``; one file per rank, default prefix ``/tmp/nccl_trace_rank_``)
is a dict with ``version``, ``pg_config`` (name, desc, ranks), ``pg_status`` (last enqueued / started /
completed collective) and ``entries`` (``record_id``, ``pg_id``, ``process_group``,
``collective_seq_id``, ``p2p_seq_id``, ``profiling_name``, sizes and dtypes, ``state``, times,
``timeout_ms``, ``is_p2p``, ``frames``) — pytorch/tutorials ``flight_recorder_tutorial.rst``.

Pickles are read by :mod:`clusterdoctor.observe.safe_pickle`, which builds only the plain values a dump
holds (never :mod:`pickle`'s loader): any class or function (the way a malicious pickle runs code), an
allocation sized by the input, nesting past the ``depth`` budget or a reference bomb is refused.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterdoctor.errors import InputError


def safe_unpickle(data: bytes) -> Any:
    """Unpickle ``data`` building only plain values (:mod:`clusterdoctor.observe.safe_pickle`);
    raises ``safe_pickle.UnsafePickle``, a ValueError (nested too deep: ``safe_pickle.TooDeep``)."""
    from clusterdoctor.observe.limits import current
    from clusterdoctor.observe.safe_pickle import loads

    return loads(data, current().depth)


@dataclass
class FrEntry:
    record_id: int | None
    pg_id: int | None
    pg_name: str | None
    pg_desc: str | None
    collective_seq_id: int | None
    p2p_seq_id: int | None
    op_id: int | None
    profiling_name: str
    input_sizes: Any
    input_dtypes: Any
    output_sizes: Any
    output_dtypes: Any
    state: str | None
    is_p2p: bool
    timeout_ms: int | None
    time_created_ns: int | None
    duration_ms: float | None

    @property
    def op(self) -> str:
        """``all_reduce`` from ``nccl:all_reduce``."""
        return self.profiling_name.split(":", 1)[-1]


@dataclass
class FrDump:
    """One rank's Flight Recorder buffer."""

    path: str
    rank: int | None
    version: str | None
    pg_config: dict[str, dict[str, Any]] = field(default_factory=dict)  # pg id -> name, desc, ranks
    pg_status: dict[str, dict[str, Any]] = field(default_factory=dict)
    entries: list[FrEntry] = field(default_factory=list)
    elided: bool = False  # the printed example elides entries with "..."
    warnings: list[str] = field(default_factory=list)

    def pg_ranks(self, pg: str) -> list[int] | None:
        cfg = self.pg_config.get(pg)
        if not cfg:
            for c in self.pg_config.values():
                if c.get("name") == pg:
                    cfg = c
                    break
        if not cfg:
            return None
        return _ranks(cfg.get("ranks"))


@dataclass
class FrMismatch:
    """One problem block of a ``torchfrtrace`` report."""

    kind: str  # "not all ranks joining", "size mismatch", "type mismatch", "dtype mismatch", ...
    collective_seq_id: int | None
    entry: int | None
    group: str | None
    collective: str | None
    missing_ranks: tuple[int, ...]
    expected_ranks: int | None
    state: str | None
    input_sizes: str | None
    output_sizes: str | None
    line: int
    # "error msg: Culprit rank 2; Error type: COLLECTIVE_TYPE_MISMATCH, ..." (fr_trace 2.5+)
    culprit_ranks: tuple[int, ...] = ()
    error: str | None = None


@dataclass
class FrTraceReport:
    path: str
    mismatches: list[FrMismatch] = field(default_factory=list)


def _ranks(v: Any) -> list[int] | None:
    if isinstance(v, str):
        try:
            v = ast.literal_eval(v)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v):
        return list(v)
    return None


def _opt_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def dump_from_obj(obj: Any, path: str, rank: int | None = None) -> FrDump:
    """Build a :class:`FrDump` from an unpickled / decoded dict. Raises InputError if it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("entries"), list):
        raise InputError("not a Flight Recorder dump (no 'entries' list)", path)
    r = obj.get("rank")
    dump = FrDump(
        path, _opt_int(r) if rank is None else rank, str(obj.get("version")) if obj.get("version") else None
    )
    for key, attr in (("pg_config", "pg_config"), ("pg_status", "pg_status")):
        v = obj.get(key)
        if isinstance(v, dict):
            setattr(dump, attr, {str(k): dict(x) for k, x in v.items() if isinstance(x, dict)})
    for i, e in enumerate(obj["entries"]):
        if not isinstance(e, dict):
            dump.warnings.append(f"{path}: entry {i} is not a record; skipped")
            continue
        pg = e.get("process_group")
        pg_name = pg_desc = None
        if isinstance(pg, (list, tuple)) and len(pg) >= 1:
            pg_name = str(pg[0])
            pg_desc = str(pg[1]) if len(pg) > 1 else None
        dur = e.get("duration_ms")
        dump.entries.append(
            FrEntry(
                record_id=_opt_int(e.get("record_id")),
                pg_id=_opt_int(e.get("pg_id")),
                pg_name=pg_name,
                pg_desc=pg_desc,
                collective_seq_id=_opt_int(e.get("collective_seq_id")),
                p2p_seq_id=_opt_int(e.get("p2p_seq_id")),
                op_id=_opt_int(e.get("op_id")),
                profiling_name=str(e.get("profiling_name") or "unknown"),
                input_sizes=e.get("input_sizes"),
                input_dtypes=e.get("input_dtypes"),
                output_sizes=e.get("output_sizes"),
                output_dtypes=e.get("output_dtypes"),
                state=e.get("state") if isinstance(e.get("state"), str) else None,
                is_p2p=bool(e.get("is_p2p")),
                timeout_ms=_opt_int(e.get("timeout_ms")),
                time_created_ns=_opt_int(e.get("time_created_ns")),
                duration_ms=float(dur)
                if isinstance(dur, (int, float)) and not isinstance(dur, bool)
                else None,
            )
        )
    if dump.rank is None:
        m = re.search(r"(?:rank[_-]?|_)(\d+)(?:\.\w+)?$", Path(path).name)
        if m:
            dump.rank = int(m.group(1))
    return dump


# spaces within the line only (\s, spanning newlines, made a run of blank lines quadratic)
_ELLIPSIS_LINE = re.compile(r"^[^\S\n]*+\.\.\.[^\S\n]*+(?:,[^\S\n]*+)?$", re.MULTILINE)


def parse_printed_dump(text: str, path: str = "<flight recorder>") -> FrDump:
    """Parse a dump printed as a Python/JSON-like dict (as in the PyTorch tutorial), ``...`` allowed."""
    elided = bool(_ELLIPSIS_LINE.search(text))
    cleaned = _ELLIPSIS_LINE.sub("", text).strip()
    cleaned = re.sub(r"\bnull\b", "None", cleaned)
    cleaned = re.sub(r"\btrue\b", "True", cleaned)
    cleaned = re.sub(r"\bfalse\b", "False", cleaned)
    try:
        obj = ast.literal_eval(cleaned)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as e:
        raise InputError(f"not a readable Flight Recorder dump ({type(e).__name__})", path) from None
    dump = dump_from_obj(obj, path)
    dump.elided = elided
    if elided:
        dump.warnings.append(f"{path}: the dump elides entries ('...'); only the entries shown were read")
    return dump


_FR_HEAD = re.compile(
    r"^[^\S\n]*(?P<kind>Not all ranks joining collective|Collective|Sizes? mismatch|Type mismatch|Dtype mismatch|"
    r"Mismatch)\b(?P<rest>[^\n]*)$",
    re.MULTILINE,
)
_FR_KV = re.compile(r"^\s*(?P<k>[a-z][a-z ]+?):\s*(?P<v>[^\n]*)$")


# torchfrtrace / fr_trace block heads, every wording (torch/distributed/flight_recorder/components/utils.py
# error_analysis): "Not all ranks joining collective 5 at entry 4" (2.4), "... collective: sequence number:
# 31117" / "..., sequence number: 5" (2.5+), "Collective sequence number: 5 has errors", "Input/output
# mismatch in the collective sequence number: 5"
_REPORT_LINE = re.compile(
    rb"(?m)^[ \t]*(?:\S+: ?)?(?:Not all ranks joining collective(?: \d+|[,:] sequence number: \d+)"
    rb"|Collective sequence number: \d+ has errors|Input/output mismatch in the collective sequence number: \d+)"
)
_BLOCK = re.compile(
    r"\s*(?:\S+: )?(?:Not all ranks joining collective(?: (?P<seq1>\d+) at entry (?P<entry>\d+)"
    r"|[,:] sequence number: (?P<seq2>\d+))|Collective sequence number: (?P<seq3>\d+) has errors"
    r"|Input/output mismatch in the collective sequence number: (?P<seq4>\d+))"
)
_CULPRIT = re.compile(r"Culprit rank (?P<rank>\d+); Error type: (?P<type>[A-Z_]+)")
_ERROR_KIND = {
    "COLLECTIVE_TYPE_MISMATCH": "type mismatch",
    "SIZE_OR_SYNTAX_MISMATCH": "size mismatch",
    "COLLECTIVE_DTYPE_MISMATCH": "dtype mismatch",
    "COLLECTIVE_STATE_MISMATCH": "state mismatch",
}
# torchrun/PyTorch/MPI line prefixes ("[rank0]: ", "[default0]:", "[1,0]<stdout>:"), removed before parsing.
_BRACKET_PREFIX = re.compile(r"^[ \t]*(?:\[[\w.,\-]+\](?:<std(?:out|err)>)?:[ \t]?)+")


def parse_frtrace_report(text: str, path: str = "<torchfrtrace>") -> FrTraceReport:
    """Parse the text ``torchfrtrace`` prints: mismatch blocks with missing ranks, sizes and state."""
    rep = FrTraceReport(path)
    lines = [_BRACKET_PREFIX.sub("", ln, count=1) for ln in text.splitlines()]
    i = 0
    while i < len(lines):
        line = lines[i]
        # At the start of a line (after indentation or a launcher prefix), as torchfrtrace prints it; the
        # phrase quoted inside prose (a README describing a report) is not a report.
        m = _BLOCK.match(line)
        m2 = None if m else re.search(r"\b((?:[Ss]ize|[Tt]ype|[Dd]type|[Ss]tate) mismatch)\b", line)
        if not m and not m2:
            i += 1
            continue
        kv: dict[str, str] = {}
        start = i
        i += 1
        while i < len(lines):
            kvm = _FR_KV.match(lines[i])
            if kvm is None or "mismatch" in lines[i] or "Not all ranks" in lines[i]:
                break
            kv[kvm.group("k").strip()] = kvm.group("v").strip()
            i += 1
            if kvm.group("k").strip() == "collective stack trace":
                while i < len(lines) and lines[i].startswith("    "):
                    i += 1
        missing = _int_set(kv.get("missing ranks", ""))
        exp = kv.get("expected ranks")
        n_expected = len(_int_set(exp)) if exp and not exp.isdigit() else (int(exp) if exp else None)
        if n_expected is None and (kv.get("world size") or "").isdigit():
            n_expected = int(kv["world size"])
        error = kv.get("error msg")
        culprits = tuple(sorted({int(c.group("rank")) for c in _CULPRIT.finditer(error or "")}))
        if m is not None:
            seq = next((int(g) for g in (m.group(k) for k in ("seq1", "seq2", "seq3", "seq4")) if g), None)
            if m.group("seq1") or m.group("seq2"):
                kind = "not all ranks joining"
            elif m.group("seq4"):
                kind = "size mismatch"
            else:
                types = [c.group("type") for c in _CULPRIT.finditer(error or "")]
                kind = _ERROR_KIND.get(types[0], "mismatch") if types else "mismatch"
        else:
            seq, kind = None, m2.group(1).lower()  # type: ignore[union-attr]
        rep.mismatches.append(
            FrMismatch(
                kind=kind,
                collective_seq_id=seq,
                entry=int(m.group("entry")) if m is not None and m.group("entry") else _opt_digits(kv),
                group=kv.get("group info"),
                collective=kv.get("collective"),
                missing_ranks=missing,
                expected_ranks=n_expected,
                state=kv.get("collective state"),
                input_sizes=kv.get("input sizes"),
                output_sizes=kv.get("output sizes"),
                line=start + 1,
                culprit_ranks=culprits,
                error=error[:300] if error else None,
            )
        )
    if not rep.mismatches:
        raise InputError(
            "no torchfrtrace findings ('Not all ranks joining …', '… has errors' or '… mismatch') found", path
        )
    return rep


def _opt_digits(kv: dict[str, str]) -> int | None:
    v = kv.get("internal record id") or ""
    return int(v) if v.isdigit() else None


def _int_set(text: str) -> tuple[int, ...]:
    return tuple(sorted({int(x) for x in re.findall(r"\d+", text)}))


def load_flight_recorder(path: str | Path) -> FrDump | FrTraceReport:
    """Read a dump (pickle, JSON, printed dict) or a torchfrtrace report, detected by content."""
    from clusterdoctor.observe.limits import read_input

    p = Path(path)
    return parse_flight_recorder(read_input(p), str(p))


def parse_flight_recorder(data: bytes, path: str = "<flight recorder>") -> FrDump | FrTraceReport:
    """Parse bytes of any supported Flight Recorder form."""
    from clusterdoctor.observe.limits import LimitExceeded, load_json
    from clusterdoctor.observe.safe_pickle import TooDeep, UnsafePickle

    if data[:1] == b"\x80":  # pickle protocol >= 2
        try:
            obj = safe_unpickle(data)
        except TooDeep as e:
            raise LimitExceeded(f"Flight Recorder pickle: {e}", path, "depth") from None
        except UnsafePickle as e:
            raise InputError(f"unreadable Flight Recorder pickle: {e}", path) from None
        return dump_from_obj(obj, path)
    text = data.decode("utf-8", "replace")
    if (
        "Not all ranks joining" in text
        or _REPORT_LINE.search(data)
        or re.search(r"\b(?:[Ss]ize|[Tt]ype|[Dd]type) mismatch\b", text)
    ):
        return parse_frtrace_report(text, path)
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = load_json(stripped, path, "Flight Recorder JSON")
        except LimitExceeded:
            raise
        except InputError:
            return parse_printed_dump(text, path)
        return dump_from_obj(obj, path)
    raise InputError("not a Flight Recorder dump or torchfrtrace report", path)


def sniff_flight_recorder(head: bytes, name: str = "") -> bool:
    """Whether a file looks like a Flight Recorder dump or report (pickles only by their name)."""
    if head[:1] == b"\x80":
        low = name.lower()
        if "trace" in low or "flight" in low or low.startswith("fr_"):
            return True
        try:  # a small dump fits in the head; the safe reader builds plain values only
            obj = safe_unpickle(head)
        except ValueError:  # any refusal means "not recognised"
            return False
        return isinstance(obj, dict) and "entries" in obj
    return _REPORT_LINE.search(head) is not None or (
        b'"entries"' in head and (b'"pg_config"' in head or b'"collective_seq_id"' in head)
    )
