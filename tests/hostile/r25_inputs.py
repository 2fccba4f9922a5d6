"""Issue 25's hostile inputs (archives, traces, pickles, names), generated (never stored): each
function writes one reproducer into a directory and returns its path."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

UP = 40  # ".." steps: more than any temporary folder is deep, so a link that climbs reaches "/"


def _add(
    tar: tarfile.TarFile, name: str, data: bytes = b"", *, link: str | None = None, hard: bool = False
) -> None:
    ti = tarfile.TarInfo(name)
    if link is not None:
        ti.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
        ti.linkname = link
    else:
        ti.size = len(data)
    tar.addfile(ti, io.BytesIO(data) if link is None else None)


def _sysfs_base(tar: tarfile.TarFile) -> None:
    """Enough of a sysfs tree to be read as one: two CPUs in one NUMA node."""
    _add(tar, "sys/devices/system/cpu/online", b"0-1\n")
    _add(tar, "sys/devices/system/node/node0/cpulist", b"0-1\n")
    _add(tar, "sys/devices/system/node/node0/distance", b"10\n")


def link_chain_variants(outside: Path) -> dict[str, list[tuple[str, str, bool | None]]]:
    """Per variant: members (name, link target or data, kind) whose aim is a file in ``outside``
    (absolute). Kind: False symlink, True hard link, None regular file (the second item its data)."""
    o = str(outside).lstrip("/")
    deep = "/".join(["d"] * UP)
    return {
        # the chain: b -> deep path; a -> b/../..(...); b replaced by "."; a/<absolute path>
        "chain": [("b", deep, False), ("a", "b/" + "../" * UP, False), ("b", ".", False),
                  (f"a/{o}/chain", "pwned", None)],
        # a link that climbs directly, then a file through it
        "climb": [("c", "../" * UP + o, False), ("c/climb", "pwned", None)],
        # an absolute link, then a file through it
        "absolute": [("s", str(outside), False), ("s/absolute", "pwned", None)],
        # a link through a not-yet-existing folder (inside when made), the folder then a link to "."
        "dangling": [("e", "f/..", False), ("f", ".", False), (f"e/{o}/dangling", "pwned", None)],
        # a hard link to a file outside, then a regular member of the same name (writes the target)
        "hardlink": [("h", "../" * UP + o + "/victim", True), ("h", "pwned", None)],
        # the tree's own top folder a link out of it, then the tree through it
        "topdir": [("sys2", "../" * UP + o, False), ("sys2/topdir", "pwned", None)],
        # a link to the environment of whoever reads the tree
        "environ": [("sys/devices/system/node/node0/meminfo", "../" * UP + "proc/self/environ", False)],
    }  # fmt: skip


def link_chain_tar(
    path: Path, outside: Path, variants: list[str] | None = None, compress: str = "gz"
) -> Path:
    """A sysfs snapshot tarball carrying the link-chain variants (all of them by default)."""
    chosen = link_chain_variants(outside)
    buf = io.BytesIO()
    with tarfile.open(
        fileobj=buf, mode=f"w:{compress}" if compress else "w", format=tarfile.GNU_FORMAT
    ) as tar:
        _sysfs_base(tar)
        for v in variants or list(chosen):
            for name, what, kind in chosen[v]:
                if kind is None:
                    _add(tar, name, what.encode())
                else:
                    _add(tar, name, link=what, hard=kind)
    path.write_bytes(buf.getvalue())
    return path


def run_py_capped(code: str, *args: str, timeout: float = 60, memory: int = 2 << 30,
                  prefix: tuple[str, ...] = ()) -> tuple[int, str, str]:  # fmt: skip
    """``python -c CODE ARGS`` (optionally under ``prefix``, e.g. ``unshare``) in a child with
    ``memory`` bytes of address space and ``timeout`` seconds: (exit code, stdout, stderr)."""
    import resource
    import subprocess
    import sys

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    p = subprocess.run(
        [*prefix, sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
        preexec_fn=cap,
    )  # fmt: skip
    return p.returncode, p.stdout, p.stderr
