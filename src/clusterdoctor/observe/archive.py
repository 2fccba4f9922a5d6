"""Tar archives from other machines (bundles, sysfs tarballs), read safely and within budget.

:func:`extract` streams an archive (plain, gzip, zstd, xz or bzip2) twice: the first pass reads only
the headers and checks every member against the budgets of :mod:`clusterdoctor.observe.limits`
(member count, total size, nesting of archives in archives) and the safety rules (regular files and
directories only, no absolute names, no ``..``), so that a bomb is refused before anything is written;
the second pass writes the members into a private temporary directory from
:func:`private_tempdir`. A member that cannot be written (a name too long for the file system, a file
where a directory must go) is left out with a warning; a truncated archive yields the members before
the cut and a warning.

Temporary directories are named ``cd-<what>-<pid>-<random>`` and hold a lock for as long as their
owner lives; each new one first removes those whose owner died (``kill -9``) — the lock, not the PID,
decides, so a live run in another PID namespace sharing ``/tmp`` is never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from clusterdoctor.errors import InputError
from clusterdoctor.observe import limits

__all__ = ["Member", "extract", "private_tempdir", "safe_name"]

_LOCK = ".cd-owner.lock"
_GRACE_S = 60.0  # a directory younger than this is never swept (its owner may be taking the lock)
NAME_MAX = 255  # bytes per path component (ext4, xfs)
PATH_MAX = 4096


class Member:
    __slots__ = ("name", "size")

    def __init__(self, name: str, size: int) -> None:
        self.name, self.size = name, size


def safe_name(name: str) -> str | None:
    """The member name as a relative POSIX path, or None when it would escape the extraction
    directory (absolute, ``..``, backslashes, NUL)."""
    p = PurePosixPath(name)
    if not name or p.is_absolute() or ".." in p.parts or "\\" in name or "\x00" in name:
        return None
    norm = p.as_posix()
    return None if norm in (".", "") else norm


def _open_tar(path: str, stack: contextlib.ExitStack) -> tuple[tarfile.TarFile, limits.InputStream]:
    f = stack.enter_context(limits.open_input(path))
    try:
        tar = stack.enter_context(tarfile.open(fileobj=f, mode="r|"))
    except (tarfile.TarError, EOFError) as e:
        raise InputError(f"not a readable tar archive: {e}", path) from None
    return tar, f.raw  # type: ignore[return-value]


def _members(path: str, what: str, strict: bool = True) -> Iterator[tuple[tarfile.TarInfo, tarfile.TarFile]]:
    """Every member with the open archive to read it from; ``strict`` refuses (InputError) any member
    that is not a regular file or directory under a safe name, otherwise they are yielded for the
    caller to judge. Tar errors become InputError; a cut-off stream raises :class:`_Truncated` at the
    end."""
    with contextlib.ExitStack() as stack:
        tar, stream = _open_tar(path, stack)
        try:
            for m in tar:
                stream.budget.check_time()
                if strict:
                    if safe_name(m.name) is None:
                        raise InputError(
                            f"member {m.name[:120]!r} escapes the {what} (absolute path or ..)", path
                        )
                    if m.issym() or m.islnk():
                        raise InputError(
                            f"member {m.name[:120]!r} is a link; {what}s hold regular files only", path
                        )
                    if not (m.isfile() or m.isdir()):
                        raise InputError(f"member {m.name[:120]!r} is not a regular file", path)
                yield m, tar
        except (tarfile.TarError, EOFError) as e:
            if stream.truncated:  # tarfile saw the end of a cut-off stream inside a member
                raise _Truncated(stream.truncated) from None
            raise InputError(f"corrupt {what}: {e}", path) from None
        if stream.truncated:
            raise _Truncated(stream.truncated)


class _Truncated(Exception):
    pass


def scan(
    path: str | os.PathLike[str], what: str = "archive", strict: bool = True
) -> tuple[list[Member], str | None]:
    """First pass: the regular members (name, size) and why the archive ends early (or None), each
    member counted against the archive budget of the enclosing :func:`limits.archive_scope` (or a new
    one) before its data is read."""
    p = os.fspath(path)
    out: list[Member] = []
    truncated = None
    with limits.archive_scope(p) as ab:
        try:
            for m, _tar in _members(p, what, strict):
                ab.member(m.name, m.size if m.isfile() else 0)
                if m.isfile():
                    out.append(Member(safe_name(m.name) or m.name, m.size))
        except _Truncated as e:
            truncated = str(e)
    return out, truncated


def extract(
    path: str | os.PathLike[str], dest: Path, *, what: str = "archive", skip_over: int | None = None,
    strict: bool = True,
) -> tuple[list[str], list[str]]:  # fmt: skip
    """Both passes (see the module docstring): returns (names of the files extracted, warnings).

    ``strict`` (bundles): a link, device or escaping name refuses the whole archive. Otherwise (sysfs
    snapshots, full of links): such members are left out with a warning and links that stay inside
    ``dest`` are kept (:func:`tarfile.data_filter`). Members larger than ``skip_over`` bytes are left
    out unread, with a warning naming the ``input`` limit."""
    p = os.fspath(path)
    _, truncated = scan(p, what, strict)  # refuses bombs and unsafe members before anything is written
    names: list[str] = []
    warnings: list[str] = []
    root = dest.resolve()
    try:
        for m, tar in _members(p, what, strict):
            if m.isdir():
                continue
            name = safe_name(m.name)
            if skip_over is not None and m.size > skip_over:
                warnings.append(
                    f"{p}:{name or m.name}: {limits.human_size(m.size)}, larger than the input limit of "
                    f"{limits.human_size(skip_over)}; not read ({limits.limit_help('input')})"
                )
                continue
            why = _unwritable(name) if name is not None else "escapes the archive (absolute path or ..)"
            try:
                if why is None and not m.isfile():
                    why = _extract_other(tar, m, root)
                elif why is None:
                    why = _write(tar, m, root, name or "")
            except (tarfile.TarError, EOFError) as e:  # the data of a member ends early
                if truncated:
                    break  # the first pass saw the cut: warned below
                raise InputError(f"corrupt {what}: {e}", p) from None
            if why is not None:
                warnings.append(f"{p}:{m.name[:120]}: member left out: {why}")
                continue
            if m.isfile():
                names.append(name or "")
    except _Truncated:
        pass
    if truncated:
        warnings.append(f"{p}: {truncated}; only the members before the cut were read")
    return names, warnings


def _write(tar: tarfile.TarFile, m: tarfile.TarInfo, root: Path, name: str) -> str | None:
    target = root / name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() or target.is_symlink():
            raise FileExistsError(17, "another member is already there")
        src = tar.extractfile(m)
        with open(target, "wb") as out:
            if src is not None:
                shutil.copyfileobj(src, out, 1 << 20)
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as e:
        return f"collides with another member ({e.strerror or e})"
    except OSError as e:
        return f"cannot be written ({e.strerror or e})"
    return None


def _extract_other(tar: tarfile.TarFile, m: tarfile.TarInfo, root: Path) -> str | None:
    """A link (kept when it stays inside ``root``) or a special file (refused)."""
    if not (m.issym() or m.islnk()):
        return "not a regular file, directory or link"
    try:
        safe = tarfile.data_filter(m, str(root))
    except tarfile.FilterError as e:
        return str(e)
    try:
        tar.extract(safe, root, set_attrs=False, filter="fully_trusted")
    except (OSError, tarfile.TarError) as e:
        return f"cannot be written ({e})"
    return None


def _unwritable(name: str) -> str | None:
    parts = name.split("/")
    if any(len(x.encode("utf-8", "surrogateescape")) > NAME_MAX for x in parts):
        return f"a path component is longer than {NAME_MAX} bytes"
    if len(name.encode("utf-8", "surrogateescape")) > PATH_MAX - 512:
        return f"the name is longer than {PATH_MAX - 512} bytes"
    return None


# --- private temporary directories ----------------------------------------------------------------


def _sweep(base: Path) -> None:
    """Remove ``cd-*`` directories whose owner died: their lock can be taken."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    now = time.time()
    for e in entries:
        if not e.name.startswith("cd-") or not e.is_dir(follow_symlinks=False):
            continue
        try:
            if now - e.stat(follow_symlinks=False).st_mtime < _GRACE_S:
                continue  # just made: its owner may not hold the lock yet
        except OSError:
            continue
        lock = os.path.join(e.path, _LOCK)
        try:
            fd = os.open(lock, os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue  # not ours, or being created (the lock file comes first)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its owner is alive
        try:
            shutil.rmtree(e.path, ignore_errors=True)
        finally:
            os.close(fd)


@contextlib.contextmanager
def private_tempdir(what: str) -> Iterator[Path]:
    """A temporary directory owned by this process (locked), removed on exit; stale ones of dead
    runs are removed first."""
    base = Path(tempfile.gettempdir())
    _sweep(base)
    d = Path(tempfile.mkdtemp(prefix=f"cd-{what}-{os.getpid()}-", dir=base))
    fd = os.open(d / _LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
        os.close(fd)
