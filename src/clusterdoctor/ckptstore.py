"""A tiered checkpoint store: newest checkpoints in a fast local directory, older ones spilled to a
slower path zstd-compressed; atomic writes, checksums verified on read, crash-safe.

Guarantees:

- **Newest wins**: every save takes the next number of a sequence that never goes back (a counter
  file, ``SEQ``, raised before the checkpoint is written, and never below any number on disk), so the
  latest ``save(name)`` is what ``load(name)`` and ``load()`` return — one entry per name: a new save
  of a name removes its older copies in both tiers.
- **Atomic**: a checkpoint is written to a temporary file in the target directory, flushed and
  ``fsync``-ed, renamed into place (``os.replace``) and the directory is ``fsync``-ed. A crash (even
  ``kill -9``) in the middle of a save leaves at most temporary files, which readers ignore; the
  previous checkpoint stays readable. A save that fails (disk full, an exception from the data)
  removes its own temporary files before raising.
- **Writers serialised**: a save holds an exclusive lock (``flock`` on ``.lock`` in the fast
  directory) from choosing its number to its last rename; a second writer, in this process or
  another, waits up to ``lock_timeout`` seconds and then gets :class:`StoreBusy`.
- **Live writers untouched**: temporary files are named ``.<seq>-<name>.<host>.<pid>.<tag>.tmp`` and
  their writer holds an exclusive ``flock`` on each for as long as it writes it: the lock, not the
  PID, says whether the writer lives (two processes with the same host name in different PID
  namespaces, a hostNetwork pod and a sidecar, cannot see each other's PIDs but share the lock).
  Opening a store removes a temporary file only when its lock can be taken (its writer is gone) —
  and another host's (a shared slow tier, where locks may not reach across machines) only when it is
  also older than ``stale_after`` seconds.
- **Verified**: every file carries the SHA-256 of the uncompressed payload and a SHA-256 of its header
  (which holds the payload's): :meth:`load` recomputes both and raises :class:`ChecksumError` on a
  mismatch. A file whose header does not verify (one flipped bit in its sequence number would
  otherwise make an old checkpoint "the newest") is left out of :meth:`list` and named in
  :attr:`TieredCheckpointStore.problems` (and logged); :meth:`load_latest_valid` serves the newest
  checkpoint that verifies. Anything that is not a regular file (a FIFO named ``*.ckpt``) is never
  opened for reading in a way that could block.
- **Tiered**: the newest ``keep_fast`` checkpoints stay uncompressed in ``fast_dir``; older ones are
  moved to ``slow_dir`` compressed with zstd (level ``zstd_level``, default 12) by the same atomic
  write, then removed from the fast directory. Without ``slow_dir`` older checkpoints are deleted.

File format: ``CDCKPT02`` magic, 4-byte big-endian header length, a JSON header (name, seq, size,
sha256 of the payload, codec, and ``check``: the SHA-256 of the other header fields as canonical
JSON), then the payload (raw or one zstd frame). ``CDCKPT01`` files (no ``check``) are still read;
their header is checked against the sequence number and name in the file name.

Usage::

    store = TieredCheckpointStore("/local/nvme/ckpt", "/mnt/shared/ckpt", keep_fast=2)
    store.save("step-1000", state_bytes)
    data = store.load(store.latest())
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import socket
import stat
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from clusterdoctor.errors import ClusterDoctorError, InputError

MAGIC = b"CDCKPT02"
MAGIC_V1 = b"CDCKPT01"  # no header checksum: read, cross-checked with the file name
_LOG = logging.getLogger("clusterdoctor.ckptstore")
SUFFIX = ".ckpt"
TMP_SUFFIX = ".tmp"
DEFAULT_ZSTD_LEVEL = 12
_NAME_OK = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_SEQ_FILE = "SEQ"
_LOCK_FILE = ".lock"
DEFAULT_STALE_AFTER_S = 24 * 3600.0  # a temp file this old belongs to no live writer (another host's)
_FILE_SEQ = re.compile(r"^\.?(\d{12})-")
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)  # flock not supported here
_FILE_NAME = re.compile(r"^(\d{12})-(.+)\.ckpt$")
_TMP = re.compile(
    r"^\.(?P<seq>\d{12})-(?P<name>.+?)\.(?P<host>[A-Za-z0-9._-]*)\.(?P<pid>\d+)\.[0-9a-f]+(?:\.body)?\.tmp$"
)


class ChecksumError(ClusterDoctorError):
    """A stored checkpoint's payload does not match its recorded SHA-256."""


class StoreBusy(ClusterDoctorError):
    """Another writer held the store's lock for longer than ``lock_timeout``."""


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:64] or "host"


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


def _header_check(fields: dict) -> str:
    """The header's own checksum: SHA-256 of its fields (``check`` aside) as canonical JSON."""
    body = {k: v for k, v in fields.items() if k != "check"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _header(name: str, seq: int, size: int, sha: str, codec: str) -> bytes:
    fields = {"name": name, "seq": seq, "size": size, "sha256": sha, "codec": codec}
    fields["check"] = _header_check(fields)
    h = json.dumps(fields, sort_keys=True).encode()
    return MAGIC + struct.pack(">I", len(h)) + h


def _read_header(f, path: Path) -> dict:
    """The header of an open checkpoint, verified: its own checksum (v2), its sequence number and
    name against the file name (when the name is a checkpoint's). InputError when it is not ours,
    ChecksumError when it is damaged."""
    magic = f.read(len(MAGIC))
    if magic not in (MAGIC, MAGIC_V1):
        raise InputError("not a clusterdoctor checkpoint (bad magic)", str(path))
    raw = f.read(4)
    if len(raw) != 4:
        raise InputError("truncated checkpoint header", str(path))
    (n,) = struct.unpack(">I", raw)
    if n > 1 << 20:
        raise ChecksumError(f"{path}: implausible checkpoint header length ({n})")
    try:
        h = json.loads(f.read(n))
        if type(h.get("seq")) is not int or type(h.get("size")) is not int:
            raise ValueError("seq/size")
        if not isinstance(h["sha256"], str) or not isinstance(h["name"], str):
            raise ValueError("sha256/name")
        if h["codec"] not in ("raw", "zstd"):
            raise ValueError(h["codec"])
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise ChecksumError(f"{path}: damaged checkpoint header (not the JSON a save writes)") from None
    if magic == MAGIC and h.get("check") != _header_check(h):
        raise ChecksumError(f"{path}: checkpoint header checksum mismatch (a damaged header)")
    m = _FILE_NAME.match(path.name)
    if m is not None and (int(m.group(1)) != h["seq"] or m.group(2) != h["name"]):
        raise ChecksumError(
            f"{path}: header says checkpoint {h['name']!r} number {h['seq']}, the file name says "
            f"{m.group(2)!r} number {int(m.group(1))} (a damaged header or file name)"
        )
    return h


def _open_for_reading(path: Path):
    """A checkpoint file opened for reading without ever blocking: a FIFO, a device or a folder
    named ``*.ckpt`` (or a link to one) is refused (InputError) before a byte is read."""
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(
                "not a regular file (a FIFO, device or folder named like a checkpoint)", str(path)
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class _TempFile:
    """A temporary file its writer holds an exclusive ``flock`` on until it is renamed or removed:
    the lock is what tells a sweeper that the writer is alive (see the module docstring)."""

    def __init__(self, directory: Path, make_name) -> None:
        for _ in range(100):
            path = directory / make_name()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as e:  # a file system without locks (NFS mounted nolock): a sweeper
                if e.errno not in _NO_LOCKS:  # cannot lock it either, so it never removes the file
                    os.close(fd)
                    raise
            try:  # a sweeper may have removed it between the create and the lock: start again
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.path, self.fd = path, fd
                return
            os.close(fd)
        raise OSError(errno.EAGAIN, "could not create a temporary file that stays", str(directory))

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def sync(self) -> None:
        os.fsync(self.fd)

    def close(self, remove: bool) -> None:
        """Release the lock (``remove``: delete the file first, while still holding it)."""
        if self.fd < 0:
            return
        try:
            if remove:
                with contextlib.suppress(FileNotFoundError):
                    if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                        os.unlink(self.path)
        finally:
            os.close(self.fd)
            self.fd = -1


def _remove_if_unowned(path: Path, without_locks: bool = False) -> bool:
    """Remove ``path`` when no writer holds its lock: the lock is taken first, the file checked to be
    the one locked, and removed while locked. False when its writer lives, it vanished, or it is not
    a regular file; on a file system without locks, ``without_locks`` says whether to remove it
    anyway (another host's file, already older than ``stale_after``)."""
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if not (without_locks and e.errno in _NO_LOCKS):
                return False  # its writer holds it (or no locks here: only age may decide)
        try:
            if os.stat(path, follow_symlinks=False).st_ino != st.st_ino:
                return False
        except FileNotFoundError:
            return False
        os.unlink(path)
        return True
    finally:
        os.close(fd)


class TieredCheckpointStore:
    """See the module docstring."""

    def __init__(self, fast_dir: str | Path, slow_dir: str | Path | None = None, keep_fast: int = 2,
                 zstd_level: int = DEFAULT_ZSTD_LEVEL, keep_total: int | None = None,
                 lock_timeout: float = 60.0, stale_after: float = DEFAULT_STALE_AFTER_S) -> None:  # fmt: skip
        if keep_fast < 1:
            raise ValueError("keep_fast must be at least 1")
        if not 1 <= zstd_level <= 22:
            raise ValueError("zstd_level must be in 1..22")
        self.fast = Path(fast_dir)
        self.slow = Path(slow_dir) if slow_dir is not None else None
        self.keep_fast = keep_fast
        self.keep_total = keep_total
        self.zstd_level = zstd_level
        self.lock_timeout = lock_timeout
        self.stale_after = stale_after
        self.host = _host()
        self.problems: dict[Path, str] = {}  # damaged or unreadable files left out, and why
        for d in (self.fast, self.slow):
            if d is not None:
                d.mkdir(parents=True, exist_ok=True)
        self.remove_stale_temp_files()

    def remove_stale_temp_files(self) -> list[Path]:
        """Remove temporary files of writers that are gone (see the module docstring); returns them."""
        removed = []
        now = time.time()
        for d in (self.fast, self.slow):
            if d is None:
                continue
            for t in d.glob(f".*{TMP_SUFFIX}"):
                m = _TMP.match(t.name)
                foreign = m is None or m["host"] != self.host
                if foreign:  # another host's (a shared tier): also by age
                    try:
                        if now - t.lstat().st_mtime <= self.stale_after:
                            continue
                    except FileNotFoundError:
                        continue
                if _remove_if_unowned(t, without_locks=foreign):
                    removed.append(t)
        return removed

    # -- listing ------------------------------------------------------------------------------------
    def _scan(self, d: Path | None) -> list[CheckpointInfo]:
        out = []
        if d is None or not d.is_dir():
            return out
        for p in d.glob(f"*{SUFFIX}"):
            try:
                with _open_for_reading(p) as f:
                    h = _read_header(f, p)
            except ChecksumError as e:
                self._problem(p, str(e).removeprefix(f"{p}: "))
                continue
            except InputError as e:
                if "bad magic" not in e.reason or _FILE_NAME.match(p.name):
                    self._problem(p, e.reason)  # named like a checkpoint: a damaged one, reported
                continue  # not ours: ignored
            except OSError as e:
                self._problem(p, f"cannot be read ({e.strerror or e})")
                continue
            out.append(CheckpointInfo(h["name"], h["seq"], h["size"], h["sha256"], h["codec"], p))
        return out

    def _problem(self, path: Path, why: str) -> None:
        if self.problems.get(path) != why:
            _LOG.warning("%s: %s; left out (the previous good checkpoint is served)", path, why)
        self.problems[path] = why

    def list(self) -> list[CheckpointInfo]:
        """All checkpoints, oldest first (fast and slow tiers): one per name, the highest sequence.
        Files whose header does not verify are left out and named in :attr:`problems`."""
        self.problems = {}
        by_name: dict[str, CheckpointInfo] = {}
        for info in self._scan(self.slow) + self._scan(self.fast):
            old = by_name.get(info.name)
            if old is None or info.seq > old.seq or (info.seq == old.seq and info.codec == "raw"):
                by_name[info.name] = info  # the newest save; mid-spill, the fast copy of the same one
        return sorted(by_name.values(), key=lambda i: i.seq)

    def latest(self) -> str | None:
        items = self.list()
        return items[-1].name if items else None

    # -- writing ------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.fast / _LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() > deadline:
                        raise StoreBusy(
                            f"{self.fast}: another writer has held the checkpoint store for more than "
                            f"{self.lock_timeout:g} s"
                        ) from None
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _next_seq(self) -> int:
        """The next number (under the lock): above the counter and above every number on disk, so a
        number is never used twice even if the counter file or newer checkpoints were lost."""
        top = 0
        try:
            top = int((self.fast / _SEQ_FILE).read_text().strip() or 0)
        except (OSError, ValueError):
            pass
        for d in (self.fast, self.slow):
            if d is not None:
                for p in d.iterdir():
                    m = _FILE_SEQ.match(p.name)
                    if m:
                        top = max(top, int(m.group(1)))
        seq = top + 1
        self._atomic_write(self.fast, _SEQ_FILE, f"{seq}\n".encode(), [], seq=seq, name="SEQ")
        return seq

    def _tmp_name(self, seq: int, name: str, body: bool = False) -> str:
        tag = secrets.token_hex(4)
        return f".{seq:012d}-{name}.{self.host}.{os.getpid()}.{tag}{'.body' if body else ''}{TMP_SUFFIX}"

    def _file_name(self, seq: int, name: str) -> str:
        return f"{seq:012d}-{name}{SUFFIX}"

    def _atomic_write(self, directory: Path, final_name: str, header: bytes, chunks: Iterable[bytes],
                      *, seq: int, name: str) -> Path:  # fmt: skip
        final = directory / final_name
        tmp = _TempFile(directory, lambda: self._tmp_name(seq, name))
        renamed = False
        try:
            tmp.write(header)
            for c in chunks:
                tmp.write(c)
            tmp.sync()
            os.replace(tmp.path, final)
            renamed = True
        finally:
            tmp.close(remove=not renamed)  # a failed save (disk full, bad data) leaves nothing behind
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
        with self._locked():
            seq = self._next_seq()
            sha = hashlib.sha256()
            size = 0
            body = _TempFile(self.fast, lambda: self._tmp_name(seq, name, body=True))
            try:
                for c in chunks:
                    sha.update(c)
                    size += len(c)
                    body.write(c)
                body.sync()
                header = _header(name, seq, size, sha.hexdigest(), "raw")
                path = self._atomic_write(
                    self.fast, self._file_name(seq, name), header, _file_chunks(body.path), seq=seq, name=name
                )
            finally:
                body.close(remove=True)
            self._drop_older(name, seq)
            self._spill()
        return path

    def _drop_older(self, name: str, seq: int) -> None:
        """One entry per name: older copies of ``name`` (either tier) go once the new one is in place."""
        for info in self._scan(self.slow) + self._scan(self.fast):
            if info.name == name and info.seq < seq:
                info.path.unlink(missing_ok=True)

    def _spill(self) -> None:
        fast = sorted(self._scan(self.fast), key=lambda i: i.seq)
        for info in fast[: max(0, len(fast) - self.keep_fast)]:
            if self.slow is not None:
                import zstandard

                data = self._read_payload(info)
                comp = zstandard.ZstdCompressor(level=self.zstd_level).compress(data)
                header = _header(info.name, info.seq, info.size, info.sha256, "zstd")
                self._atomic_write(
                    self.slow,
                    self._file_name(info.seq, info.name),
                    header,
                    [comp],
                    seq=info.seq,
                    name=info.name,
                )
            info.path.unlink(missing_ok=True)
            _fsync_dir(self.fast)
        if self.keep_total is not None:
            items = self.list()
            for info in items[: max(0, len(items) - self.keep_total)]:
                info.path.unlink(missing_ok=True)

    # -- reading ------------------------------------------------------------------------------------
    def _read_payload(self, info: CheckpointInfo) -> bytes:
        with _open_for_reading(info.path) as f:
            h = _read_header(f, info.path)
            if (h["seq"], h["sha256"], h["size"], h["codec"]) != (
                info.seq,
                info.sha256,
                info.size,
                info.codec,
            ):
                raise FileNotFoundError(errno.ENOENT, "replaced since it was listed", str(info.path))
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
        """The payload of checkpoint ``name`` (default: the latest), verified against its checksum.
        Reads take no lock: a file spilled or superseded between listing and reading is looked up
        again."""
        for attempt in range(5):
            items = self.list()
            by_name = {i.name: i for i in items}
            want = name if name is not None else (items[-1].name if items else None)
            if want is None:
                raise KeyError("no checkpoints")
            if want not in by_name:
                raise KeyError(f"no checkpoint named {want!r}")
            try:
                return self._read_payload(by_name[want])
            except FileNotFoundError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def load_latest_valid(self) -> tuple[str, bytes] | None:
        """The newest checkpoint whose checksums verify, or None; the damaged ones skipped on the way
        are named in :attr:`problems` (and logged)."""
        for info in reversed(self.list()):
            try:
                return info.name, self._read_payload(info)
            except ChecksumError as e:
                self._problem(info.path, str(e).removeprefix(f"{info.path}: "))
            except (OSError, InputError) as e:
                self._problem(info.path, f"cannot be read ({e})")
        return None


def _file_chunks(path: Path, size: int = 1 << 22):
    with open(path, "rb") as f:
        while True:
            b = f.read(size)
            if not b:
                return
            yield b
