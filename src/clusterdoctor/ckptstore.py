"""A tiered checkpoint store: newest checkpoints in a fast local directory, older ones spilled to a
slower path zstd-compressed; atomic writes, checksums verified on read, crash-safe.

Guarantees:

- **Atomic**: a checkpoint is written to a temporary file in the target directory, flushed and
  ``fsync``-ed, renamed into place (``os.replace``) and the directory is ``fsync``-ed. A crash (even
  ``kill -9``) in the middle of a save leaves at most a ``.tmp`` file, which readers ignore and the next
  open removes; the previous checkpoint stays readable.
- **Verified**: every file carries the SHA-256 of the uncompressed payload; :meth:`load` recomputes it
  and raises :class:`ChecksumError` on mismatch.
- **Tiered**: the newest ``keep_fast`` checkpoints stay uncompressed in ``fast_dir``; older ones are
  moved to ``slow_dir`` compressed with zstd (level ``zstd_level``, default 12) by the same atomic
  write, then removed from the fast directory. Without ``slow_dir`` older checkpoints are deleted.

File format: ``CDCKPT01`` magic, 4-byte big-endian header length, a JSON header (name, seq, size,
sha256, codec), then the payload (raw or one zstd frame).

Usage::

    store = TieredCheckpointStore("/local/nvme/ckpt", "/mnt/shared/ckpt", keep_fast=2)
    store.save("step-1000", state_bytes)
    data = store.load(store.latest())
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from clusterdoctor.errors import ClusterDoctorError, InputError

MAGIC = b"CDCKPT01"
SUFFIX = ".ckpt"
TMP_SUFFIX = ".tmp"
DEFAULT_ZSTD_LEVEL = 12
_NAME_OK = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class ChecksumError(ClusterDoctorError):
    """A stored checkpoint's payload does not match its recorded SHA-256."""


@dataclass(frozen=True)
class CheckpointInfo:
    name: str
    seq: int
    size: int
    sha256: str
    codec: str  # "raw" or "zstd"
    path: Path


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _header(name: str, seq: int, size: int, sha: str, codec: str) -> bytes:
    h = json.dumps(
        {"name": name, "seq": seq, "size": size, "sha256": sha, "codec": codec}, sort_keys=True
    ).encode()
    return MAGIC + struct.pack(">I", len(h)) + h


def _read_header(f, path: Path) -> dict:
    magic = f.read(len(MAGIC))
    if magic != MAGIC:
        raise InputError("not a clusterdoctor checkpoint (bad magic)", str(path))
    raw = f.read(4)
    if len(raw) != 4:
        raise InputError("truncated checkpoint header", str(path))
    (n,) = struct.unpack(">I", raw)
    if n > 1 << 20:
        raise InputError("implausible checkpoint header length", str(path))
    try:
        h = json.loads(f.read(n))
        h["seq"] = int(h["seq"])
        h["size"] = int(h["size"])
        str(h["sha256"])
        str(h["name"])
        if h["codec"] not in ("raw", "zstd"):
            raise ValueError(h["codec"])
    except (ValueError, KeyError, TypeError):
        raise InputError("bad checkpoint header", str(path)) from None
    return h


class TieredCheckpointStore:
    """See the module docstring."""

    def __init__(self, fast_dir: str | Path, slow_dir: str | Path | None = None, keep_fast: int = 2,
                 zstd_level: int = DEFAULT_ZSTD_LEVEL, keep_total: int | None = None) -> None:  # fmt: skip
        if keep_fast < 1:
            raise ValueError("keep_fast must be at least 1")
        if not 1 <= zstd_level <= 22:
            raise ValueError("zstd_level must be in 1..22")
        self.fast = Path(fast_dir)
        self.slow = Path(slow_dir) if slow_dir is not None else None
        self.keep_fast = keep_fast
        self.keep_total = keep_total
        self.zstd_level = zstd_level
        for d in (self.fast, self.slow):
            if d is not None:
                d.mkdir(parents=True, exist_ok=True)
                for t in d.glob(f"*{TMP_SUFFIX}"):  # leftovers of a crashed save
                    t.unlink(missing_ok=True)

    # -- listing ------------------------------------------------------------------------------------
    def _scan(self, d: Path | None) -> list[CheckpointInfo]:
        out = []
        if d is None or not d.is_dir():
            return out
        for p in d.glob(f"*{SUFFIX}"):
            try:
                with open(p, "rb") as f:
                    h = _read_header(f, p)
            except (InputError, OSError):
                continue  # not ours or unreadable: ignore in listings; load() reports it
            out.append(CheckpointInfo(h["name"], h["seq"], h["size"], h["sha256"], h["codec"], p))
        return out

    def list(self) -> list[CheckpointInfo]:
        """All checkpoints, oldest first (fast and slow tiers)."""
        by_name: dict[str, CheckpointInfo] = {}
        for info in self._scan(self.slow) + self._scan(self.fast):  # fast wins if both exist mid-spill
            by_name[info.name] = info
        return sorted(by_name.values(), key=lambda i: i.seq)

    def latest(self) -> str | None:
        items = self.list()
        return items[-1].name if items else None

    # -- writing ------------------------------------------------------------------------------------
    def _file_name(self, seq: int, name: str) -> str:
        return f"{seq:012d}-{name}{SUFFIX}"

    def _atomic_write(self, directory: Path, final_name: str, header: bytes, chunks: Iterable[bytes]) -> Path:
        final = directory / final_name
        tmp = directory / f".{final_name}.{os.getpid()}{TMP_SUFFIX}"
        with open(tmp, "wb") as f:
            f.write(header)
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        _fsync_dir(directory)
        return final

    def save(self, name: str, data: bytes) -> Path:
        """Store ``data`` as checkpoint ``name`` (atomically) and spill older ones."""
        return self.save_stream(name, [data])

    def save_stream(self, name: str, chunks: Iterable[bytes]) -> Path:
        """Like :meth:`save` for data produced in chunks (large states). The checksum is computed while
        writing; the header is written last via a second atomic step, so a crash leaves no partial file."""
        if not _NAME_OK.match(name):
            raise ValueError(f"checkpoint name {name!r}: use 1-128 of [A-Za-z0-9._-]")
        items = self.list()
        seq = items[-1].seq + 1 if items else 1
        sha = hashlib.sha256()
        size = 0
        body = self.fast / f".{seq:012d}-{name}.body.{os.getpid()}{TMP_SUFFIX}"
        with open(body, "wb") as f:
            for c in chunks:
                sha.update(c)
                size += len(c)
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        try:
            header = _header(name, seq, size, sha.hexdigest(), "raw")
            path = self._atomic_write(self.fast, self._file_name(seq, name), header, _file_chunks(body))
        finally:
            body.unlink(missing_ok=True)
        self._spill()
        return path

    def _spill(self) -> None:
        fast = sorted(self._scan(self.fast), key=lambda i: i.seq)
        for info in fast[: max(0, len(fast) - self.keep_fast)]:
            if self.slow is not None:
                import zstandard

                data = self._read_payload(info)
                comp = zstandard.ZstdCompressor(level=self.zstd_level).compress(data)
                header = _header(info.name, info.seq, info.size, info.sha256, "zstd")
                self._atomic_write(self.slow, self._file_name(info.seq, info.name), header, [comp])
            info.path.unlink(missing_ok=True)
            _fsync_dir(self.fast)
        if self.keep_total is not None:
            items = self.list()
            for info in items[: max(0, len(items) - self.keep_total)]:
                info.path.unlink(missing_ok=True)

    # -- reading ------------------------------------------------------------------------------------
    def _read_payload(self, info: CheckpointInfo) -> bytes:
        with open(info.path, "rb") as f:
            _read_header(f, info.path)
            payload = f.read()
        if info.codec == "zstd":
            import zstandard

            try:
                payload = zstandard.ZstdDecompressor().decompress(payload, max_output_size=info.size)
            except zstandard.ZstdError as e:
                raise ChecksumError(f"{info.path}: corrupt zstd frame: {e}") from None
        if len(payload) != info.size or hashlib.sha256(payload).hexdigest() != info.sha256:
            raise ChecksumError(f"{info.path}: checksum mismatch (stored {info.sha256[:12]}...)")
        return payload

    def load(self, name: str | None = None) -> bytes:
        """The payload of checkpoint ``name`` (default: the latest), verified against its checksum."""
        items = {i.name: i for i in self.list()}
        if name is None:
            name = self.latest()
            if name is None:
                raise KeyError("no checkpoints")
        if name not in items:
            raise KeyError(f"no checkpoint named {name!r}")
        return self._read_payload(items[name])

    def load_latest_valid(self) -> tuple[str, bytes] | None:
        """The newest checkpoint whose checksum verifies (skipping corrupt ones), or None."""
        for info in reversed(self.list()):
            try:
                return info.name, self._read_payload(info)
            except (ChecksumError, OSError, InputError):
                continue
        return None


def _file_chunks(path: Path, size: int = 1 << 22):
    with open(path, "rb") as f:
        while True:
            b = f.read(size)
            if not b:
                return
            yield b
