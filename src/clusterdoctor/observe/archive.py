"""Tar archives from other machines (bundles, sysfs tarballs), read safely and within budget.

:func:`extract` streams an archive (plain, gzip, zstd, xz or bzip2) twice: the first pass reads only
the headers and checks every member against the budgets of :mod:`clusterdoctor.observe.limits`
(member count, total size, nesting of archives in archives) and the safety rules (regular files and
directories only, no absolute names, no ``..``), so that a bomb is refused before anything is written;
the second pass writes the members into a private temporary directory from
:func:`private_tempdir`, never through a link: every path is walked from an open descriptor of the
folder with ``O_NOFOLLOW``, and the links a sysfs snapshot keeps are checked against the real tree
when made and again once the last member is in (a chain of links that leads out of the folder, one
link changing where another goes, is removed with a warning). A member that cannot be written (a name too long for the file system, a file
where a directory must go) is left out with a warning; a truncated archive yields the members before
the cut and a warning.

Temporary directories are named ``cd-<what>-<pid>-<random>`` and hold a lock for as long as their
owner lives; each new one first removes those whose owner died (``kill -9``) — the lock, not the PID,
decides, so a live run in another PID namespace sharing ``/tmp`` is never touched.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from clusterdoctor.errors import InputError
from clusterdoctor.observe import limits

__all__ = ["Member", "extract", "private_tempdir", "safe_name"]

_LOCK = ".cd-owner.lock"
_GRACE_S = 60.0  # a directory younger than this is never swept (its owner may be taking the lock)
NAME_MAX = 255  # bytes per path component (ext4, xfs)
_MAX_LINK_ROUNDS = 8  # passes over the links once the tree is complete (a real snapshot needs one)
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
    snapshots, full of links): such members are left out with a warning, and symbolic links are kept
    only while they resolve inside ``dest`` (see :class:`_Writer`: nothing is ever written through a
    link, a link never replaces another member, and every link is checked again against the real
    tree once the last member is in). Members larger than ``skip_over`` bytes are left out unread,
    with a warning naming the ``input`` limit."""
    p = os.fspath(path)
    _, truncated = scan(p, what, strict)  # refuses bombs and unsafe members before anything is written
    names: dict[str, None] = {}  # in order, once each (a later member of the same name replaces it)
    warnings: list[str] = []
    with _Writer(dest) as w:
        try:
            for m, tar in _members(p, what, strict):
                if m.isdir():
                    continue
                name = safe_name(m.name)
                if skip_over is not None and m.size > skip_over:
                    warnings.append(
                        f"{p}:{name or m.name}: {limits.human_size(m.size)}, larger than the input limit "
                        f"of {limits.human_size(skip_over)}; not read ({limits.limit_help('input')})"
                    )
                    continue
                why = _unwritable(name) if name is not None else "escapes the archive (absolute path or ..)"
                try:
                    if why is None and m.issym():
                        why = w.symlink(name or "", m.linkname)
                    elif why is None and m.islnk():
                        why = "a hard link; snapshots are read without them"
                    elif why is None and not m.isfile():
                        why = "not a regular file, directory or link"
                    elif why is None:
                        why = w.file(name or "", tar.extractfile(m))
                except (tarfile.TarError, EOFError) as e:  # the data of a member ends early
                    if truncated:
                        break  # the first pass saw the cut: warned below
                    raise InputError(f"corrupt {what}: {e}", p) from None
                if why is not None:
                    warnings.append(f"{p}:{m.name[:120]}: member left out: {why}")
                    continue
                if m.isfile():
                    names[name or ""] = None
        except _Truncated:
            pass
        for link, why in w.recheck_links():
            warnings.append(f"{p}:{link[:120]}: member left out: {why}")
    if truncated:
        warnings.append(f"{p}: {truncated}; only the members before the cut were read")
    return list(names), warnings


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class _Refused(Exception):
    """A member that cannot be written where its name says; the message says why."""


class _Writer:
    """Writes members under ``root`` without ever following a link it did not check.

    Every path is walked one component at a time from an open descriptor of ``root``
    (``openat`` with ``O_NOFOLLOW``): a member whose folder is a link, or a file where a folder must
    be, is refused; files are created with ``O_EXCL | O_NOFOLLOW``. A symbolic link is created only
    when its target, resolved against the real tree as it stands (the links already there
    included), stays inside ``root``; it never replaces another member. Since a later link can change
    what an earlier one resolves to, :meth:`recheck_links` resolves every link again against the
    finished tree and removes those that point outside (the link chain ``b -> deep/path``,
    ``a -> b/../..``, ``b -> .`` is caught there; ``a/<path>`` was already refused on the way in,
    ``a`` being a link)."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)
        self.links: list[str] = []

    def __enter__(self) -> _Writer:
        self.fd = os.open(self.root, _DIR_FLAGS)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def _parent(self, name: str) -> tuple[int, str]:
        """An open descriptor of the folder ``name`` goes in (created as needed) and its last part."""
        *dirs, last = name.split("/")
        fd = os.dup(self.fd)
        try:
            for i, part in enumerate(dirs):
                try:
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    where = "/".join(dirs[: i + 1])
                    if stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode):
                        raise _Refused(f"its folder {where!r} is a link (never written through)") from None
                    raise _Refused(f"collides with another member ({where!r} is a file)") from None
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd, last

    def file(self, name: str, src: IO[bytes] | None) -> str | None:
        """Write one regular member; why it was left out, or None. A regular file of the same name
        written before is replaced (tar's rule: the later member wins); anything else there is not."""
        try:
            fd, last = self._parent(name)
        except _Refused as e:
            return str(e)
        except OSError as e:
            return f"cannot be written ({e.strerror or e})"
        try:
            try:
                out = os.open(last, _FILE_FLAGS, 0o644, dir_fd=fd)
            except FileExistsError:
                if not stat.S_ISREG(os.lstat(last, dir_fd=fd).st_mode):
                    return "collides with another member (a folder or link of that name)"
                os.unlink(last, dir_fd=fd)
                out = os.open(last, _FILE_FLAGS, 0o644, dir_fd=fd)
            with os.fdopen(out, "wb") as f:
                if src is not None:
                    shutil.copyfileobj(src, f, 1 << 20)
        except (IsADirectoryError, NotADirectoryError) as e:
            return f"collides with another member ({e.strerror or e})"
        except OSError as e:
            if e.errno == errno.ELOOP:
                return "collides with another member (a link of that name)"
            return f"cannot be written ({e.strerror or e})"
        finally:
            os.close(fd)
        return None

    def _inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real == self.root or real.startswith(self.root + os.sep)

    def symlink(self, name: str, target: str) -> str | None:
        """Create one link when it resolves inside the tree now; why it was left out, or None."""
        if not target or "\x00" in target:
            return "a link without a target"
        if os.path.isabs(target):
            return f"a link to the absolute path {target[:120]!r} (outside the {os.path.basename(self.root)})"
        if not self._inside(os.path.join(self.root, os.path.dirname(name), target)):
            return f"a link to {target[:120]!r}, outside the extraction folder"
        try:
            fd, last = self._parent(name)
        except _Refused as e:
            return str(e)
        except OSError as e:
            return f"cannot be written ({e.strerror or e})"
        try:
            os.symlink(target, last, dir_fd=fd)
        except FileExistsError:
            return "collides with another member (a link never replaces one)"
        except OSError as e:
            return f"cannot be written ({e.strerror or e})"
        finally:
            os.close(fd)
        self.links.append(name)
        return None

    def recheck_links(self) -> list[tuple[str, str]]:
        """Resolve every link again against the finished tree; remove (and name) those that now lead
        outside it, until none does (removing one can change where another leads). A chain that is
        still changing after a few rounds costs every link of the archive (each round is one pass)."""
        out: list[tuple[str, str]] = []
        live = list(self.links)
        for round_ in range(_MAX_LINK_ROUNDS + 1):
            if round_ < _MAX_LINK_ROUNDS:
                bad = [n for n in live if not self._inside(os.path.join(self.root, n))]
            else:
                bad = live  # links that keep leading out as others go: none is kept
            if not bad:
                return out
            for n in bad:
                with contextlib.suppress(OSError):
                    fd, last = self._parent(n)
                    try:
                        if stat.S_ISLNK(os.lstat(last, dir_fd=fd).st_mode):
                            os.unlink(last, dir_fd=fd)
                    finally:
                        os.close(fd)
                out.append((n, "a link that leads outside the extraction folder through other links"))
            gone = set(bad)
            live = [n for n in live if n not in gone]
        return out


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
