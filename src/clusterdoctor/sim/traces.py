"""Loaders for real public GPU-cluster traces into one model (:class:`PodTrace` + :class:`Cluster`).

Alibaba ``cluster-trace-gpu-v2023`` ("openb", FGD USENIX ATC'23):

- node list ``sn,cpu_milli,memory_mib,gpu,model``;
- pod list ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
  deletion_time,scheduled_time`` (the ``multigpu*`` variants carry only the first five columns).

Conversions follow the FGD artifact's ``data/pod_csv_to_yaml.py``: ``gpu_milli`` above 1000 is clamped
to 1000, CPU-only pods (``num_gpu`` 0) carry no GPU milli, ``gpu_spec`` is a ``|``-separated list of
acceptable GPU models (empty: any). Parsers raise only :class:`~clusterdoctor.errors.InputError`.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from clusterdoctor.errors import InputError
from clusterdoctor.sim.cluster import Cluster, GpuNode

MILLI = 1000

OPENB_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
OPENB_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


@dataclass
class PodTrace:
    """Pods (jobs) as parallel columns; times in seconds (None columns when the trace has none).

    ``gpu_milli`` is per GPU (0..1000); a pod asks for ``num_gpu`` GPUs of ``gpu_milli`` each.
    ``gpu_spec`` is '' (any model) or ``A|B`` (one of these models). ``priority`` is 0 (low, best
    effort) .. 2 (high); ``creation``/``deletion`` are absolute seconds or None.
    """

    names: list[str]
    cpu_milli: list[int]
    memory_mib: list[int]
    num_gpu: list[int]
    gpu_milli: list[int]
    gpu_spec: list[str]
    priority: list[int] = field(default_factory=list)
    creation: list[float] | None = None
    deletion: list[float] | None = None
    source: str = ""
    app: list[str] | None = None  # application / model name per pod when the trace has one
    warnings: list[str] = field(default_factory=list)  # rows repaired or skipped while parsing, counted

    def __len__(self) -> int:
        return len(self.names)

    def total_gpu_milli(self) -> int:
        return sum(n * m for n, m in zip(self.num_gpu, self.gpu_milli))

    def subset(self, idx: list[int]) -> PodTrace:
        """The pods at positions ``idx`` (in that order)."""

        def pick(col):
            return None if col is None else [col[i] for i in idx]

        return PodTrace(
            [self.names[i] for i in idx],
            [self.cpu_milli[i] for i in idx],
            [self.memory_mib[i] for i in idx],
            [self.num_gpu[i] for i in idx],
            [self.gpu_milli[i] for i in idx],
            [self.gpu_spec[i] for i in idx],
            pick(self.priority) if self.priority else [],
            pick(self.creation),
            pick(self.deletion),
            self.source,
            pick(self.app),
        )


def _text(data: str | bytes, path: str) -> str:
    if isinstance(data, bytes):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"not UTF-8 text (byte {e.start})", path) from None
    return data


def _rows(
    text: str, path: str, required: tuple[str, ...]
) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    if "\x00" in text:
        raise InputError("binary data (NUL byte) in a CSV file", path)
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("empty file (expected a CSV header)", path, 1) from None
    except csv.Error as e:
        raise InputError(f"bad CSV: {e}", path, 1) from None
    header = [h.strip() for h in header]
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)} (header: {','.join(header)[:120]})", path, 1
        )
    out = []
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise InputError(f"expected {len(header)} fields, got {len(row)}", path, line)
            out.append((line, dict(zip(header, row))))
    except csv.Error as e:
        raise InputError(f"bad CSV: {e}", path, reader.line_num) from None
    return header, out


def _int(row: dict[str, str], col: str, path: str, line: int, *, minimum: int = 0) -> int:
    raw = row.get(col, "").strip()
    try:
        v = int(float(raw)) if "." in raw or "e" in raw.lower() else int(raw)
    except (ValueError, OverflowError):
        raise InputError(f"column {col}: {raw[:40]!r} is not a number", path, line) from None
    if v < minimum:
        raise InputError(f"column {col}: {v} is below {minimum}", path, line)
    return v


def _float_or_none(row: dict[str, str], col: str, path: str, line: int) -> float | None:
    raw = row.get(col, "").strip()
    if raw == "":
        return None
    try:
        v = float(raw)
    except ValueError:
        raise InputError(f"column {col}: {raw[:40]!r} is not a number", path, line) from None
    if v != v or v in (float("inf"), float("-inf")):
        raise InputError(f"column {col}: {raw[:40]!r} is not a finite number", path, line)
    return v


def parse_openb_nodes(data: str | bytes, path: str = "<nodes>") -> Cluster:
    """Parse an openb node list (``sn,cpu_milli,memory_mib,gpu,model``) into a :class:`Cluster`."""
    text = _text(data, path)
    _, rows = _rows(text, path, OPENB_NODE_COLUMNS)
    nodes = []
    seen: set[str] = set()
    for line, r in rows:
        name = r["sn"].strip()
        if not name:
            raise InputError("empty node name (column sn)", path, line)
        if name in seen:
            raise InputError(f"duplicate node name {name!r}", path, line)
        seen.add(name)
        gpus = _int(r, "gpu", path, line)
        if gpus > 64:
            raise InputError(f"column gpu: {gpus} GPUs on one node is not plausible", path, line)
        model = r["model"].strip()
        if gpus > 0 and not model:
            raise InputError("GPU node without a model name", path, line)
        nodes.append(
            GpuNode(name, _int(r, "cpu_milli", path, line), _int(r, "memory_mib", path, line), gpus, model)
        )
    if not nodes:
        raise InputError("no nodes in the node list", path)
    return Cluster(nodes, source=path)


_QOS_PRIORITY = {"BE": 0, "Burstable": 1, "LS": 2, "Guaranteed": 2}


def parse_openb_pods(data: str | bytes, path: str = "<pods>") -> PodTrace:
    """Parse an openb pod list into a :class:`PodTrace` (FGD's conversions, see the module docstring)."""
    text = _text(data, path)
    header, rows = _rows(text, path, OPENB_POD_COLUMNS)
    has_times = "creation_time" in header
    names, cpu, mem, ngpu, milli, spec, prio = [], [], [], [], [], [], []
    creation: list[float] = []
    deletion: list[float] = []
    negative: list[int] = []
    for line, r in rows:
        name = r["name"].strip()
        if not name:
            raise InputError("empty pod name", path, line)
        n = _int(r, "num_gpu", path, line)
        if n > 64:
            raise InputError(f"column num_gpu: {n} GPUs for one pod is not plausible", path, line)
        m = _int(r, "gpu_milli", path, line)
        m = 0 if n == 0 else min(m, MILLI)
        if n > 0 and m == 0:
            raise InputError("GPU pod (num_gpu > 0) with gpu_milli 0", path, line)
        if n > 1 and m < MILLI:
            raise InputError("a pod may share one GPU only: num_gpu > 1 with gpu_milli < 1000", path, line)
        s = r.get("gpu_spec", "") or ""
        s = "|".join(x.strip() for x in s.split("|") if x.strip()) if n > 0 else ""
        names.append(name)
        cpu.append(_int(r, "cpu_milli", path, line))
        mem.append(_int(r, "memory_mib", path, line))
        ngpu.append(n)
        milli.append(m)
        spec.append(s)
        prio.append(_QOS_PRIORITY.get((r.get("qos") or "").strip(), 1))
        if has_times:
            c = _float_or_none(r, "creation_time", path, line)
            d = _float_or_none(r, "deletion_time", path, line)
            if c is not None and d is not None and d < c:
                negative.append(line)  # a negative duration: the deletion time is dropped
                d = None
            creation.append(0.0 if c is None else c)
            deletion.append(float("nan") if d is None else d)
    if not names:
        raise InputError("no pods in the pod list", path)
    warn = []
    if negative:
        rows_s = ", ".join(str(x) for x in negative[:5]) + (" ..." if len(negative) > 5 else "")
        warn.append(f"{path}: {len(negative)} pods with deletion_time before creation_time (rows {rows_s}): "
                    "deletion time dropped")  # fmt: skip
    return PodTrace(
        names, cpu, mem, ngpu, milli, spec, prio,
        creation if has_times else None, deletion if has_times else None, source=path, warnings=warn,
    )  # fmt: skip


def _read(path: str | Path) -> bytes:
    """A trace file within the ``input`` budget (devices and FIFOs refused before reading)."""
    from clusterdoctor.observe.limits import read_input

    p = Path(path)
    if p.is_dir():
        raise InputError("is a directory, expected a CSV file", str(p))
    return read_input(p)


def load_openb_nodes(path: str | Path) -> Cluster:
    """Read an openb node-list CSV file."""
    return parse_openb_nodes(_read(path), str(path))


def load_openb_pods(path: str | Path) -> PodTrace:
    """Read an openb pod-list CSV file."""
    return parse_openb_pods(_read(path), str(path))
