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
``..``, links, devices) and draws on the archive budgets of :mod:`clusterdoctor.observe.limits`. :func:`load_bundle_observations` turns a bundle
back into observations, offline, by running every file through the normal content detection.
"""

from __future__ import annotations

import io
import json
import os
import platform
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
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
        """Write the bundle atomically; returns the manifest written (as stored: redacted)."""
        import zstandard

        man = self.manifest()
        p = Path(path)
        tmp = p.with_name(f".{p.name}.tmp")
        cctx = zstandard.ZstdCompressor(level=level)
        with open(tmp, "wb") as raw, cctx.stream_writer(raw, closefd=False) as zw:
            with tarfile.open(fileobj=zw, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                mtime = self.clock()
                # the manifest names sources by what they were given (scrape URLs with credentials or
                # ?token=, command errors): redacted like every collected file
                _tar_add(tar, "manifest.json", _redacted_json(man), mtime)
                for name in sorted(self.files):
                    _tar_add(tar, name, self.files[name], mtime)
        tmp.replace(p)
        return json.loads(_redacted_json(man))


def _redacted_json(doc: Any) -> bytes:
    """The manifest as JSON with its secrets redacted value by value: it stays valid JSON whatever a
    source's name or error held (an escaped quote, ``--password=\"X\"``)."""
    from clusterdoctor.redact import redact_json_text

    text = json.dumps(doc, indent=2, sort_keys=True)
    red = redact_json_text(text)
    if red is None:  # json.dumps wrote it: it is JSON
        raise AssertionError("manifest JSON not readable as JSON")
    return red.encode()


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
    from clusterdoctor.observe.archive import safe_name

    if safe_name(name) is None:
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
    """True for a zstd stream whose tar starts with ``manifest.json`` (our bundles). Only the first
    bytes are inflated, a bounded read (64 KiB of zstd RLE blocks inflate to 2 GiB)."""
    if not head.startswith(ZSTD_MAGIC):
        return False
    try:
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(head), read_size=512) as r:
            out = r.read(13)
    except Exception:
        return False
    return out[:13] == b"manifest.json"


MAX_MANIFEST = 4 << 20  # a manifest lists a few dozen sources (a few KB); 4 MiB is generous
MAX_MANIFEST_WARNINGS = 20  # failed sources shown one by one; the rest are counted


def read_bundle(
    path: str | Path, *, max_total: int | None = None, skipped: list[str] | None = None
) -> dict[str, bytes]:
    """All files of a bundle by name, in memory (small bundles; :func:`load_bundle_observations`
    streams to disk instead). Raises InputError for anything unsafe or corrupt.

    Refused before any data is read (:mod:`clusterdoctor.observe.archive`): absolute names, ``..``
    components, links, devices/FIFOs, more members or more bytes in all than the archive budgets of
    :mod:`clusterdoctor.observe.limits` (``max_total`` lowers the byte budget). A member larger than the
    ``input`` limit is left out unread and named in ``skipped``.
    """
    from clusterdoctor.observe import archive, limits

    p = str(path)
    _check_zstd(p)
    members, truncated = archive.scan(p, "bundle")
    if max_total is not None and sum(m.size for m in members) > max_total:
        raise InputError(f"bundle expands to more than {max_total} bytes", p)
    member_limit = limits.max_input_bytes()
    out: dict[str, bytes] = {}
    try:
        for m, tar in archive._members(p, "bundle"):
            if not m.isfile():
                continue
            name = archive.safe_name(m.name) or ""
            if m.size > member_limit:
                if skipped is not None:
                    skipped.append(
                        f"{p}:{name}: {limits.human_size(m.size)}, larger than the input limit of "
                        f"{limits.human_size(member_limit)}; not read (raise {limits.MAX_INPUT_ENV})"
                    )
                continue
            f = tar.extractfile(m)
            out[name] = f.read() if f is not None else b""
    except archive._Truncated:
        pass
    if truncated and skipped is not None:
        skipped.append(f"{p}: {truncated}; only the members before the cut were read")
    if "manifest.json" not in out:
        raise InputError("bundle has no manifest.json", p)
    return out


def _check_zstd(p: str) -> None:
    from clusterdoctor.observe.limits import read_head

    if read_head(p, 4) != ZSTD_MAGIC:
        raise InputError("not a clusterdoctor bundle (no zstd header)", p)


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
    from clusterdoctor.observe.limits import read_head

    head = read_head(f, 65536)
    if sniff_events(head, f.name):
        return load_event_observations(f)
    return load_path(f)[1]


def load_bundle_observations(path: str | Path) -> dict[str, Any]:
    """A bundle → observations by kind, offline (see the module docstring).

    The bundle is streamed into a private temporary directory (:mod:`clusterdoctor.observe.archive`:
    budgets checked on the headers before anything is written; removed afterwards, and by the next
    run if this one is killed). Every file goes through :func:`clusterdoctor.observe.detect.load_path`;
    the two RDMA reads give ``rdma`` (the second) and ``rdma_rates``; files that no loader accepts,
    members that could not be extracted and sources that failed at collection are listed in
    ``warnings``. A bundle inside a bundle counts against the outer one's budgets.
    """
    from clusterdoctor.observe import archive, limits
    from clusterdoctor.observe.detect import load_path

    p = str(path)
    _check_zstd(p)
    with limits.archive_scope(p), archive.private_tempdir("bundle") as td:
        names, warnings = archive.extract(p, td, what="bundle", skip_over=limits.max_input_bytes())
        if "manifest.json" not in names:
            raise InputError("bundle has no manifest.json", p)
        mf = td / "manifest.json"
        if mf.stat().st_size > MAX_MANIFEST:
            raise InputError(
                f"manifest.json is {limits.human_size(mf.stat().st_size)}, larger than a manifest can be "
                f"({limits.human_size(MAX_MANIFEST)})",
                p,
            )
        manifest = limits.load_json(mf.read_bytes(), f"{p}:manifest.json", "manifest JSON")
        if not isinstance(manifest, dict):
            raise InputError("manifest.json is not a JSON object", p)
        out: dict[str, Any] = {"warnings": warnings}
        cut = [w for w in warnings if "only the members before the cut were read" in w]
        if cut:
            out["incomplete_inputs"] = cut
        out["warnings"].extend(_manifest_warnings(p, manifest))
        _load_extracted(p, td, sorted(names), manifest, out, load_path)
    finished = _epoch(manifest.get("finished_at"))
    if finished is not None:
        # when each log in the bundle was collected: its events cannot be later (clock skew check)
        srcs = sorted({e.source.location for e in out.get("events") or [] if e.source is not None})
        out["collection_times"] = [(s, finished) for s in srcs]
    return out


def _manifest_warnings(path: str, manifest: dict[str, Any]) -> list[str]:
    """Sources that failed or timed out when collected (the first few by name, then a count)."""
    sources = manifest.get("sources")
    if sources is None:
        return []
    if not isinstance(sources, list):
        return [f"{path}: manifest.json 'sources' is not a list; the collection record was not read"]
    out, more = [], 0
    for s in sources:
        if isinstance(s, dict) and s.get("status") in ("failed", "timeout"):
            if len(out) < MAX_MANIFEST_WARNINGS:
                out.append(
                    f"{path}: source {str(s.get('name'))[:200]} {s.get('status')} when collected: "
                    f"{str(s.get('error'))[:300]}"
                )
            else:
                more += 1
    if more:
        out.append(f"{path}: {more} more sources failed or timed out when collected (see manifest.json)")
    return out


def _read_times(manifest: dict[str, Any]) -> tuple[float, float] | None:
    t = manifest.get("rdma_read_times")
    if (
        isinstance(t, list)
        and len(t) == 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x == x for x in t)
        and t[1] > t[0]
    ):
        return float(t[0]), float(t[1])
    return None


def _load_extracted(
    path: str, root: Path, names: list[str], manifest: dict[str, Any], out: dict[str, Any],
    load_path: Callable[[Path], tuple[str, dict[str, Any]]],
) -> None:  # fmt: skip
    from clusterdoctor.observe.limits import load_json, read_input
    from clusterdoctor.observe.network.rdma import rates, read_sysfs_infiniband

    # RDMA: two reads -> rates
    reads = []
    for k in ("read1", "read2"):
        d = root / "rdma" / k
        if d.is_dir():
            reads.append(read_sysfs_infiniband(d))
    if reads and reads[-1]:
        out["rdma"] = reads[-1]
        times = _read_times(manifest)
        if len(reads) == 2 and times is None:
            out["warnings"].append(
                f"{path}: manifest.json rdma_read_times is not two increasing times; no rates"
            )
        if len(reads) == 2 and times is not None:
            for p_ in reads[0]:
                p_.time = times[0]
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
                if isinstance(manifest.get("host"), str):
                    topo.hostname = manifest["host"][:253]
            _merge(out, data)
        except InputError as e:
            out["warnings"].append(f"{path}: sysfs: {e.reason}")
    if "proc/placement.json" in names:
        try:
            rows = load_json(read_input(root / "proc" / "placement.json"), f"{path}:proc/placement.json")
        except InputError:
            rows = None
        if isinstance(rows, list) and all(isinstance(r, dict) and "pid" in r for r in rows):
            out["processes"] = rows
        else:
            out["warnings"].append(f"{path}: proc/placement.json is not a list of placement records")
    for name in names:
        if name == "manifest.json" or name.startswith(("rdma/read", "sysfs/", "proc/")):
            continue
        if name == "rdma/statistic.txt" and "rdma" in out:
            continue  # the sysfs reads already hold these counters
        f = root / name
        try:
            size = f.stat().st_size
            if size < 4096 and not f.read_bytes().strip():
                continue  # an empty capture (a source with nothing to say)
            data = _load_member(f, load_path)
        except InputError as e:
            out["warnings"].append(f"{path}:{name}: {e.reason}".replace(str(root) + "/", ""))
            continue
        except OSError as e:
            out["warnings"].append(f"{path}:{name}: cannot be read ({e.strerror or e})")
            continue
        label = f"{path}:{name}"
        _relabel_events(data, str(f), label)
        if isinstance(data.get("warnings"), list):  # name the member, not the temporary directory
            data["warnings"] = [str(w).replace(str(f), label) for w in data["warnings"]]
        _merge(out, data)


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
