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
        # a ladder: each link climbs through the next one, made before it exists, the last one "."
        "ladder": [(f"l{i}", f"l{i + 1}/..", False) for i in range(20)] + [("l20", ".", False),
                   (f"l0/{o}/ladder", "pwned", None)],
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


def zstd_rle_bomb(path: Path, size: int = 64 << 10) -> Path:
    """One zstd frame of RLE blocks (4 bytes each, 128 KiB of zeros out): ``size`` bytes on disk that
    inflate to ``size / 4 * 128 KiB`` (64 KiB -> 2 GiB), written directly, in no time."""
    block = 128 << 10
    n = (size - 6) // 4
    hdr_rle = (block << 3) | (1 << 1)  # Block_Size, Block_Type 1 (RLE), not last
    body = (hdr_rle.to_bytes(3, "little") + b"\x00") * (n - 1)
    last = (hdr_rle | 1).to_bytes(3, "little") + b"\x00"
    # magic, Frame_Header_Descriptor 0 (no content size, no checksum), Window_Descriptor 2**17
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" + bytes([7 << 3]) + body + last)
    return path


def pickle_colliding_keys(path: Path, n: int = 40_000) -> Path:
    """A Flight Recorder dump whose ``pg_status`` dict has ``n`` distinct integer keys that share one
    hash (``i * (2**61 - 1)``: CPython hashes an int modulo 2**61 - 1), so each insert scans all the
    keys before it: 560 KB, n**2/2 comparisons."""
    m = (1 << 61) - 1
    out = io.BytesIO()
    out.write(b"\x80\x02}(")  # PROTO 2, EMPTY_DICT, MARK
    out.write(b"X\x07\x00\x00\x00entries]")  # "entries": []
    out.write(b"X\x09\x00\x00\x00pg_status}(")  # "pg_status": { MARK
    for i in range(1, n + 1):
        k = (i * m).to_bytes(((i * m).bit_length() + 8) // 8, "little", signed=True)
        out.write(b"\x8a" + bytes([len(k)]) + k + b"K\x01")  # LONG1 key, BININT1 1
    out.write(b"uu.")  # SETITEMS, SETITEMS, STOP
    path.write_bytes(out.getvalue())
    return path


_STEP_EVENT = (
    '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 1, '
    '"ts": 1000.5, "dur": 12.25}'
)
IDENTICAL = {"ProfilerStep": _STEP_EVENT}


def kineto_identical_gzip(d: Path, kind: str, inflated: int = 400 << 20) -> Path:
    """A gzip Kineto trace inflating to ``inflated`` bytes of one event repeated: ``ProfilerStep`` (the
    issue: 1.5 GB, 147 s), ``kernel`` (a plain compute kernel) or ``nccl`` (an NCCL kernel with its
    collective arguments)."""
    from tests.hostile import generators as g

    event = {"ProfilerStep": _STEP_EVENT, "kernel": g._KERNEL_EVENT, "nccl": g._NCCL_EVENT}[kind]
    head = b'{"distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": [\n'
    return g.gzip_members(
        d / f"rank0_{kind}.pt.trace.json.gz",
        head,
        (event + ",\n").encode(),
        inflated,
        (event + "]}\n").encode(),
    )


def trace_with_huge_ids(path: Path) -> Path:
    """Ids that do not fit the 64-bit arrays (2**63 correlation, 2**64 stream, -2**63-1, a thread id
    of 2**63) and a ProfilerStep whose number has 5,000 digits."""
    import json

    big = 1 << 63
    ev = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
         "args": {"stream": 7, "correlation": big}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 1, "ts": 0.5,
         "dur": 0.1, "args": {"correlation": big}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, "tid": big, "ts": 0.5, "dur": 0.1},
        {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 3.0, "dur": 2.0,
         "args": {"stream": 1 << 64, "correlation": -big - 1}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + "9" * 5000, "pid": 0, "tid": 1,
         "ts": 0.0, "dur": 10.0},
        {"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 7, "ts": 6.0, "dur": 1.0,
         "args": {"stream": 7, "correlation": 5}},
    ]  # fmt: skip
    path.write_text(json.dumps({"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": ev}))
    return path
