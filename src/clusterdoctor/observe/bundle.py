"""Bundles: one zstd-compressed tar of everything collected on a node, with a manifest.

Layout (all paths relative, regular files only)::

    manifest.json                  schema, host, versions, times, every source with status/timeout/error
    sysfs/sys/...                  topology files (NUMA nodes, CPUs, PCI devices), copied as text
    sysfs/links.json               symlinks of that tree (path -> target), since links are not stored
    rdma/read1/sys/class/infiniband/...   first read of the RDMA counters
    rdma/read2/sys/class/infiniband/...   second read, ``rdma_interval_s`` later (times in the manifest)
    rdma/statistic.txt             ``rdma statistic show`` (when the tool exists)
    proc/placement.json            per process: comm, allowed CPUs/memory nodes, threads, redacted cmdline
    metrics/<n>-<host>-<k>.prom    ``--scrape`` URLs, scraped twice (k = 1, 2) some seconds apart
    logs/<unit>.log                ``journalctl -u UNIT -o short-iso`` (redacted)
    files/<name>                   extra files given with ``--file`` (redacted, except metrics dumps)

:func:`read_bundle` refuses members that could escape an extraction directory (absolute paths,
``..``, links, devices) and bounds the total size. :func:`load_bundle_observations` turns a bundle
back into observations, offline, by running every file through the normal content detection.
"""

from __future__ import annotations

import io
import json
import os
import platform
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from clusterdoctor.errors import InputError

__all__ = [
    "SCHEMA",
    "BundleWriter",
    "SourceResult",
    "load_bundle_observations",
    "read_bundle",
    "run_source",
    "sniff_bundle",
]

SCHEMA = "clusterdoctor.bundle/1"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MAX_TOTAL = 2 << 30  # 2 GiB uncompressed
MAX_MEMBERS = 200_000


@dataclass
class SourceResult:
    """How collecting one source went (recorded in the manifest)."""

    name: str
    status: str  # ok | failed | skipped | timeout
    seconds: float
    timeout_s: float | None = None
    error: str | None = None
    files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "status": self.status, "seconds": round(self.seconds, 3), "files": self.files}
        if self.timeout_s is not None:
            d["timeout_s"] = self.timeout_s
        if self.error:
            d["error"] = self.error
        return d


class BundleWriter:
    """Collects files in memory, then writes ``manifest.json`` + files as one ``.tar.zst``."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        """``clock`` gives the manifest's ``created_at``/``finished_at`` (epoch seconds); tests
        inject a fixed one so that nothing depends on the date the suite runs."""
        self.clock = clock
        self.files: dict[str, bytes] = {}
        self.sources: list[SourceResult] = []
        self.started = clock()
        self.extra: dict[str, Any] = {}

    def add(self, name: str, data: bytes, *, redact: bool = False) -> str:
        """Add one file (``redact=True`` passes it through :func:`clusterdoctor.redact.redact_bytes`)."""
        _check_name(name)
        if redact:
            from clusterdoctor.redact import redact_bytes

            data = redact_bytes(data)
        self.files[name] = data
        return name

    def manifest(self) -> dict[str, Any]:
        from clusterdoctor import __version__

        u = os.uname()
        return {
            "schema": SCHEMA,
            "host": u.nodename,
            "created_at": _iso(self.started),
            "finished_at": _iso(self.clock()),
            "versions": {
                "clusterdoctor": __version__,
                "python": platform.python_version(),
                "kernel": f"{u.sysname} {u.release}",
            },
            "sources": [s.as_dict() for s in self.sources],
            "failed": [s.name for s in self.sources if s.status in ("failed", "timeout")],
            **self.extra,
        }

    def write(self, path: str | Path, level: int = 10) -> dict[str, Any]:
        """Write the bundle atomically; returns the manifest written."""
        import zstandard

        man = self.manifest()
        p = Path(path)
        tmp = p.with_name(f".{p.name}.tmp")
        cctx = zstandard.ZstdCompressor(level=level)
        with open(tmp, "wb") as raw, cctx.stream_writer(raw, closefd=False) as zw:
            with tarfile.open(fileobj=zw, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                mtime = self.clock()
                _tar_add(tar, "manifest.json", json.dumps(man, indent=2, sort_keys=True).encode(), mtime)
                for name in sorted(self.files):
                    _tar_add(tar, name, self.files[name], mtime)
        tmp.replace(p)
        return man


def _iso(t: float) -> str:
    import datetime as _dt

    return (
        _dt.datetime.fromtimestamp(t, _dt.timezone.utc)
        .replace(microsecond=0)
        .isoformat()
        .replace("+00:00", "Z")
    )


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = int(mtime)
    ti.mode = 0o644
    tar.addfile(ti, io.BytesIO(data))


def _check_name(name: str) -> None:
    p = PurePosixPath(name)
    if not name or p.is_absolute() or ".." in p.parts or "\\" in name or "\x00" in name:
        raise InputError(f"bundle member name {name!r} escapes the bundle")


def run_source(name: str, fn: Callable[[], list[str] | None], timeout_s: float | None = None) -> SourceResult:
    """Run one collector; failures become a recorded result, never an exception.

    ``fn`` enforces its own timeout (subprocess/HTTP timeouts); ``timeout_s`` is recorded.
    """
    t0 = time.monotonic()
    try:
        files = fn() or []
        return SourceResult(
            name,
            "ok" if files else "skipped",
            time.monotonic() - t0,
            timeout_s,
            None if files else "nothing to collect",
            files,
        )
    except TimeoutError as e:
        return SourceResult(name, "timeout", time.monotonic() - t0, timeout_s, str(e) or "timed out")
    except Exception as e:
        return SourceResult(name, "failed", time.monotonic() - t0, timeout_s, f"{type(e).__name__}: {e}")


# --- reading -----------------------------------------------------------------------------------------


def sniff_bundle(head: bytes, name: str = "") -> bool:
    """True for a zstd stream whose tar starts with ``manifest.json`` (our bundles)."""
    if not head.startswith(ZSTD_MAGIC):
        return False
    try:
        import zstandard

        d = zstandard.ZstdDecompressor().decompressobj()
        out = d.decompress(head)
    except Exception:
        return False
    return out[:13] == b"manifest.json"


def read_bundle(
    path: str | Path, *, max_total: int = MAX_TOTAL, skipped: list[str] | None = None
) -> dict[str, bytes]:
    """All files of a bundle by name. Raises InputError for anything unsafe or corrupt.

    Refused: absolute names, ``..`` components, symlinks/hard links/devices/FIFOs, more than
    ``MAX_MEMBERS`` members or ``max_total`` bytes in all. A member larger than the input limit
    (:func:`clusterdoctor.observe.limits.max_input_bytes`) is left out unread and named in
    ``skipped``.
    """
    import zstandard

    from clusterdoctor.observe.limits import MAX_INPUT_ENV, human_size, max_input_bytes

    member_limit = max_input_bytes()
    p = Path(path)
    try:
        raw = open(p, "rb")
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", str(p)) from None
    out: dict[str, bytes] = {}
    total = 0
    try:
        with raw:
            if raw.read(4) != ZSTD_MAGIC:
                raise InputError("not a clusterdoctor bundle (no zstd header)", str(p))
            raw.seek(0)
            reader = zstandard.ZstdDecompressor().stream_reader(raw)
            with tarfile.open(fileobj=reader, mode="r|") as tar:
                for m in tar:
                    if len(out) >= MAX_MEMBERS:
                        raise InputError(f"more than {MAX_MEMBERS} members", str(p))
                    name = m.name
                    try:
                        _check_name(name)
                    except InputError:
                        raise InputError(
                            f"member {name!r} escapes the bundle (absolute path or ..)", str(p)
                        ) from None
                    if m.issym() or m.islnk():
                        raise InputError(
                            f"member {name!r} is a link; bundles hold regular files only", str(p)
                        )
                    if m.isdir():
                        continue
                    if not m.isfile():
                        raise InputError(f"member {name!r} is not a regular file", str(p))
                    total += m.size
                    if total > max_total:
                        raise InputError(f"bundle expands to more than {max_total} bytes", str(p))
                    if m.size > member_limit:
                        # not read: one oversized file must not take the rest of the bundle with it
                        if skipped is not None:
                            skipped.append(
                                f"{p}:{name}: {human_size(m.size)}, larger than the input limit of "
                                f"{human_size(member_limit)}; not read (raise {MAX_INPUT_ENV})"
                            )
                        continue
                    f = tar.extractfile(m)
                    data = f.read() if f is not None else b""
                    out[PurePosixPath(name).as_posix()] = data
    except InputError:
        raise
    except (tarfile.TarError, zstandard.ZstdError, EOFError, OSError, ValueError) as e:
        raise InputError(f"corrupt bundle: {e}", str(p)) from None
    if "manifest.json" not in out:
        raise InputError("bundle has no manifest.json", str(p))
    return out


def _extract(files: dict[str, bytes], dest: Path) -> None:
    for name, data in files.items():
        _check_name(name)
        target = dest / name
        if not str(target.resolve()).startswith(str(dest.resolve()) + os.sep):
            raise InputError(f"member {name!r} escapes the bundle")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _merge(into: dict[str, Any], data: dict[str, Any]) -> None:
    metric = {k: v for k, v in data.items() if k == "metrics" or k.endswith("_metrics")}
    if metric:  # several dumps (two reads of a target, several targets): merged, not overwritten
        from clusterdoctor.analyze.metric_window import merge_metric_observations

        merge_metric_observations(into, metric)
    for k, v in data.items():
        if k in metric or k == "described_as":
            continue
        if k == "etcd_status" and hasattr(into.get(k), "merge"):
            into[k] = into[k].merge(v)
        elif k in into and isinstance(into[k], list) and isinstance(v, list):
            into[k].extend(v)
        elif k == "topology" and k in into:
            into.setdefault("warnings", []).append("several topologies in the bundle; the first is used")
        else:
            into[k] = v


def _load_member(f: Path, load_path: Callable[[Path], tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Detect and load one extracted file: logs/RDMA/NIC/app data by this package's specific sniffers
    first (a generic metrics sniffer may accept ``name: value`` counter text), the rest by ``load_path``."""
    from clusterdoctor.observe.event_sources import load_event_observations, sniff_events

    with f.open("rb") as fh:
        head = fh.read(65536)
    if sniff_events(head, f.name):
        return load_event_observations(f)
    return load_path(f)[1]


def load_bundle_observations(path: str | Path) -> dict[str, Any]:
    """A bundle → observations by kind, offline (see the module docstring).

    Every file goes through :func:`clusterdoctor.observe.detect.load_path`; the two RDMA reads give
    ``rdma`` (the second) and ``rdma_rates``; files that no loader accepts are listed in ``warnings``.
    """
    from clusterdoctor.observe.detect import load_path
    from clusterdoctor.observe.network.rdma import rates, read_sysfs_infiniband

    skipped: list[str] = []
    files = read_bundle(path, skipped=skipped)
    try:
        manifest = json.loads(files["manifest.json"])
    except ValueError:
        raise InputError("manifest.json is not JSON", str(path)) from None
    out: dict[str, Any] = {"warnings": skipped}
    for s in manifest.get("sources", []) if isinstance(manifest, dict) else []:
        if isinstance(s, dict) and s.get("status") in ("failed", "timeout"):
            out["warnings"].append(
                f"{path}: source {s.get('name')} {s.get('status')} when collected: {s.get('error')}"
            )
    with tempfile.TemporaryDirectory(prefix="cd-bundle-") as td:
        root = Path(td)
        _extract(files, root)
        # RDMA: two reads -> rates
        reads = []
        for k in ("read1", "read2"):
            d = root / "rdma" / k
            if d.is_dir():
                reads.append(read_sysfs_infiniband(d))
        times = manifest.get("rdma_read_times") if isinstance(manifest, dict) else None
        if reads and reads[-1]:
            out["rdma"] = reads[-1]
            if len(reads) == 2 and isinstance(times, list) and len(times) == 2:
                for p_, t in zip(reads[0], [times[0]] * len(reads[0])):
                    p_.time = t
                for p_ in reads[1]:
                    p_.time = times[1]
                try:
                    out["rdma_rates"] = rates(reads[0], reads[1])
                except InputError as e:
                    out["warnings"].append(f"{path}: rdma rates: {e.reason}")
        sysfs = root / "sysfs"
        if (sysfs / "sys" / "devices" / "system").is_dir():
            try:
                _, data = load_path(sysfs)
                topo = data.get("topology")
                if topo is not None:  # name the bundle, not the temporary extraction directory
                    topo.source = f"{path}:sysfs"
                    if isinstance(manifest, dict) and isinstance(manifest.get("host"), str):
                        topo.hostname = manifest["host"]
                _merge(out, data)
            except InputError as e:
                out["warnings"].append(f"{path}: sysfs: {e.reason}")
        placement = files.get("proc/placement.json")
        if placement:
            try:
                rows = json.loads(placement)
            except ValueError:
                rows = None
            if isinstance(rows, list) and all(isinstance(r, dict) and "pid" in r for r in rows):
                out["processes"] = rows
            else:
                out["warnings"].append(f"{path}: proc/placement.json is not a list of placement records")
        for name in sorted(files):
            if name == "manifest.json" or name.startswith(("rdma/read", "sysfs/", "proc/")):
                continue
            if name == "rdma/statistic.txt" and "rdma" in out:
                continue  # the sysfs reads already hold these counters
            f = root / name
            if not files[name].strip():
                continue
            try:
                data = _load_member(f, load_path)
            except InputError as e:
                out["warnings"].append(f"{path}:{name}: {e.reason}")
                continue
            _relabel_events(data, str(f), f"{path}:{name}")
            _merge(out, data)
    finished = _epoch(manifest.get("finished_at")) if isinstance(manifest, dict) else None
    if finished is not None:
        # when each log in the bundle was collected: its events cannot be later (clock skew check)
        srcs = sorted({e.source.location for e in out.get("events") or [] if e.source is not None})
        out["collection_times"] = [(s, finished) for s in srcs]
    return out


def _relabel_events(data: dict[str, Any], tmp_name: str, label: str) -> None:
    """Name events (and metric dumps) after the bundle member they came from, not the temporary
    extraction path."""
    import dataclasses

    for w in {id(v): v for v in data.values() if hasattr(v, "rename_source")}.values():
        w.rename_source(tmp_name, label)
    evs = data.get("events")
    if not isinstance(evs, list):
        return
    for i, e in enumerate(evs):
        src = getattr(e, "source", None)
        if src is not None and src.location == tmp_name:
            evs[i] = dataclasses.replace(e, source=dataclasses.replace(src, location=label))


def _epoch(iso: Any) -> float | None:
    """``2026-11-30T08:51:00Z`` (the manifest's times) → epoch seconds, or None."""
    import datetime as _dt

    if not isinstance(iso, str):
        return None
    try:
        t = _dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.timestamp()
